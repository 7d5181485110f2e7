import types

import pytest

from diffusion_rl.adapters import ModelConfig, build_adapter


def redness(batch):
    """A closed-form image reward for tests: mean red minus mean green/blue, in [-1, 1]."""
    im = batch.images
    return types.SimpleNamespace(total=im[:, 0].mean((1, 2)) - im[:, 1:].mean((1, 2, 3)), components={})


@pytest.fixture(scope="session")
def sd3():
    return build_adapter(ModelConfig(kind="sd3", height=16, width=16, lora=dict_lora()))


def dict_lora():
    from diffusion_rl.adapters import LoraSettings

    return LoraSettings(rank=4, alpha=8)

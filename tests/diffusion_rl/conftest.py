import types

import pytest
import torch

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


def redness_score(adapter, prompts):
    """``(final latents [R, ...], global prompt index [R]) -> redness [R]``: decode and score, the ``score_fn`` of the
    pool / tree x pool / lookahead rollouts in tests."""
    from rewards import RewardBatch

    def score(lat, pidx):
        im = adapter.decode(lat)
        return redness(RewardBatch(images=im, prompts=[prompts[i] for i in pidx.tolist()],
                                   metadata=[{}] * len(pidx))).total
    return score


@pytest.fixture(scope="module")
def explorer(sd3):
    """The NVFP4 rollout copy of ``sd3`` (one per test module)."""
    from diffusion_rl.pool_rollout import QuantizedAdapterView
    from diffusion_rl.quant import QuantConfig, make_rollout_copy

    return QuantizedAdapterView(sd3, make_rollout_copy(sd3.transformer, QuantConfig(format="nvfp4")))


def same_records(a, b):
    """Assert two rollouts' per-step records are bit for bit equal (steps, rows, latents, log-probs)."""
    assert len(a.records) == len(b.records)
    for x, y in zip(a.records, b.records):
        assert x.step == y.step and torch.equal(x.rows, y.rows) and torch.equal(x.prompt_idx, y.prompt_idx)
        assert torch.equal(x.x, y.x) and torch.equal(x.x_next, y.x_next) and torch.equal(x.log_prob, y.log_prob)

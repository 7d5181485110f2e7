import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def tiny_sd3(seed: int = 0):
    """The tiny SD3 MM-DiT of issue 4 (diffusers 0.36 constructor), random weights."""
    from diffusers import SD3Transformer2DModel

    torch.manual_seed(seed)
    return SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8,
                                 num_attention_heads=4, caption_projection_dim=32, joint_attention_dim=32,
                                 pooled_projection_dim=32, out_channels=4).eval()


def sd3_inputs(b: int = 2, seed: int = 1, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return dict(hidden_states=torch.randn(b, 4, 8, 8, generator=g).to(dtype),
                encoder_hidden_states=torch.randn(b, 5, 32, generator=g).to(dtype),
                pooled_projections=torch.randn(b, 32, generator=g).to(dtype),
                timestep=torch.linspace(100, 900, b).to(dtype))


@pytest.fixture
def sd3():
    return tiny_sd3()

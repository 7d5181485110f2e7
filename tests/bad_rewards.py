"""Custom ``module:attr`` rewards that misbehave, for the bad-input battery (tests/test_bad_input.py)."""

import torch

from rewards import RewardOutput


def raises(batch):
    """A reward whose service is down."""
    raise RuntimeError("reward service unavailable")


def nan(batch):
    """A reward that returns NaN for every sample."""
    n = len(batch.prompts)
    return RewardOutput(total=torch.full((n,), float("nan")), components={})


def wrong_shape(batch):
    """A reward that returns one value per batch instead of one per sample."""
    return RewardOutput(total=torch.zeros(len(batch.prompts) + 3), components={})


def empty_canvas(batch):
    """A reward hacked on purpose: closeness of every pixel to the shapes task's background, so an empty canvas
    scores best (1.0) and every drawn object costs reward (tests/diffusion_rl/test_monitors.py)."""
    from rewards.shapes import BACKGROUND

    bg = torch.as_tensor(BACKGROUND, dtype=torch.float32).view(1, 3, 1, 1)
    return RewardOutput(total=1 - (batch.images.float() - bg).abs().mean((1, 2, 3)), components={})

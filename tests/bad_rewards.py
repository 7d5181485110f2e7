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

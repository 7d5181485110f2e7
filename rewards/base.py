"""The reward protocol: a batch in; a total per sample and named components out.

    class Reward(Protocol):
        def __call__(self, batch: RewardBatch) -> RewardOutput

``RewardBatch.images`` are float ``[B, 3, H, W]`` in [0, 1] (videos: ``[B, T, 3, H, W]`` in ``videos`` or,
from the diffusion trainer, in ``images``); ``prompts`` has ``B`` strings. ``RewardOutput.total`` is float32
``[B]``; ``components`` maps names to ``[B]`` tensors (used for logging and for GDPO's decoupled
normalization, ``grpo.advantages.decoupled_advantages``). Non-finite rewards are rejected by
:func:`check_output`, never passed on silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class RewardBatch:
    images: torch.Tensor | None = None  # [B, 3, H, W] in [0, 1] (or [B, T, 3, H, W] video frames)
    prompts: list[str] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    videos: torch.Tensor | None = None  # [B, T, 3, H, W] in [0, 1]

    def __len__(self) -> int:
        x = self.images if self.images is not None else self.videos
        return len(self.prompts) if x is None else int(x.shape[0])


@dataclass
class RewardOutput:
    total: torch.Tensor  # [B] float32
    components: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> [B]


@runtime_checkable
class Reward(Protocol):
    def __call__(self, batch: RewardBatch) -> RewardOutput: ...


def check_output(out: RewardOutput, n: int, name: str) -> RewardOutput:
    """Validate shapes and finiteness; raise naming the reward and the bad rows."""
    if out.total.shape != (n,):
        raise ValueError(f"reward {name!r} returned total of shape {tuple(out.total.shape)}, expected [{n}]")
    bad = torch.nonzero(~torch.isfinite(out.total)).flatten().tolist()
    if bad:
        raise ValueError(f"reward {name!r} returned non-finite values at rows {bad[:10]}")
    for k, v in out.components.items():
        if v.shape != (n,):
            raise ValueError(f"reward {name!r} component {k!r} has shape {tuple(v.shape)}, expected [{n}]")
    return out


def batch_images(batch: RewardBatch) -> torch.Tensor:
    """``[B, 3, H, W]`` images of the batch; video frames are flattened into ``[B*T, 3, H, W]`` by callers."""
    if batch.images is None:
        raise ValueError("this reward needs images [B, 3, H, W] in the batch, got none")
    x = batch.images
    if x.dim() != 4 or x.shape[1] != 3:
        raise ValueError(f"images must be [B, 3, H, W] in [0, 1], got shape {tuple(x.shape)}")
    return x.float().clamp(0, 1)

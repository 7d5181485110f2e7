"""The reward protocol: a batch in; a total per sample and named components out.

    class Reward(Protocol):
        def __call__(self, batch: RewardBatch) -> RewardOutput

``RewardBatch.images`` are float ``[B, 3, H, W]`` in [0, 1]; videos are ``[B, T, 3, H, W]`` in ``videos`` (or,
from the diffusion trainer, a 5-D tensor in ``images``; robot episodes of different lengths: a list of ``B``
videos); ``prompts`` has ``B`` strings; ``metadata`` is an optional list of ``B`` dicts (e.g. ``{"group_id": 3}``;
robot episodes: ``{"task", "success", "group"}``, :mod:`rewards.success`).

``RewardOutput``:

* ``total``: float32 ``[B]``, higher is better -- what the optimizer maximizes.
* ``components``: name -> ``[B]``, higher is better, and ``total`` is their (documented) weighted sum or mean.
  These are the terms GDPO normalizes one by one (``grpo.advantages.decoupled_advantages``), so a quantity
  where lower is better (a file size, a penalty) is never a component.
* ``details``: name -> ``[B]``, logged only (raw scores, distances, sizes, an all-correct accuracy).

:class:`ImageReward` is the base of the image rewards here: a subclass implements
``score(images [N, 3, H, W], prompts [N], metadata [N]) -> RewardOutput`` and gets, for free, video support
(frames flattened to ``[B*T, 3, H, W]``, each prompt repeated ``T`` times, every tensor averaged over ``T``),
input validation and non-finite detection: rows whose images hold NaN/inf and rows the scorer returns as
non-finite are reported by name and row (``nonfinite="warn"``: logged, the rows stay NaN so the trainer's
non-finite guard skips the update; ``"raise"``: :class:`NonFiniteRewardError`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import torch

log = logging.getLogger(__name__)

NonFinite = Literal["warn", "raise", "ignore"]


@dataclass
class RewardBatch:
    images: torch.Tensor | None = None  # [B, 3, H, W] in [0, 1] (or [B, T, 3, H, W] video frames)
    prompts: list[str] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    videos: torch.Tensor | list | None = None  # [B, T, 3, H, W] in [0, 1], or B episode videos of their own lengths

    def __len__(self) -> int:
        x = self.images if self.images is not None else self.videos
        if x is None:
            return len(self.prompts) or len(self.metadata)
        return len(x) if isinstance(x, (list, tuple)) else int(x.shape[0])


@dataclass
class RewardOutput:
    total: torch.Tensor  # [B] float32, higher is better
    components: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> [B], higher is better
    details: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> [B], logged only


@runtime_checkable
class Reward(Protocol):
    def __call__(self, batch: RewardBatch) -> RewardOutput: ...


class NonFiniteRewardError(ValueError):
    """A reward produced NaN/inf (``nonfinite="raise"``)."""


def check_output(out: RewardOutput, n: int, name: str, nonfinite: NonFinite = "raise") -> RewardOutput:
    """Validate shapes (always raises) and finiteness of ``total`` (raise, or log a warning and pass on)."""
    if not isinstance(out, RewardOutput) and not hasattr(out, "total"):
        raise TypeError(f"reward {name!r} returned {type(out).__name__}, expected a RewardOutput")
    if tuple(out.total.shape) != (n,):
        raise ValueError(f"reward {name!r} returned total of shape {tuple(out.total.shape)}, expected [{n}]")
    for group in ("components", "details"):
        for k, v in (getattr(out, group, None) or {}).items():
            if tuple(v.shape) != (n,):
                raise ValueError(f"reward {name!r} {group[:-1]} {k!r} has shape {tuple(v.shape)}, expected [{n}]")
    if nonfinite not in ("warn", "raise", "ignore"):
        raise ValueError(f"nonfinite must be 'warn', 'raise' or 'ignore', got {nonfinite!r}")
    bad = torch.nonzero(~torch.isfinite(out.total)).flatten().tolist()
    if bad and nonfinite != "ignore":
        msg = f"reward {name!r} returned non-finite values at rows {bad[:10]}{' ...' if len(bad) > 10 else ''}"
        if nonfinite == "raise":
            raise NonFiniteRewardError(msg)
        log.warning("%s; they are passed on as NaN (the trainer skips such updates)", msg)
    return out


def concat_outputs(outs: list[RewardOutput]) -> RewardOutput:
    """Outputs of consecutive pieces of one batch joined in order (every piece must name the same components and
    details)."""
    if not outs:
        raise ValueError("no reward outputs to join")
    comps = [set(getattr(o, "components", None) or {}) for o in outs]
    dets = [set(getattr(o, "details", None) or {}) for o in outs]
    if any(c != comps[0] for c in comps) or any(d != dets[0] for d in dets):
        raise ValueError(f"the pieces of one batch name different components / details: {comps} / {dets}")
    return RewardOutput(torch.cat([o.total for o in outs]),
                        {k: torch.cat([o.components[k] for o in outs]) for k in sorted(comps[0])},
                        {k: torch.cat([o.details[k] for o in outs]) for k in sorted(dets[0])})


def batch_frames(batch: RewardBatch) -> tuple[torch.Tensor, int | None]:
    """Images ``[N, 3, H, W]`` in [0, 1] and ``T`` (``None`` for images; ``N = B*T`` for videos)."""
    x = batch.videos if batch.videos is not None else batch.images
    if x is None:
        raise ValueError("the batch holds neither images [B, 3, H, W] nor videos [B, T, 3, H, W]")
    if not torch.is_floating_point(x):
        raise ValueError(f"images/videos must be float in [0, 1], got dtype {x.dtype}")
    if x.dim() == 5 and x.shape[2] == 3:
        b, t = x.shape[:2]
        return x.reshape(b * t, *x.shape[2:]).clamp(0, 1), int(t)
    if x.dim() == 4 and x.shape[1] == 3:
        return x.clamp(0, 1), None
    raise ValueError(f"expected images [B, 3, H, W] or videos [B, T, 3, H, W] in [0, 1], got shape {tuple(x.shape)}")


def _mean_over_frames(v: torch.Tensor, b: int, t: int) -> torch.Tensor:
    return v.reshape(b, t).float().mean(dim=1)


class ImageReward:
    """Base of the image rewards (see module docstring); subclasses set ``name`` and implement :meth:`score`."""

    name: str = "image_reward"
    nonfinite: NonFinite = "warn"

    def score(self, images: torch.Tensor, prompts: list[str], metadata: list[dict[str, Any]]) -> RewardOutput:
        """``images [N, 3, H, W]`` in [0, 1] (all finite), ``N`` prompts -> :class:`RewardOutput` of ``[N]``."""
        raise NotImplementedError

    def __call__(self, batch: RewardBatch) -> RewardOutput:
        frames, t = batch_frames(batch)
        b = frames.shape[0] if t is None else frames.shape[0] // t
        prompts = list(batch.prompts) if batch.prompts else [""] * b
        if len(prompts) != b:
            raise ValueError(f"reward {self.name!r}: {len(prompts)} prompts for a batch of {b}")
        meta = list(batch.metadata) if batch.metadata else [{} for _ in range(b)]
        if len(meta) != b:
            raise ValueError(f"reward {self.name!r}: {len(meta)} metadata entries for a batch of {b}")
        if t is not None:
            prompts = [p for p in prompts for _ in range(t)]
            meta = [m for m in meta for _ in range(t)]
        finite = torch.isfinite(frames).flatten(1).all(dim=1)  # [N]
        if not bool(finite.all()):
            rows = torch.nonzero(~finite).flatten()
            rows = sorted(set((rows // (t or 1)).tolist()))
            msg = f"reward {self.name!r}: input images hold NaN/inf at rows {rows[:10]}"
            if self.nonfinite == "raise":
                raise NonFiniteRewardError(msg)
            log.warning("%s; their rewards are NaN", msg)
            frames = torch.where(finite[:, None, None, None], frames, torch.zeros_like(frames))
        out = self.score(frames, prompts, meta)
        out = check_output(out, frames.shape[0], self.name, nonfinite="ignore")  # shapes, per frame
        if not bool(finite.all()):
            nan = torch.tensor(float("nan"), device=out.total.device)
            keep = finite.to(out.total.device)
            out = RewardOutput(torch.where(keep, out.total.float(), nan),
                               {k: torch.where(keep, v.float(), nan) for k, v in out.components.items()},
                               {k: torch.where(keep, v.float(), nan) for k, v in out.details.items()})
        if t is not None:
            out = RewardOutput(_mean_over_frames(out.total, b, t),
                               {k: _mean_over_frames(v, b, t) for k, v in out.components.items()},
                               {k: _mean_over_frames(v, b, t) for k, v in out.details.items()})
        out.total = out.total.float()
        return check_output(out, b, self.name, self.nonfinite)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``"float32"|"fp32"|"bfloat16"|"bf16"|"float16"|"fp16"`` or a ``torch.dtype`` -> ``torch.dtype``."""
    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if dtype not in table:
        raise ValueError(f"dtype must be one of {sorted(table)} or a torch.dtype, got {dtype!r}")
    return table[dtype]

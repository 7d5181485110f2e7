"""Group-relative advantages: GRPO, MC-GRPO (median), GDPO (decoupled multi-reward), stat tracking.

A *group* is the set of samples that share a prompt (diffusion) or a task + initial state (robot).
Samples are flat ``[N]`` tensors with an integer ``group_ids[N]``; groups may have different sizes
and need not be contiguous.

* GRPO (Shao et al. 2024, DeepSeekMath Eq. 3; Flow-GRPO Eq. 4)::

      A_i = (r_i - mean_g(r)) / (std(r) + eps)

  with ``std`` taken per group (``std_mode="group"``), over the whole batch (``"global"``, as
  Flow-GRPO's ``global_std`` and Dr.GRPO's argument against per-group scaling), or not at all (``"none"``).
  ``std`` is the population std (Flow-GRPO's stat tracker uses ``np.std``). DanceGRPO's and trl's GDPO trainer
  use torch's unbiased ``.std()`` (DanceGRPO with eps 1e-8): their advantages are ours times ``sqrt((G - 1) / G)``
  (0.935 at G = 8), a constant rescale per group size, not a different direction.
* MC-GRPO (median-centred GRPO, ``method="median"``, the reference trainer's rule): sample ``G + 1``
  rollouts per group of ``n = G + 1``, use the group *median* as the baseline and the median absolute deviation
  as the scale, then rescale so the loss's mean over all ``n`` samples weighs only the non-zero advantages::

      A_i = (r_i - median_g(r)) / (MAD_g + 1e-3) * n / #{j in g : A_j != 0},   MAD_g = median_g(|r - median_g(r)|)

  (``std_mode`` and ``eps`` do not apply.) The median of an odd-sized group is one of its samples (the *pivot*);
  its advantage is exactly 0. The returned mask keeps every sample, pivot included, because the reference
  averages the loss over all ``n`` samples and the ``n / #nonzero`` factor is built for that mean.
  For an even-sized group torch's lower median (a sample) is used.
* ``method="median_std"`` (named option, ours): the median baseline scaled like GRPO (``std_mode``, ``eps``), no
  ``n / #nonzero`` factor, and the pivot masked out of the loss (``G`` samples carry gradient). Useful to change
  only GRPO's baseline (mean -> median) while keeping its step size: the reference's MAD scale and factor give
  per-group multipliers of 1.03-207 against the group std.
* GDPO (group reward-decoupled normalization, Liu et al. 2026, Eq. 5-6): normalize each reward
  component separately within its group, then take the weighted sum, then (optionally) normalize the
  sum over the batch::

      A_i = BN( sum_k w_k (r_ik - mean_g(r_k)) / (std_g(r_k) + eps) )

  Unlike GRPO on the summed reward, reward combinations with equal totals keep distinct advantages.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

import torch

AdvantageMethod = Literal["mean_std", "median", "median_std"]
StdMode = Literal["group", "global", "none"]


@dataclass
class Advantages:
    """``values[N]`` float32 advantages and ``mask[N]`` bool: which samples enter the loss."""

    values: torch.Tensor
    mask: torch.Tensor


def _check(rewards: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [N], got shape {tuple(rewards.shape)}")
    if group_ids.shape != rewards.shape:
        raise ValueError(f"group_ids shape {tuple(group_ids.shape)} != rewards shape {tuple(rewards.shape)}")
    if not torch.isfinite(rewards).all():
        bad = torch.nonzero(~torch.isfinite(rewards)).flatten().tolist()
        raise ValueError(f"non-finite rewards at indices {bad[:10]}; refusing to compute advantages")
    _, inverse = torch.unique(group_ids, return_inverse=True)
    return rewards.float(), inverse


def _group_stat(values: torch.Tensor, inverse: torch.Tensor, num_groups: int, stat: str) -> torch.Tensor:
    """Per-group ``mean``/``std`` (population, as GRPO implementations use)/``median``, shape ``[G]``."""
    out = torch.empty(num_groups, dtype=values.dtype, device=values.device)
    for g in range(num_groups):
        v = values[inverse == g]
        if stat == "mean":
            out[g] = v.mean()
        elif stat == "std":
            out[g] = v.std(unbiased=False) if v.numel() > 1 else 0.0
        else:
            out[g] = v.median()
    return out


def group_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    method: AdvantageMethod = "mean_std",
    std_mode: StdMode = "group",
    eps: float = 1e-4,
    clip: float | None = None,
) -> Advantages:
    """Group-relative advantages (GRPO mean/std or MC-GRPO median), see the module docstring.

    Args:
        rewards: ``[N]`` scalar rewards.
        group_ids: ``[N]`` integer group labels.
        method: ``"mean_std"`` (GRPO), ``"median"`` (MC-GRPO as its reference: MAD scale, ``n / #nonzero``
            factor, nothing masked) or ``"median_std"`` (median baseline with ``std_mode`` scaling; pivot masked).
        std_mode: scale by the per-group std, the batch std, or not at all (not used by ``"median"``).
        eps: added to the scale (not used by ``"median"``, whose constant is the reference's 1e-3).
        clip: if set, clamp advantages to ``[-clip, clip]`` (Flow-GRPO's ``adv_clip_max``).
    """
    if method not in ("mean_std", "median", "median_std"):
        raise ValueError(f"unknown advantage method {method!r}; expected 'mean_std', 'median' or 'median_std'")
    if std_mode not in ("group", "global", "none"):
        raise ValueError(f"unknown std_mode {std_mode!r}; expected 'group', 'global' or 'none'")
    r, inv = _check(rewards, group_ids)
    num_groups = int(inv.max()) + 1 if r.numel() else 0
    if method == "median":
        return Advantages(values=clip_advantages(_mc_grpo(r, inv, num_groups), clip),
                          mask=torch.ones_like(r, dtype=torch.bool))
    mask = torch.ones_like(r, dtype=torch.bool)
    if method == "mean_std":
        baseline = _group_stat(r, inv, num_groups, "mean")[inv]
    else:
        baseline = _group_stat(r, inv, num_groups, "median")[inv]
        for g in range(num_groups):  # exactly one pivot per group: the first sample equal to the median
            idx = torch.nonzero((inv == g) & (r == baseline)).flatten()
            mask[idx[0]] = False
    centered = r - baseline
    if std_mode == "group":
        scale = _group_stat(r, inv, num_groups, "std")[inv]
    elif std_mode == "global":
        scale = r.std(unbiased=False).expand_as(r) if r.numel() > 1 else torch.zeros_like(r)
    else:
        scale, eps = torch.ones_like(r), 0.0
    adv = _scaled(centered, scale + eps)
    adv = torch.where(mask, adv, torch.zeros_like(adv))
    return Advantages(values=clip_advantages(adv, clip), mask=mask)


def _scaled(centered: torch.Tensor, denom: torch.Tensor) -> torch.Tensor:
    """``centered / denom`` where ``denom > 0``, else 0 (a constant group / batch / prompt under ``adv_eps = 0``: its
    advantages are 0, not 0/0 = NaN)."""
    ok = denom > 0
    return torch.where(ok, centered / torch.where(ok, denom, torch.ones_like(denom)), torch.zeros_like(centered))


MC_GRPO_EPS = 1e-3  # the reference MC-GRPO trainer's constant in (r - median) / (MAD + 1e-3)


def _mc_grpo(r: torch.Tensor, inv: torch.Tensor, num_groups: int) -> torch.Tensor:
    """MC-GRPO advantages ``[N]``: ``(r - med) / (MAD + 1e-3) * n / #nonzero`` per group (module docstring)."""
    adv = torch.zeros_like(r)
    for g in range(num_groups):
        idx = torch.nonzero(inv == g).flatten()
        v = r[idx]
        med = v.median()
        mad = (v - med).abs().median()
        a = (v - med) / (mad + MC_GRPO_EPS)
        nonzero = int((a != 0).sum())
        adv[idx] = a * (v.numel() / nonzero) if nonzero else a
    return adv


def decoupled_advantages(
    components: dict[str, torch.Tensor],
    group_ids: torch.Tensor,
    weights: dict[str, float] | None = None,
    eps: float = 1e-4,
    batch_norm: bool = True,
    clip: float | None = None,
) -> Advantages:
    """GDPO: per-component group normalization, weighted sum, optional batch normalization.

    Args:
        components: name -> ``[N]`` reward component.
        group_ids: ``[N]`` group labels.
        weights: name -> weight (default 1.0 each). A weight for an unknown component is an error.
        batch_norm: normalize the summed advantage by the batch mean/std (GDPO Eq. 6).
    """
    if not components:
        raise ValueError("decoupled_advantages needs at least one reward component")
    weights = dict(weights or {})
    unknown = set(weights) - set(components)
    if unknown:
        raise ValueError(f"weights given for unknown reward components {sorted(unknown)}; have {sorted(components)}")
    total = None
    for name, r in components.items():
        a = group_advantages(r, group_ids, "mean_std", "group", eps).values * float(weights.get(name, 1.0))
        total = a if total is None else total + a
    assert total is not None
    if batch_norm and total.numel() > 1:  # (a constant batch with eps = 0: zeros, was 0/0 = NaN)
        total = _scaled(total - total.mean(), (total.std(unbiased=False) + eps).expand_as(total))
    return Advantages(values=clip_advantages(total, clip), mask=torch.ones_like(total, dtype=torch.bool))


def clip_advantages(adv: torch.Tensor, clip: float | None) -> torch.Tensor:
    """Clamp to ``[-clip, clip]``; ``None`` leaves ``adv`` unchanged."""
    if clip is None:
        return adv
    if clip <= 0:
        raise ValueError(f"advantage clip must be > 0, got {clip}")
    return adv.clamp(-clip, clip)


class PerPromptStatTracker:
    """Per-prompt reward statistics across steps (DDPO, Black et al. 2023, Sec. 4.3; Flow-GRPO).

    Each prompt keeps its last ``buffer_size`` rewards. A sample's advantage is
    ``(r - mean_p) / (std_p + eps)`` over that history once it holds ``min_count`` rewards, and over
    the current batch before that. ``buffer_size=0`` keeps only the current step (plain per-prompt GRPO).
    ``state_dict``/``load_state_dict`` make it checkpointable.
    """

    def __init__(self, buffer_size: int = 32, min_count: int = 16, eps: float = 1e-4, global_std: bool = False):
        if buffer_size < 0 or min_count < 1:
            raise ValueError(f"need buffer_size >= 0 and min_count >= 1, got {buffer_size}, {min_count}")
        self.buffer_size = buffer_size
        self.min_count = min_count
        self.eps = eps
        self.global_std = global_std
        self.history: dict[str, deque[float]] = {}

    def update(self, prompts: list[str], rewards: torch.Tensor) -> torch.Tensor:
        """Add this step's rewards and return their advantages ``[N]``."""
        if len(prompts) != rewards.numel():
            raise ValueError(f"{len(prompts)} prompts for {rewards.numel()} rewards")
        r = rewards.detach().float().cpu()
        if not torch.isfinite(r).all():
            raise ValueError("non-finite rewards passed to PerPromptStatTracker.update")
        adv = torch.empty_like(r)
        batch_std = r.std(unbiased=False) if r.numel() > 1 else torch.tensor(0.0, device=r.device)
        for prompt in dict.fromkeys(prompts):
            idx = torch.tensor([i for i, p in enumerate(prompts) if p == prompt], device=r.device)
            cur = r[idx]
            if self.buffer_size > 0:
                hist = self.history.setdefault(prompt, deque(maxlen=self.buffer_size))
                hist.extend(cur.tolist())
                pool = torch.tensor(list(hist), device=r.device) if len(hist) >= self.min_count else r
            else:
                pool = cur
            std = batch_std if self.global_std else (pool.std(unbiased=False) if pool.numel() > 1
                                                     else torch.tensor(0.0, device=r.device))
            adv[idx] = _scaled(cur - pool.mean(), (std + self.eps).expand_as(cur))  # (eps = 0: was NaN when constant)
        return adv.to(rewards.device)

    def state_dict(self) -> dict:
        return {"buffer_size": self.buffer_size, "history": {k: list(v) for k, v in self.history.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.history = {k: deque(v, maxlen=self.buffer_size) for k, v in state["history"].items()}

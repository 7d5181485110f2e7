"""The generic GRPO train step shared by both frontends: advantages from a config, a guarded
optimizer step that never applies a non-finite update.

A frontend's loop is::

    adv = compute_advantages(cfg, rewards, group_ids, components)        # once per rollout batch
    for minibatch in ...:
        out = clipped_pg_loss(logp_new, logp_old, adv[idx], mask, cfg.clip_low, cfg.clip_high, kl, cfg.kl_coef)
        backward_if_finite(out.loss / accum, guard)
    stats = guarded_step(params, optimizer, cfg.max_grad_norm, guard)

Across processes (loss scaling, FSDP, gradient all-reduce, agreeing on a skip) the same loop goes through
:class:`grpo.update.DistributedUpdate`.

:class:`NonFiniteGuard` counts consecutive skipped updates (NaN/inf loss, gradient or reward) and raises
:class:`NonFiniteError` with a clear message after ``max_consecutive`` in a row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal

import torch

from .advantages import Advantages, decoupled_advantages, group_advantages
from .config import require_at_least, require_positive
from .tree import MAX_TREE_NODES


@dataclass
class GRPOConfig:
    """Optimizer-side settings shared by every frontend (the YAML ``grpo:`` section)."""

    group_size: int = 8  # samples per group (per prompt / initial state)
    advantage: Literal["mean_std", "median", "median_std", "gdpo"] = "mean_std"  # GRPO, MC-GRPO
        # (median), median_std, GDPO
    std_mode: Literal["group", "global", "none"] = "group"  # GRPO scale: per-group std, batch std, or none
    adv_eps: float = 1e-4  # added to the advantage scale
    adv_clip: float | None = 5.0  # clamp advantages to [-adv_clip, adv_clip] (None: no clamp)
    reward_weights: dict[str, float] = field(default_factory=dict)  # GDPO component weights
    clip_low: float = 1e-4  # PPO ratio clip below 1 (1 - clip_low)
    clip_high: float | None = None  # PPO ratio clip above 1 (None: clip_low; DAPO's clip-higher)
    kl_coef: float = 0.0  # weight of the KL to the reference policy (Flow-GRPO's beta)
    # flow: Flow-GRPO's KL on the SDE means, divided by 2 std_dev_t^2 as Flow-GRPO's code does (so kl_coef means what
    # its beta does); flow_exact: the exact Gaussian KL of the steps (Flow-GRPO's value / -dt); k3: Schulman's k3 on
    # the log-probs. See grpo.loss.
    kl_type: Literal["flow", "flow_exact", "k3"] = "flow"  # flow (Flow-GRPO's scale), flow_exact
                                                           # (exact Gaussian KL) or k3
    loss_reduction: Literal["token_mean", "sample_mean"] = "token_mean"  # average the loss over (sample,
        # step) tokens or over samples
    max_grad_norm: float = 1.0  # gradient clipping norm
    max_nonfinite: int = 3  # consecutive skipped updates before aborting

    def inactive_keys(self, prefix: str = "grpo") -> dict[str, str]:
        """Keys of this section that the chosen ``advantage`` reads nowhere (``prefix.key`` -> why), for the jobs'
        :func:`grpo.config.check_inactive_keys`: ``std_mode`` under GDPO (each component is normalized per group)
        and MC-GRPO (the MAD scales), ``reward_weights`` unless GDPO."""
        out: dict[str, str] = {}
        if self.advantage == "gdpo":
            out[f"{prefix}.std_mode"] = "grpo.advantage='gdpo' (each reward component is normalized per group)"
        else:
            if self.advantage == "median":
                out[f"{prefix}.std_mode"] = "grpo.advantage='median' (MC-GRPO scales by the group's MAD)"
            out[f"{prefix}.reward_weights"] = f"grpo.advantage={self.advantage!r} (component weights are GDPO's)"
        return out

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (group-relative advantages need a group), got {self.group_size}")
        if self.group_size > MAX_TREE_NODES:  # (a tree's leaves are a group too; a typo's 1e9 would run out of memory)
            raise ValueError(f"group_size={self.group_size}: expected at most {MAX_TREE_NODES} samples per group")
        require_at_least("grpo", self, clip_low=0.0, clip_high=0.0, kl_coef=0.0, adv_eps=0.0, max_nonfinite=0)
        require_positive("grpo", self, "adv_clip")
        if self.clip_low >= 1:
            raise ValueError(f"grpo.clip_low must be < 1 (the ratio is clipped below at 1 - clip_low), got "
                             f"{self.clip_low}")
        if self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be > 0, got {self.max_grad_norm}")


def compute_advantages(
    cfg: GRPOConfig,
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    components: dict[str, torch.Tensor] | None = None,
) -> Advantages:
    """Advantages ``[N]`` (and loss mask) for the configured method; GDPO needs ``components``."""
    if cfg.advantage == "gdpo":
        if not components:
            raise ValueError("advantage='gdpo' needs named reward components; the reward returned none")
        return decoupled_advantages(components, group_ids, cfg.reward_weights or None, cfg.adv_eps, clip=cfg.adv_clip)
    return group_advantages(rewards, group_ids, cfg.advantage, cfg.std_mode, cfg.adv_eps, cfg.adv_clip)


def as_float(v) -> float:
    """A diagnostic as a float (a 0-dim tensor on the model's device, or a float)."""
    return float(v.detach() if isinstance(v, torch.Tensor) else v)


class NonFiniteError(RuntimeError):
    """Raised after too many consecutive non-finite updates."""


class NonFiniteGuard:
    """Tracks skipped updates; ``max_consecutive`` skips in a row abort the run."""

    def __init__(self, max_consecutive: int = 3):
        self.max_consecutive = max_consecutive
        self.consecutive = 0
        self.total_skipped = 0
        self.last_reason = ""
        self._pending: str | None = None

    @property
    def pending(self) -> str | None:
        """The reason the current update will be skipped, or None (reset by :meth:`end_step`)."""
        return self._pending

    def flag(self, reason: str) -> None:
        """Mark the current update as bad (it will be skipped by :func:`guarded_step`)."""
        self._pending = self._pending or reason

    def check(self, name: str, value: torch.Tensor) -> bool:
        """True if ``value`` is all finite; otherwise flag the update with a reason naming ``name``."""
        ok = bool(torch.isfinite(value).all())
        if not ok:
            self.flag(f"non-finite {name}")
        return ok

    def end_step(self) -> str | None:
        """Close the current update; return the skip reason (or None) and raise after too many in a row."""
        reason, self._pending = self._pending, None
        if reason is None:
            self.consecutive = 0
            return None
        self.consecutive += 1
        self.total_skipped += 1
        self.last_reason = reason
        if self.consecutive >= self.max_consecutive:
            raise NonFiniteError(
                f"{self.consecutive} consecutive updates skipped (last: {reason}); aborting. "
                "Lower the learning rate, check the reward for NaN, or raise max_nonfinite."
            )
        return reason

    def state_dict(self) -> dict:
        return {"consecutive": self.consecutive, "total_skipped": self.total_skipped}

    def load_state_dict(self, s: dict) -> None:
        self.consecutive, self.total_skipped = int(s["consecutive"]), int(s["total_skipped"])


def backward_if_finite(loss: torch.Tensor, guard: NonFiniteGuard) -> bool:
    """``loss.backward()`` unless the loss is non-finite (then the update is flagged and skipped)."""
    if not guard.check("loss", loss.detach()):
        return False
    loss.backward()
    return True


@dataclass
class StepStats:
    grad_norm: float
    skipped: bool
    reason: str | None


def guarded_step(
    params: Iterable[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    max_grad_norm: float,
    guard: NonFiniteGuard,
    scheduler: object | None = None,
) -> StepStats:
    """Clip gradients and step, unless the loss or the gradient norm is non-finite; always zero grads."""
    params = [p for p in params if p.requires_grad]
    grad_norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm) if params else torch.tensor(0.0, device="cpu")
    guard.check("gradient", grad_norm)
    reason = guard.pending
    if reason is None:
        optimizer.step()
        if scheduler is not None:
            scheduler.step()  # type: ignore[attr-defined]
    optimizer.zero_grad(set_to_none=True)
    guard.end_step()
    return StepStats(float(grad_norm), reason is not None, reason)

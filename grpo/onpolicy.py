"""On-policy self-check: is the rollout's ``log pi_old`` what the training forward computes before the first update?

PPO/GRPO's importance ratio ``r = exp(log pi_theta(a|s) - log pi_old(a|s))`` (Schulman et al. 2017, Eq. 6) must be
exactly 1 on an iteration's first minibatch, before any optimizer step, since ``theta == theta_old`` there. Where the
rollout's stored log-probs and the training forward disagree, the clipped loss sees a ratio that is not 1 for reasons
that have nothing to do with learning: the run is silently off-policy. Every iteration, the trainers hand this module
the first minibatch's recomputed log-probs (the live pass of the first update, no extra forward) beside the stored
ones, and it reports, per iteration and over all ranks::

    onpolicy/max_abs_dlogp    max  |log pi_train - log pi_rollout|          over the checked elements
    onpolicy/mean_abs_dlogp   mean |log pi_train - log pi_rollout|
    onpolicy/max_ratio_dev    max  |exp(log pi_train - log pi_rollout) - 1|
    onpolicy/checked          how many elements (rows x steps / tokens) were compared

A correct run shows ``max_abs_dlogp`` at float precision (0 where the rollout's batch is reproduced exactly, ~1e-7
otherwise). Above ``tol`` the run warns or stops (``action``) with :data:`CAUSES`, the usual reasons and how to
tell which applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import torch

CAUSES = (
    "usual causes, and how to tell which applies: "
    "(1) dropout or another train-mode layer (BatchNorm, stochastic depth) is on in the training forward but not in "
    "the rollout: the gap is large and random, and it disappears when the model is put in eval mode for the update; "
    "(2) a different precision or attention backend between rollout and training (a bf16/fp16 rollout and an fp32 "
    "recompute, flash vs math SDPA): the gap is ~1e-3..1e-2 relative and deterministic, and it disappears when both "
    "use the same dtype/backend (dist.mixed_precision, model.dtype, model.attention); "
    "(3) batch-size-dependent kernels (GEMM blocking, reductions that change with the batch's size or composition): "
    "the gap is tiny (1e-7..1e-5) and vanishes when the update recomputes the rollout's rows in the same batch and "
    "order (e.g. no pruning, minibatch = rollout batch); "
    "(4) the sampler draws noise the log-prob does not see (an extra perturbation, a different eta/sigma or SDE "
    "kind between sampling and the log-prob): the gap is large and the same for every row of a step, and it vanishes "
    "with a deterministic check of sampler.sde / sampler.eta against the log-prob's settings")


class OnPolicyError(RuntimeError):
    """The on-policy gap exceeded the tolerance with ``action: stop``."""


@dataclass
class OnPolicyGap:
    """Accumulates ``|log pi_train - log pi_rollout|`` over the checked elements of one iteration (this rank's)."""

    max_abs: float = 0.0
    sum_abs: float = 0.0
    max_ratio_dev: float = 0.0
    count: int = 0
    nonfinite: int = 0
    seen: bool = field(default=False)
    track_exact: bool = False  # also report ``logp_recompute_gap`` (see :meth:`add`'s ``exact``)
    exact_max_abs: float = 0.0

    def add(self, logp_train: torch.Tensor, logp_rollout: torch.Tensor, mask: torch.Tensor | None = None,
            exact: bool = False) -> None:
        """Compare ``logp_train`` (any shape, e.g. ``[B]`` diffusion rows or ``[B, T]`` VLA tokens) with the stored
        ``logp_rollout`` (same shape); ``mask`` (bool, broadcastable) selects the elements that count. ``exact``: the
        training batch reproduces the rollout's (same rows, same order), so the gap must be exactly 0; its maximum is
        also kept, in the log-probs' own precision, as ``logp_recompute_gap``."""
        if exact:
            gap = (logp_train.detach() - logp_rollout.detach().to(logp_train.device)).abs().max()
            self.exact_max_abs = max(self.exact_max_abs, float(gap))
        d = (logp_train.detach().double() - logp_rollout.detach().to(logp_train.device).double())
        if mask is not None:
            d = d[mask.to(d.device).bool().expand_as(d)]
        d = d.flatten()
        self.seen = True
        if d.numel() == 0:
            return
        fin = torch.isfinite(d)
        self.nonfinite += int((~fin).sum())
        d = d[fin].abs()
        if d.numel() == 0:
            return
        self.max_abs = max(self.max_abs, float(d.max()))
        self.sum_abs += float(d.sum())
        self.max_ratio_dev = max(self.max_ratio_dev, float(torch.expm1(d).abs().max()))  # |e^{+-d} - 1| <= e^d - 1
        self.count += int(d.numel())

    def scalars(self, global_sum: Callable[[list[float]], list[float]] | None = None,
                global_max: Callable[[list[float]], list[float]] | None = None) -> dict[str, float]:
        """The iteration's ``onpolicy/*`` scalars, reduced over ranks with the given collectives (every rank calls
        them: ``DistributedUpdate.global_sum`` / ``global_max``); {} when nothing was checked on any rank."""
        s, n, nf = self.sum_abs, float(self.count), float(self.nonfinite)
        m, r, seen, exact = self.max_abs, self.max_ratio_dev, float(self.seen), self.exact_max_abs
        if global_sum is not None:
            s, n, nf = global_sum([s, n, nf])
        if global_max is not None:
            m, r, seen, exact = global_max([m, r, seen, exact])
        gap = {"logp_recompute_gap": exact} if self.track_exact else {}
        if not seen:
            return gap
        out = {**gap, "onpolicy/max_abs_dlogp": m, "onpolicy/mean_abs_dlogp": s / n if n else 0.0,
               "onpolicy/max_ratio_dev": r, "onpolicy/checked": n}
        if nf:
            out["onpolicy/nonfinite"] = nf
            out["onpolicy/max_abs_dlogp"] = float("inf")
        return out


Action = Literal["warn", "stop", "off"]


def check_onpolicy(scalars: dict[str, float], tol: float, action: Action, iteration: int, where: str,
                   say: Callable[[str], None] = print) -> None:
    """Warn (``say``) or raise :class:`OnPolicyError` when ``onpolicy/max_abs_dlogp > tol`` (``action``: warn | stop |
    off). ``where`` names the config keys in the message (e.g. ``"train.onpolicy_tol"``)."""
    if action == "off" or "onpolicy/max_abs_dlogp" not in scalars:
        return
    gap = scalars["onpolicy/max_abs_dlogp"]
    if gap <= tol:
        return
    msg = (f"iteration {iteration}: off-policy before the first update: max |log pi_train - log pi_rollout| = "
           f"{gap:.3g} (mean {scalars.get('onpolicy/mean_abs_dlogp', float('nan')):.3g}, max |ratio - 1| = "
           f"{scalars.get('onpolicy/max_ratio_dev', float('nan')):.3g}) > {where} = {tol:g}; the stored rollout "
           f"log-probs are not what the training forward computes. {CAUSES}")
    if action == "stop":
        raise OnPolicyError(msg + f" (stopping: {where.rsplit('_', 1)[0]}_action=stop)")
    say("warning: " + msg)


def validate(tol: float, prefix: str) -> None:
    """Config check of ``<prefix>_tol`` (one clear line on a bad value; ``<prefix>_action`` is an :data:`Action`
    ``Literal`` that the config loader checks)."""
    if not tol >= 0:
        raise ValueError(f"{prefix}_tol must be >= 0, got {tol}")

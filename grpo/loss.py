"""Clipped policy-gradient loss (PPO/GRPO) with asymmetric clipping, masks and optional KL.

For each element (a denoising step of a sample, or an action chunk step / token)::

    rho   = exp(logp_new - logp_old)                                   (computed in float32)
    L_pg  = max(-A * rho, -A * clip(rho, 1 - eps_low, 1 + eps_high))   (PPO, Schulman et al. 2017, Eq. 7)

``eps_high > eps_low`` is DAPO's clip-higher (Yu et al. 2025, Eq. 10). The loss is averaged over the
elements where ``mask`` is True (``"token_mean"``), or per sample first and then over samples
(``"sample_mean"``). An optional KL to a reference policy is added with weight ``kl_coef``:

* ``flow_kl(mean_new, mean_ref, scale)``: the KL on the Gaussian means of the SDE steps of the policy and
  the reference, ``||mu_new - mu_ref||^2 / (2 scale^2)`` averaged over the non-batch dims (Flow-GRPO Eq. 12).
  Which ``scale`` is the caller's choice, set by ``GRPOConfig.kl_type``:

  - ``kl_type="flow"`` (default): ``scale = SDEStepOutput.std_dev_t``, what Flow-GRPO's code divides by
    (``scripts/train_sd3.py``: ``mean((mu - mu_ref)^2) / (2 * std_dev_t^2)`` with the ``std_dev_t`` that
    ``sde_step_with_logprob`` returns, i.e. ``sigma_t`` *without* the ``sqrt(-dt)``). So ``kl_coef`` means what
    it means in Flow-GRPO's configs (``beta = 0.04`` there, copied by ``configs/diffusion/sd35m_pickscore.yaml``).
    For the CPS kinds ``std_dev_t`` is the step's std, so this is the exact KL there (as in Flow-GRPO's ``cps``).
  - ``kl_type="flow_exact"`` (named option): ``scale = SDEStepOutput.std``, the exact KL between the two Gaussian
    steps. For flow_grpo it is the reference's value times ``1 / (-dt)`` (4-29x on 10 steps at shift 3), so a
    ``kl_coef`` copied from Flow-GRPO weighs the KL that much more; use it when the KL should be a true KL
    (e.g. comparable across schedules and step counts).
* ``k3_kl(logp_new, logp_ref)``: Schulman's unbiased, positive estimator ``exp(d) - d - 1``,
  ``d = logp_ref - logp_new`` (used by GRPO, Shao et al. 2024, Eq. 4).

:func:`reference_kl` is the one place that choice is made (every trainer calls it): ``kl_type`` ``"flow"`` /
``"flow_exact"`` on SDE steps (those that carry ``std_dev_t``), ``k3`` otherwise (``kl_type="k3"``, or a head
without SDE steps such as a Gaussian action head).

Shapes: ``logp_new``, ``logp_old``, ``mask``, ``kl``: ``[B, T]`` (or ``[B]``); ``advantages``: ``[B]`` or
``[B, T]`` (broadcast over ``T``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


@dataclass
class PGLossOutput:
    loss: torch.Tensor  # scalar: pg + kl_coef * kl
    pg_loss: torch.Tensor  # scalar
    kl: torch.Tensor  # scalar (0 when no KL given)
    clip_frac: torch.Tensor  # fraction of masked elements where the clipped branch was active
    approx_kl: torch.Tensor  # 0.5 * mean((logp_new - logp_old)^2), a drift diagnostic
    ratio_mean: torch.Tensor


def _masked_mean(x: torch.Tensor, mask: torch.Tensor, reduction: str) -> torch.Tensor:
    m = mask.to(x.dtype)
    if reduction == "token_mean":
        return (x * m).sum() / m.sum().clamp(min=1.0)
    if x.dim() == 1:
        return (x * m).sum() / m.sum().clamp(min=1.0)
    per_sample = (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
    has_any = (m.sum(dim=1) > 0).to(x.dtype)
    return (per_sample * has_any).sum() / has_any.sum().clamp(min=1.0)


def clipped_pg_loss(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    reduction: Literal["token_mean", "sample_mean"] = "token_mean",
) -> PGLossOutput:
    """The clipped surrogate (see module docstring). ``clip_high=None`` means symmetric (= ``clip_low``)."""
    if logp_new.shape != logp_old.shape:
        raise ValueError(f"logp_new shape {tuple(logp_new.shape)} != logp_old shape {tuple(logp_old.shape)}")
    if clip_low < 0 or (clip_high is not None and clip_high < 0):
        raise ValueError(f"clip ranges must be >= 0, got low={clip_low} high={clip_high}")
    if reduction not in ("token_mean", "sample_mean"):
        raise ValueError(f"unknown reduction {reduction!r}; expected 'token_mean' or 'sample_mean'")
    clip_high = clip_low if clip_high is None else clip_high
    lp_new = logp_new.float()
    lp_old = logp_old.detach().float()
    adv = advantages.detach().float()
    if adv.dim() == 1 and lp_new.dim() == 2:
        adv = adv[:, None]
    adv = adv.expand_as(lp_new)
    mask = torch.ones_like(lp_new, dtype=torch.bool) if mask is None else mask.bool().expand_as(lp_new)

    log_ratio = lp_new - lp_old
    ratio = torch.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_elem = torch.maximum(unclipped, clipped)
    pg = _masked_mean(per_elem, mask, reduction)

    kl_val = torch.zeros((), dtype=torch.float32, device=lp_new.device)
    if kl is not None:
        kl_val = _masked_mean(kl.float().expand_as(lp_new), mask, reduction)
    loss = pg + kl_coef * kl_val if kl is not None else pg

    with torch.no_grad():
        m = mask.float()
        denom = m.sum().clamp(min=1.0)
        clip_frac = ((clipped > unclipped).float() * m).sum() / denom
        approx_kl = (0.5 * log_ratio**2 * m).sum() / denom
        ratio_mean = (ratio * m).sum() / denom
    return PGLossOutput(loss, pg, kl_val, clip_frac, approx_kl, ratio_mean)


def flow_kl(mean_new: torch.Tensor, mean_ref: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``(mu_new - mu_ref)^2 / (2 std^2)`` per sample ``[B]``, averaged over non-batch dims (Flow-GRPO Eq. 12).

    With ``std`` the step's noise std this is KL(N(mu_new, s^2) || N(mu_ref, s^2)) exactly (``kl_type="flow_exact"``);
    with ``std = SDEStepOutput.std_dev_t`` it is Flow-GRPO's code's KL (``kl_type="flow"``, the default), see the
    module docstring and :func:`flow_kl_scale`. Rows with ``std == 0`` (deterministic steps) give 0.
    """
    s = std.float().expand_as(mean_new)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    kl = (mean_new.float() - mean_ref.detach().float()) ** 2 / (2 * safe**2)
    kl = torch.where(s > 0, kl, torch.zeros_like(kl))
    return kl.mean(dim=tuple(range(1, kl.dim()))) if kl.dim() > 1 else kl


def k3_kl(logp_new: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(new || ref) per element: ``exp(d) - d - 1``, ``d = logp_ref - logp_new``."""
    d = logp_ref.detach().float() - logp_new.float()
    return torch.exp(d) - d - 1.0


def flow_kl_scale(kl_type: str, std: torch.Tensor, std_dev_t: torch.Tensor | None) -> torch.Tensor:
    """The divisor :func:`flow_kl` takes for ``kl_type``: ``std_dev_t`` for ``"flow"`` (Flow-GRPO's scale, the
    default; ``std`` when a head has no separate ``std_dev_t``, e.g. a Gaussian head) and ``std`` for
    ``"flow_exact"``."""
    if kl_type == "flow_exact" or std_dev_t is None:
        return std
    if kl_type != "flow":
        raise ValueError(f"flow_kl_scale: kl_type must be 'flow' or 'flow_exact', got {kl_type!r}")
    return std_dev_t


def reference_kl(kl_type: str, logp: torch.Tensor, ref_logp: torch.Tensor, mean: torch.Tensor | None = None,
                 ref_mean: torch.Tensor | None = None, std: torch.Tensor | None = None,
                 std_dev_t: torch.Tensor | None = None) -> torch.Tensor:
    """The per-token KL to the reference policy that ``GRPOConfig.kl_type`` names, shaped like ``logp [*L]``.

    ``kl_type="k3"``, or no ``std_dev_t`` (the tokens are not SDE steps, e.g. a Gaussian action head):
    :func:`k3_kl` ``(logp, ref_logp)``. Otherwise (``"flow"`` / ``"flow_exact"``) :func:`flow_kl` on the Gaussian
    means ``mean``, ``ref_mean [*L, ...]`` with the divisor :func:`flow_kl_scale` picks from ``std`` / ``std_dev_t``
    (``[*L, 1, ..., 1]``), averaged over the dims after ``*L``.
    """
    if kl_type == "k3" or std_dev_t is None:
        return k3_kl(logp, ref_logp)
    if mean is None or ref_mean is None or std is None:
        raise ValueError(f"kl_type={kl_type!r} needs the Gaussian means and std of both policies' steps")
    n = logp.dim()
    scale = flow_kl_scale(kl_type, std, std_dev_t)
    return flow_kl(mean.flatten(0, n - 1), ref_mean.flatten(0, n - 1), scale.flatten(0, n - 1)).reshape(logp.shape)

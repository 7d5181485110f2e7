"""DiffusionNFT: the negative-aware fine-tuning objective on the forward (noising) process.

DiffusionNFT (Zheng et al. 2025, "DiffusionNFT: Online Diffusion Reinforcement with Forward Process") trains a
flow-matching velocity model by plain flow-matching regression on the policy's own samples, contrasting two
*implicit* policies built from the old (rollout) velocity ``v_old`` and the current one ``v_theta``::

    v+ = (1 - beta) v_old + beta v_theta          (implicit positive policy)
    v- = (1 + beta) v_old - beta v_theta          (implicit negative policy)

    L  = E[ r ||v+(x_t, t) - v_target||^2 + (1 - r) ||v-(x_t, t) - v_target||^2 ]

with ``x_t = (1 - t) x_0 + t eps`` a re-noised final sample ``x_0``, ``v_target = eps - x_0`` (rectified flow, the
convention of :mod:`grpo.flow_sde`) and ``r in [0, 1]`` the *optimality probability* of the sample, a normalized
reward (``r = 0.5 + 0.5 clip(A / A_max, -1, 1)`` from a group-relative advantage ``A``; see
:func:`optimality_probability`). High-reward samples pull ``v+`` (hence ``v_theta``) towards them, low-reward samples
push ``v-`` towards them, i.e. ``v_theta`` away. No likelihoods, no SDE: any (ODE) sampler works, which is why
Sol-RL uses it as the second objective alongside the low-precision exploration pool.

Shapes: ``v_theta``, ``v_old``, ``v_target``: ``[B, ...]``; ``r``: ``[B]``; returns a scalar (mean over the batch of the
per-sample mean over elements), plus the per-sample terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class NFTLossOutput:
    loss: torch.Tensor  # [] scalar
    positive: torch.Tensor  # [B] ||v+ - v_target||^2 (per-sample mean over elements)
    negative: torch.Tensor  # [B] ||v- - v_target||^2


def optimality_probability(advantages: torch.Tensor, adv_max: float = 5.0) -> torch.Tensor:
    """``r = 0.5 + 0.5 * clip(A / adv_max, -1, 1)`` in [0, 1] (DiffusionNFT's normalized reward)."""
    if adv_max <= 0:
        raise ValueError(f"adv_max must be > 0, got {adv_max}")
    return 0.5 + 0.5 * (advantages.float() / adv_max).clamp(-1.0, 1.0)


def nft_loss(v_theta: torch.Tensor, v_old: torch.Tensor, v_target: torch.Tensor, r: torch.Tensor,
             beta: float = 1.0) -> NFTLossOutput:
    """The DiffusionNFT loss (see module docstring); gradients flow through ``v_theta`` only."""
    if v_theta.shape != v_old.shape or v_theta.shape != v_target.shape:
        raise ValueError(f"v_theta {tuple(v_theta.shape)}, v_old {tuple(v_old.shape)} and v_target "
                         f"{tuple(v_target.shape)} must have the same shape")
    if r.shape != (v_theta.shape[0],):
        raise ValueError(f"r must have shape [{v_theta.shape[0]}], got {tuple(r.shape)}")
    if bool(((r < 0) | (r > 1)).any()):
        raise ValueError(f"r must lie in [0, 1] (a normalized reward), got min {float(r.min())} max {float(r.max())}")
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    vt, vo, tgt = v_theta.float(), v_old.detach().float(), v_target.detach().float()
    v_pos = (1 - beta) * vo + beta * vt
    v_neg = (1 + beta) * vo - beta * vt
    dims = tuple(range(1, vt.dim()))
    pos = ((v_pos - tgt) ** 2).mean(dim=dims) if dims else (v_pos - tgt) ** 2
    neg = ((v_neg - tgt) ** 2).mean(dim=dims) if dims else (v_neg - tgt) ** 2
    r = r.float()
    loss = (r * pos + (1 - r) * neg).mean()
    return NFTLossOutput(loss, pos, neg)

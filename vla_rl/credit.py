"""The VLA frontend's credit: dynamic sampling (DAPO's band on a group's success rate) and the episodes' GRPO
advantages over the kept groups, computed on the global batch (identically on every rank)."""

from __future__ import annotations

import torch

from grpo.train_step import GRPOConfig, compute_advantages


def group_keep_mask(success: torch.Tensor, group_ids: torch.Tensor,
                    band: tuple[float, float]) -> tuple[torch.Tensor, int]:
    """Dynamic sampling: ``[N]`` bool, True for episodes whose group's success rate lies strictly inside ``band``;
    returns ``(mask, number of kept groups)``. The default band (0, 1) drops all-fail and all-success groups."""
    keep = torch.zeros_like(success, dtype=torch.bool)
    kept = 0
    for g in torch.unique(group_ids):
        m = group_ids == g
        rate = float(success[m].float().mean())
        if band[0] < rate < band[1]:
            keep |= m
            kept += 1
    return keep, kept


def episode_advantages(cfg: GRPOConfig, rew, gids: torch.Tensor,
                       keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(adv [E], keep [E])``: GRPO advantages of the episodes (rewards ``rew.total [E]``, components, group ids
    ``gids [E]``) over the kept groups' episodes (0 elsewhere, and where the advantage's own mask drops a row, which
    ``keep`` then drops too)."""
    adv = torch.zeros(len(gids), device="cpu")
    idx = torch.nonzero(keep).flatten()
    comps = {k: v[idx] for k, v in rew.components.items()}
    a = compute_advantages(cfg, rew.total[idx], gids[idx], comps)
    adv[idx] = torch.where(a.mask, a.values, torch.zeros_like(a.values))
    keep = keep.clone()
    keep[idx] &= a.mask
    return adv, keep


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Rank correlation of two ``[N]`` tensors (average ranks for ties); 0 when either is constant."""
    from scipy.stats import spearmanr

    if a.unique().numel() < 2 or b.unique().numel() < 2:
        return 0.0
    return float(spearmanr(a.numpy(), b.numpy()).statistic)

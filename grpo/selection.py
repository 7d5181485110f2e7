"""Choose a training subset from a pool of scored candidates ("pool, select, train").

Used by pool-then-train schemes such as Sol-RL's low-precision exploration: K cheap candidates per
prompt are scored, N of them are regenerated at full precision and trained on. The subset should be
*contrastive*: GRPO's signal is the spread of rewards inside a group.

Methods (``rewards: [K]`` -> ``LongTensor[N]`` of distinct indices, sorted ascending):

* ``"best_worst"``: the ``ceil(N/2)`` highest and ``floor(N/2)`` lowest rewards.
* ``"mean_deviation"``: the ``N`` rewards with the largest ``|r - mean(r)|``.
* ``"random"``: a uniform subset (the unbiased baseline).
* ``"extremes_random"``: the best and the worst, plus ``N - 2`` uniformly among the rest.

Ties break by index (stable sort), so results are deterministic for a given generator.
"""

from __future__ import annotations

from typing import Literal

import torch

SelectMethod = Literal["best_worst", "mean_deviation", "random", "extremes_random"]
SELECT_METHODS = ("best_worst", "mean_deviation", "random", "extremes_random")


def select_subset(
    rewards: torch.Tensor, n: int, method: SelectMethod = "best_worst", generator: torch.Generator | None = None
) -> torch.Tensor:
    """Indices ``[n]`` of the candidates to keep (see module docstring)."""
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [K], got shape {tuple(rewards.shape)}")
    k = rewards.numel()
    if not 1 <= n <= k:
        raise ValueError(f"cannot select n={n} of K={k} candidates; need 1 <= n <= K")
    if method not in SELECT_METHODS:
        raise ValueError(f"unknown selection method {method!r}; expected one of {SELECT_METHODS}")
    r = rewards.detach().float().cpu()
    if method == "best_worst":
        order = torch.argsort(r, descending=True, stable=True)
        n_top = (n + 1) // 2
        idx = torch.cat([order[:n_top], order[k - (n - n_top):] if n - n_top else order[:0]])
    elif method == "mean_deviation":
        idx = torch.argsort((r - r.mean()).abs(), descending=True, stable=True)[:n]
    elif method == "random":
        idx = torch.randperm(k, generator=generator, device=generator.device if generator is not None else "cpu")[:n]
    else:
        order = torch.argsort(r, descending=True, stable=True)
        ext = order[:1] if n == 1 else torch.stack([order[0], order[-1]])
        rest = order[1:-1] if n > 1 else order[:0]
        idx = torch.cat([ext, rest[torch.randperm(rest.numel(), generator=generator,
                                                  device=generator.device if generator is not None
                                                  else "cpu")[: n - ext.numel()]]])
    idx = torch.sort(idx).values
    assert idx.unique().numel() == n
    return idx


def select_per_group(
    rewards: torch.Tensor, n: int, method: SelectMethod = "best_worst", generator: torch.Generator | None = None
) -> torch.Tensor:
    """Row-wise :func:`select_subset` for a pool ``[G, K]``: indices ``[G, n]`` into each row."""
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [G, K], got shape {tuple(rewards.shape)}")
    return torch.stack([select_subset(row, n, method, generator) for row in rewards])

"""MixGRPO's sliding window (Li et al. 2025, "MixGRPO: Unlocking Flow-based GRPO Efficiency with Mixed ODE-SDE"):
which consecutive positions (denoising steps for the SDE window, or tree depths for BranchGRPO's depth pruning)
are active at an iteration."""

from __future__ import annotations


def sliding_window(iteration: int, num_positions: int, window: int, stride: int = 1) -> list[int]:
    """Positions ``[start, start + window)`` active at ``iteration``; the window advances one position
    every ``stride`` iterations and wraps around (depth pruning; BranchGRPO-Mix's SDE window)."""
    if not 1 <= window <= num_positions:
        raise ValueError(f"window must be in [1, {num_positions}], got {window}")
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    start = (iteration // stride) % (num_positions - window + 1)
    return list(range(start, start + window))

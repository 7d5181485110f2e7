"""The binary success reward of robot episodes, and the episode metadata that robot rewards read.

    r_i = 1 if episode i succeeded (the simulator's own success test) else 0

A robot batch is a ``rewards.base.RewardBatch`` whose ``metadata[i]`` describes episode ``i``: ``task`` (the env
name, str), ``success`` (bool) and, optionally, ``group`` (int: episodes of the same task and initial state);
``videos`` holds the episodes' frames when a reward reads them (``rewards.srpo``). :func:`episode_metadata`
writes these dicts, :func:`episode_fields` reads them back as ``(tasks, success[N] bool, groups or None)``.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .base import RewardBatch, RewardOutput


def episode_metadata(tasks: Sequence[str], success: torch.Tensor, groups: Sequence[int] | None = None) -> list[dict]:
    """``N`` metadata dicts ``{"task", "success"[, "group"]}`` from ``tasks`` (N), ``success`` ``[N]`` and ``groups``
    (N)."""
    flags = torch.as_tensor(success, device="cpu").bool().tolist()
    if len(tasks) != len(flags) or (groups is not None and len(groups) != len(flags)):
        raise ValueError(f"{len(flags)} success flags but {len(tasks)} tasks"
                         + ("" if groups is None else f" and {len(groups)} groups"))
    return [{"task": str(t), "success": bool(s), **({} if groups is None else {"group": int(groups[i])})}
            for i, (t, s) in enumerate(zip(tasks, flags))]


def episode_fields(metadata: Sequence[dict], reward: str) -> tuple[list[str], torch.Tensor, list[int] | None]:
    """``(tasks, success[N] bool on the CPU, groups or None)`` from the batch's metadata (``reward`` names the caller
    in the error when a field is missing). ``groups`` is None unless every episode has one."""
    missing = [i for i, m in enumerate(metadata) if "task" not in m or "success" not in m]
    if missing:
        raise ValueError(f"reward {reward!r} needs metadata with 'task' and 'success' for every episode; rows "
                         f"{missing[:10]} lack them (rewards.success.episode_metadata writes them)")
    tasks = [str(m["task"]) for m in metadata]
    success = torch.tensor([bool(m["success"]) for m in metadata], dtype=torch.bool, device="cpu")
    groups = [int(m["group"]) for m in metadata] if metadata and all("group" in m for m in metadata) else None
    return tasks, success, groups


def success_reward(batch: RewardBatch) -> RewardOutput:
    """The plain sparse reward: 1 on success, 0 otherwise (``total`` and the component ``success``, ``[N]`` on the
    CPU)."""
    s = episode_fields(batch.metadata, "success")[1].float()
    return RewardOutput(total=s, components={"success": s})

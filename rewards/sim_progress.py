"""The simulator's own task progress as SRPO's failure reward: the ceiling SRPO's latent progress approximates.

``rl.reward: sim_progress`` (:class:`SimProgressReward`). SRPO (:mod:`rewards.srpo`) grades a failed episode by how
close it came, in a learned latent space, to the batch's successes of its task. This reward keeps SRPO's rule and
scale exactly and swaps only where the "how close" number comes from: the simulator's own dense progress measure
of the episode's final state (``info["progress"]`` after the last step, in [0, 1]; the tabletop suite's measure of
``sims/tabletop/tasks.py``, e.g. reach: ``1 - distance / initial distance``), which no real robot has. Per task::

    p_i   = the simulator's progress of episode i's final state       in [0, 1] (1 exactly on success)
    d_i   = 1 - p_i                                                   the distance still to go (SRPO: d_i, the
                                                                      latent distance to the nearest success centre)
    u_i   = (d_i - min_F d) / (max_F d - min_F d)                     min-max over the task's failures F (0.5 for
                                                                      all when the range is < 1e-6)
    r_i   = 1                                                         if success
    r_i   = progress_max * sigmoid(10 * (0.5 - u_i))                  otherwise (srpo.progress_max, 0.6)

(:func:`rewards.srpo.distance_progress` computes ``sigmoid(10 (0.5 - u))`` for both.) As in SRPO, a task with no
success in the batch has no reference: its failures keep the binary reward 0, so the two rewards give the same
number of graded groups and differ only in the order and spacing of the failures' values. Only the task rule
exists here (SRPO's ``srpo.reference: group`` measures distances to a group's own successes, which the
simulator's progress does not use).

The batch: ``metadata[i]`` holds ``task``, ``success`` and ``progress`` (float, the simulator's), as
:func:`sim_progress_metadata` writes them; no videos. Components (GDPO): ``success`` (0/1) and ``progress``
(1 for successes, ``sigmoid(10 (0.5 - u))`` for graded failures, 0 for ungraded ones), all ``[N]`` float32 on the CPU;
``details["sim_progress"]`` is the raw ``p`` ``[N]``.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
import torch

from .base import RewardBatch, RewardOutput
from .srpo import distance_progress
from .success import episode_fields, episode_metadata

PROGRESS_SUITES = ("tabletop/",)  # env.tasks whose env reports a dense simulator progress in info["progress"]


def has_sim_progress(task: str) -> bool:
    """Whether ``task``'s env reports a dense simulator progress measure (``info["progress"]``) that can order
    failures: the tabletop suite's tasks (robosuite reports its shaped reward only with ``reward: dense``, LIBERO
    ``float(success)``, a world model its success probability, a robot nothing)."""
    return any(task.startswith(s) for s in PROGRESS_SUITES)


def sim_progress_metadata(tasks: Sequence[str], success: torch.Tensor, progress: Sequence[float] | torch.Tensor,
                          groups: Sequence[int] | None = None) -> list[dict]:
    """:func:`rewards.success.episode_metadata` plus each episode's simulator ``progress`` (``N`` floats)."""
    meta = episode_metadata(tasks, success, groups)
    prog = torch.as_tensor(progress, dtype=torch.float64, device="cpu").reshape(-1).tolist()
    if len(prog) != len(meta):
        raise ValueError(f"{len(meta)} episodes but {len(prog)} progress values")
    for m, p in zip(meta, prog):
        m["progress"] = float(p)
    return meta


class SimProgressReward:
    """``reward(RewardBatch) -> RewardOutput``: the module docstring's rule, failures scaled by ``progress_max``
    (``srpo.progress_max``)."""

    name = "sim_progress"

    def __init__(self, progress_max: float = 0.6, noise: float = 0.0):
        if not 0.0 <= progress_max < 1.0:
            raise ValueError(f"progress_max must be in [0, 1) so that failures stay below successes, got "
                             f"{progress_max}")
        if not (np.isfinite(noise) and noise >= 0):
            raise ValueError(f"noise must be a finite number >= 0 (the failures' distance noise in units of their "
                             f"spread), got {noise}")
        self.progress_max, self.noise = progress_max, float(noise)

    def __call__(self, batch: RewardBatch) -> RewardOutput:
        tasks, success, _ = episode_fields(batch.metadata, self.name)
        missing = [i for i, m in enumerate(batch.metadata) if "progress" not in m]
        if missing:
            raise ValueError(f"reward 'sim_progress' needs the simulator's 'progress' in every episode's metadata; "
                             f"rows {missing[:10]} lack it (rewards.sim_progress.sim_progress_metadata writes it)")
        p = np.array([float(m["progress"]) for m in batch.metadata], dtype=np.float64)
        if not np.isfinite(p).all() or (p < 0).any() or (p > 1).any():
            raise ValueError(f"simulator progress must be finite and in [0, 1], got min {p.min()} max {p.max()}")
        succ = success.numpy()
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(p.tobytes()).digest()[:8], "little")) \
            if self.noise else None
        total = succ.astype(np.float64).copy()
        graded = succ.astype(np.float64).copy()
        for task in dict.fromkeys(tasks):
            idx = np.array([i for i, t in enumerate(tasks) if t == task])
            s_idx, f_idx = idx[succ[idx]], idx[~succ[idx]]
            if len(s_idx) == 0 or len(f_idx) == 0:
                continue  # no success of the task in the batch: no reference, failures keep 0 (as SRPO)
            d = 1.0 - p[f_idx]
            if rng is not None:
                d = d + self.noise * d.std() * rng.standard_normal(len(d))
            g = distance_progress(d)
            graded[f_idx] = g
            total[f_idx] = self.progress_max * g
        f32 = lambda a: torch.as_tensor(a, dtype=torch.float32, device="cpu")  # noqa: E731
        return RewardOutput(total=f32(total), components={"success": f32(succ), "progress": f32(graded)},
                            details={"sim_progress": f32(p)})

"""EVA executability reward: a generated robot video is good if the actions it implies are executable.

An inverse-dynamics model (``world_models.idm``) decodes the video ``[B, T, C, H, W]`` into actions
``a[B, T', A]`` (end-effector deltas or joint targets per frame). With finite differences at ``dt``::

    vel_t  = a_t                              (actions are per-step displacements / velocities)
    acc_t  = (a_{t+1} - a_t) / dt
    jerk_t = (acc_{t+1} - acc_t) / dt

the penalty (per frame, then summed per video) is a robust smoothness term plus hinge penalties for
exceeding the embodiment's limits::

    P = sum_t  w_acc * huber(acc_t) + w_jerk * huber(jerk_t)
             + w_lim * ( relu(|vel_t| - v_max) + relu(|acc_t| - a_max) + relu(q_t - q_max) + relu(q_min - q_t) )

where ``q_t = q_0 + sum_{s<=t} vel_s * dt`` is the integrated position. A constant-velocity trajectory that
stays within the limits has ``P = 0``. The reward is the calibrated power law (EVA Eq. 7)::

    R = ((1 + P) / P0) ^ (-gamma),    P0 = 1 + median(P over the pretrained model's own rollouts)

so the pretrained model's typical video scores about 1, smoother videos more, jerky or infeasible less.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class EmbodimentLimits:
    """Per-dimension limits (a scalar broadcasts over action dims); ``None`` disables a hinge."""

    v_max: float | list[float] | None = 1.0
    a_max: float | list[float] | None = None
    q_min: float | list[float] | None = None
    q_max: float | list[float] | None = None


@dataclass
class EVAConfig:
    dt: float = 0.1
    huber_delta: float = 1.0
    w_acc: float = 1.0
    w_jerk: float = 0.1
    w_limit: float = 10.0
    gamma: float = 1.0
    p0: float = 1.0  # calibrated by calibrate_p0 on the pretrained model's rollouts
    limits: EmbodimentLimits = field(default_factory=EmbodimentLimits)


def _lim(v: float | list[float] | None, like: torch.Tensor) -> torch.Tensor | None:
    return None if v is None else torch.as_tensor(v, dtype=like.dtype, device=like.device)


def _huber(x: torch.Tensor, delta: float) -> torch.Tensor:
    return F.huber_loss(x, torch.zeros_like(x), reduction="none", delta=delta)


def executability_penalty(actions: torch.Tensor, cfg: EVAConfig, q0: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Penalty per video ``[B]`` and per frame ``[B, T']`` for actions ``[B, T', A]`` (see module docstring)."""
    if actions.dim() != 3:
        raise ValueError(f"actions must be [B, T, A], got shape {tuple(actions.shape)}")
    if not torch.isfinite(actions).all():
        raise ValueError("non-finite actions decoded from the video")
    a = actions.float()
    b, t, d = a.shape
    per_frame = torch.zeros(b, t, dtype=a.dtype, device=a.device)
    lim = cfg.limits
    vmax = _lim(lim.v_max, a)
    if vmax is not None:
        per_frame += cfg.w_limit * F.relu(a.abs() - vmax).sum(-1)
    if lim.q_min is not None or lim.q_max is not None:
        q = (a * cfg.dt).cumsum(dim=1) + (0 if q0 is None else q0[:, None].float())
        if lim.q_max is not None:
            per_frame += cfg.w_limit * F.relu(q - _lim(lim.q_max, a)).sum(-1)
        if lim.q_min is not None:
            per_frame += cfg.w_limit * F.relu(_lim(lim.q_min, a) - q).sum(-1)
    if t >= 2:
        acc = (a[:, 1:] - a[:, :-1]) / cfg.dt  # [B, T-1, A], attributed to the later frame
        pa = cfg.w_acc * _huber(acc, cfg.huber_delta).sum(-1)
        amax = _lim(lim.a_max, a)
        if amax is not None:
            pa = pa + cfg.w_limit * F.relu(acc.abs() - amax).sum(-1)
        per_frame[:, 1:] += pa
        if t >= 3:
            jerk = (acc[:, 1:] - acc[:, :-1]) / cfg.dt
            per_frame[:, 2:] += cfg.w_jerk * _huber(jerk, cfg.huber_delta).sum(-1)
    return per_frame.sum(dim=1), per_frame


def eva_reward_from_penalty(penalty: torch.Tensor, p0: float, gamma: float) -> torch.Tensor:
    """``((1 + P) / P0) ^ (-gamma)``; decreasing in ``P``; 1 at ``P = P0 - 1``."""
    if p0 <= 0:
        raise ValueError(f"P0 must be > 0, got {p0}")
    return ((1.0 + penalty) / p0) ** (-gamma)


def calibrate_p0(penalties: torch.Tensor) -> float:
    """``P0 = 1 + median(P)`` over the pretrained model's own rollouts."""
    if penalties.numel() == 0:
        raise ValueError("cannot calibrate P0 on an empty set of penalties")
    return 1.0 + float(penalties.float().median())


class EVAReward:
    """Reward protocol wrapper: ``batch.videos[B, T, C, H, W]`` (or 5-D ``batch.images``) -> total ``[B]``;
    the penalty (lower is better) and the mean per-frame reward are logged as ``details``."""

    def __init__(self, idm: torch.nn.Module, cfg: EVAConfig | None = None):
        self.idm = idm.eval()
        self.cfg = cfg or EVAConfig()

    @torch.no_grad()
    def score_videos(self, videos: torch.Tensor) -> dict[str, torch.Tensor]:
        actions = self.idm.decode_video(videos)
        pen, per_frame = executability_penalty(actions, self.cfg)
        t = per_frame.shape[1]
        return {
            "total": eva_reward_from_penalty(pen, self.cfg.p0, self.cfg.gamma),
            "penalty": pen,
            "per_frame": eva_reward_from_penalty(per_frame * t, self.cfg.p0, self.cfg.gamma),
            "actions": actions,
        }

    def __call__(self, batch):
        from .base import RewardOutput

        videos = getattr(batch, "videos", None)
        if videos is None and getattr(batch, "images", None) is not None and batch.images.dim() == 5:
            videos = batch.images
        if videos is None:
            raise ValueError("EVA reward needs videos [B, T, C, H, W] in the batch, got none")
        out = self.score_videos(videos)
        return RewardOutput(total=out["total"], components={"eva": out["total"]},
                            details={"eva_penalty": out["penalty"], "eva_frame_mean": out["per_frame"].mean(dim=1)})

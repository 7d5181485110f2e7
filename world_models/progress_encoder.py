"""A learned *progress* encoder for SRPO, trained offline from successful episodes a user already has.

Method (a temporal-distance representation with the goal set = "any success of the task"; see
docs/RESULTS.md#a-progress-encoder-for-srpo for why this one): per frame ``o`` the encoder outputs one latent,

    r(o) in [0, 1]   the fraction of the episode still to go before the task succeeds (time to go / length),

trained on successful episodes only, whose frames carry the target ``r_t = (T_s - t) / T_s`` (``T_s``: the first
frame at which the episode's success flag is set; frames after it, where the expert holds, get 0). The loss is

    L = mean_t (r(o_t) - r_t)^2  +  w_rank * mean_{(i, j): t_i < t_j, same episode} softplus(-(r(o_i) - r(o_j)) / tau)

the regression to the normalized time to go (VIP's "embedding distance to the goal = temporal distance", with the
goal embedding fixed at 0 for every success, so that distances are comparable *across* initial states, which
SRPO's task reference needs: a failure is compared with the successes of other layouts) plus Rank2Reward's
pairwise temporal-order term (later frames rank closer to the goal). The only labels are the episodes' own time
stamps and success flags (the same binary outcome SRPO itself uses); no simulator progress measure enters
training. SRPO then reads ``encode_frames`` ``[B, T, 1]`` like any other encoder; with ``pooling: last`` the
trajectory embedding is the last frame's time to go, so a failure's distance to the success centre is
``|r(o_last) - r(success)|``.

**Second method, the distance head** (``model.head: distance``): a latent ``z(o)`` of width ``dim`` whose Euclidean
distances are *temporal distances*, the number of steps between two states over the typical success length ``L``
(median ``T_s`` of the successful episodes), learned from pairs of frames of one episode:

    direct episode (a success: the expert's, a demo's, the policy's):  (||z(o_a) - z(o_b)|| - |tau_a - tau_b| / L)^2
    any other (play, hindsight failures):                                relu(||z(o_a) - z(o_b)|| - |t_a - t_b| / L)^2

with ``tau = min(t, T_s)`` (frames held after the success are the same state). A successful episode's path is taken
as (near) shortest, so its time apart is the distance; any other episode only bounds it from above (its states were
at most that many steps apart). This is VIP's "embedding distance = temporal distance" (Ma et al., ICLR 2023) and
the temporal-distance representations of HILP (Park et al., ICML 2024) and TLDR (Bae et al., 2024), fitted by
regression on time stamps instead of their TD / contrastive objectives (no bootstrapping on CPU-sized data). It is
task-agnostic: the latent says how far apart two scenes are in steps, not which task is done, so SRPO's own rule
(distance of a failure's last frame to the batch's success centres, ``pooling: last``) reads the steps a failure
still is from a success of the same task without the encoder ever having seen that task's goal. The labels are
still time stamps and success flags only.

Architecture: a conv net per frame (stride-2 convs, GroupNorm, SiLU) whose last feature map is read both as a
mean (what is there) and as spatial-softmax keypoints (where it is: the gripper-to-object geometry that progress
depends on), then an MLP to one sigmoid output (time to go) or to ``dim`` linear outputs (distance head). Input
frames ``[B, T, 3, H, W]`` in [0, 1] (or uint8) are resized to ``image_size``. With ``model.context: first`` (time to
go only) every frame is read against its clip's first frame, ``r(o_0, o_t)`` (PROGRESSOR's progress relative to
the start; measured no better, docs/RESULTS.md).

The policy's own rollouts (``data.policy``, injected by the frontend: ``vla-rl fit-encoder`` rolls the VLA out,
this package imports no frontend): a success is a demonstration of the states the *policy* visits (targets
``(T_s - t) / T_s``); a failure (``data.policy_failures``) is dropped, gets the play target 1 on every frame, or a
VIP-style hindsight *lower bound*: at frame ``t`` of a failure of length ``T`` at least ``T - t + 1`` steps were
still to go (the success never came), normalized by the task's typical success length ``L`` (median ``T_s`` of its
successful episodes), so ``b_t = min(1, (T - t + 1) / L)`` and the loss on those frames is ``relu(b_t - r(o_t))^2``
(only predictions *below* the bound are wrong; no order term inside a failure).

The scripted expert after a detour (``data.detour_per_task``, :func:`record_detour_episodes`; no policy needed): a
few steps of undirected play carry the scene off the expert's path, then the expert takes over; from the frame it
takes over at ``k`` the target is its time to go over the task's typical success length, ``min(1, (T_s - t) / L)``
-- a label for the off-path states a failing policy ends in, which the expert's own episodes never visit -- or, if
it did not recover, the hindsight bound above.

File: safetensors state dict with metadata ``encoder = "progress"``, ``config`` (the architecture, JSON, with its input
size ``image_size``) and ``trained_on`` (the data, JSON); :func:`load_progress_encoder` checks all three and fails in
one line. Its own frame: ``data.image_size`` (the recorded episodes) must equal ``model.image_size``; an RL run gives
it frames of that size (``vla-rl train`` checks ``srpo.frame_size`` and the video camera's render size against the
file; a larger frame than the policy's comes from the tabletop env's ``extra_view``, e.g. ``[srpo, agentview, 64]``
with ``env.video_camera: srpo``), and ``data.policy_image_size`` rolls ``data.policy`` out at its own camera size.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from grpo.config import (
    MAX_BATCH,
    MAX_EPISODE_STEPS,
    MAX_EPISODES,
    MAX_LR,
    MAX_SEED,
    MAX_WIDTH,
    require_at_least,
    require_at_most,
    require_positive,
)
from grpo.device import module_device

KIND = "progress"
RANK_TAU_RANGE = (1e-6, 1e6)  # train.rank_tau's range: float32 holds tau, d / tau and tau x softplus(-d / tau)
MAX_LOSS_WEIGHT = 1000.0  # train.rank_weight / distance_weight's largest value (the losses are O(1))
FORMAT_VERSION = "1"


@dataclass
class ProgressEncoderConfig:
    channels: list[int] = field(default_factory=lambda: [16, 32, 32])  # conv channels per stride-2 block
    image_size: int = 32  # frames are resized to this side before encoding
    hidden: int = 64  # width of the MLP on the pooled + keypoint features
    head: Literal["time_to_go", "distance"] = "time_to_go"  # time_to_go: one latent, r(o) in [0, 1];
        # distance: a latent of width `dim` whose Euclidean distances are temporal distances (steps / the typical
        # success length) between frames (the module docstring's second method)
    dim: int = 16  # latent width of the distance head
    aux_dim: int = 0  # time_to_go head only: width of an auxiliary temporal-distance projection of the features,
        # trained beside the time to go (train.distance_weight) to shape them; SRPO never reads it. 0: none
    context: Literal["none", "first"] = "none"  # none: r(o_t) from the frame alone; first: r(o_0, o_t), the episode's
        # first frame as context (PROGRESSOR-style: progress of o_t relative to where the episode started)

    def __post_init__(self) -> None:
        if not self.channels or any(int(c) < 4 or int(c) % 4 for c in self.channels):
            raise ValueError(f"model.channels={self.channels}: expected a non-empty list of multiples of 4 "
                             "(GroupNorm(4))")
        require_at_least("model", self, image_size=8, hidden=1)
        require_at_most("model", self, hidden=MAX_WIDTH, channels=MAX_WIDTH)  # (1e9: a traceback building it)
        if self.head not in ("time_to_go", "distance"):
            raise ValueError(f"model.head={self.head!r}: expected time_to_go or distance")
        require_at_least("model", self, dim=1, aux_dim=0)
        # (was: accepted; a 1e9-wide latent or a 1e5-px input filled the memory when the encoder was built / fed)
        require_at_most("model", self, dim=MAX_WIDTH, aux_dim=MAX_WIDTH, image_size=1024)
        if self.aux_dim and self.head != "time_to_go":
            raise ValueError(f"model.aux_dim={self.aux_dim} with model.head={self.head}: expected 0 (the auxiliary "
                             "distance projection shapes the time-to-go head's features)")
        if self.head == "distance" and self.context != "none":
            raise ValueError(f"model.context={self.context!r} with model.head=distance: expected none (a distance "
                             "latent reads each frame alone)")
        if self.context not in ("none", "first"):
            raise ValueError(f"model.context={self.context!r}: expected none or first")


class ProgressEncoder(nn.Module):
    """``encode_frames(video [B, T, 3, H, W]) -> [B, T, 1]``: per-frame estimated fraction of the task still to go."""

    def __init__(self, cfg: ProgressEncoderConfig | None = None):
        super().__init__()
        self.cfg = cfg or ProgressEncoderConfig()
        layers, c_in = [], 3
        for c in self.cfg.channels:
            layers += [nn.Conv2d(c_in, int(c), 3, stride=2, padding=1), nn.GroupNorm(4, int(c)), nn.SiLU()]
            c_in = int(c)
        self.conv = nn.Sequential(*layers)
        n_in = 3 * c_in * (3 if self.cfg.context == "first" else 1)  # [f(o_t), f(o_0), f(o_t) - f(o_0)] with context
        self.dim = int(self.cfg.dim) if self.cfg.head == "distance" else 1
        self.head = nn.Sequential(nn.Linear(n_in, self.cfg.hidden), nn.SiLU(), nn.Linear(self.cfg.hidden, self.dim))
        if self.cfg.aux_dim:  # only then: files without it keep their state dict
            self.aux = nn.Linear(3 * c_in, int(self.cfg.aux_dim))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, 3, S, S]`` normalized frames -> ``[N, 3 C]``: the last feature map's mean and spatial-softmax
        keypoints (x, y per channel)."""
        f = self.conv(x)
        att = F.softmax(f.flatten(2), dim=-1)
        h, w = f.shape[-2:]
        ys = torch.linspace(-1, 1, h, device=f.device).repeat_interleave(w)
        xs = torch.linspace(-1, 1, w, device=f.device).repeat(h)
        return torch.cat([f.mean(dim=(2, 3)), (att * xs).sum(-1), (att * ys).sum(-1)], dim=-1)

    def frame_logits(self, x: torch.Tensor, first: torch.Tensor | None = None, aux: bool = False):
        """``[N, 3, S, S]`` normalized frames (and, with ``context: first``, their episodes' first frames ``first``
        ``[N, 3, S, S]``) -> ``[N]`` logits of the time to go (``[N, dim]`` latents of the distance head); with
        ``aux``, also the auxiliary distance projection ``[N, aux_dim]`` of the frames' features."""
        feats = self.features(x)
        z_aux = self.aux(feats) if aux else None
        if self.cfg.context == "first":
            if first is None:
                raise ValueError("a progress encoder with model.context=first needs each frame's first frame")
            f0 = self.features(first)
            feats = torch.cat([feats, f0, feats - f0], dim=-1)
        out = self.head(feats)
        out = out if self.cfg.head == "distance" else out.squeeze(-1)
        return (out, z_aux) if aux else out

    def prepare(self, frames: torch.Tensor) -> torch.Tensor:
        """``[N, 3, H, W]`` in [0, 1] (or uint8) -> resized to ``image_size``, scaled to [-1, 1]."""
        frames = frames.float() / 255.0 if frames.dtype == torch.uint8 else frames.float()
        s = self.cfg.image_size
        if frames.shape[-1] != s or frames.shape[-2] != s:
            frames = F.interpolate(frames, size=(s, s), mode="bilinear", align_corners=False, antialias=True)
        return frames * 2 - 1

    def encode_frames(self, video: torch.Tensor) -> torch.Tensor:
        if video.dim() != 5:
            raise ValueError(f"video must be [B, T, 3, H, W], got shape {tuple(video.shape)}")
        video = video.to(module_device(self))
        b, t = video.shape[:2]
        x = self.prepare(video.flatten(0, 1))
        first = None
        if self.cfg.context == "first":  # every frame read against its clip's first frame (SRPO samples frame 0)
            first = x.reshape(b, t, *x.shape[1:])[:, :1].expand(b, t, *x.shape[1:]).flatten(0, 1)
        if self.cfg.head == "distance":
            return self.frame_logits(x).reshape(b, t, self.dim)
        return torch.sigmoid(self.frame_logits(x, first)).reshape(b, t, 1)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """``[B, dim]``: the last frame's latent (its time to go, or its distance-head embedding)."""
        return self.encode_frames(video)[:, -1]


# ---- training ------------------------------------------------------------------------------------------------
@dataclass
class ProgressTrainConfig:
    steps: int = 500  # optimizer steps
    batch_episodes: int = 64  # episodes per step; two frames of each (for the pairwise order term)
    lr: float = 1e-3  # Adam learning rate (cosine to 10 % over the steps)
    rank_weight: float = 0.5  # weight of the pairwise temporal-order term (0: regression only)
    rank_tau: float = 0.05  # temperature of the order term's softplus
    distance_weight: float = 1.0  # weight of the auxiliary temporal-distance loss (model.aux_dim > 0 only)
    shift: int = 2  # random image shift (pixels, pad + crop) as augmentation; 0: none

    def __post_init__(self) -> None:
        require_at_least("train", self, steps=1, batch_episodes=1, rank_weight=0, shift=0, distance_weight=0)
        require_positive("train", self, "lr", "rank_tau")
        require_at_most("train", self, lr=MAX_LR)  # (1e300: AdamW's float32 overflow, a traceback)
        require_at_most("train", self, batch_episodes=MAX_BATCH)  # (1e9 episodes drawn per step: the memory)
        # (rank_weight=1e300: a float32 loss of inf, the encoder's weights NaN, saved with exit 0)
        require_at_most("train", self, rank_weight=MAX_LOSS_WEIGHT, distance_weight=MAX_LOSS_WEIGHT)
        if not RANK_TAU_RANGE[0] <= self.rank_tau <= RANK_TAU_RANGE[1]:  # (was: 1e-300 accepted, a float32 0: a tie's
            # 0 / 0 made the loss NaN, saved with exit 0; 1e300: the order term x tau is inf)
            raise ValueError(f"train.rank_tau={self.rank_tau:g}: expected a temperature in [{RANK_TAU_RANGE[0]:g}, "
                             f"{RANK_TAU_RANGE[1]:g}] (the order term is tau x softplus(-d / tau), in float32)")


def time_to_go(success: np.ndarray) -> np.ndarray:
    """``success[T+1]`` flags per frame (the episode succeeds at its first set flag ``T_s > 0``) -> targets
    ``(T_s - t) / T_s`` for ``t <= T_s`` and 0 after."""
    s = np.asarray(success, dtype=bool)
    if not s.any():
        raise ValueError("time_to_go needs a successful episode")
    ts = int(np.argmax(s))
    if ts == 0:
        return np.zeros(len(s), np.float32)
    t = np.arange(len(s))
    return np.clip((ts - t) / ts, 0.0, 1.0).astype(np.float32)


def _shift(x: torch.Tensor, pad: int, gen: torch.Generator) -> torch.Tensor:
    if pad == 0:
        return x
    n, _, h, w = x.shape
    xp = F.pad(x, (pad,) * 4, mode="replicate")
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen, device="cpu").tolist()
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen, device="cpu").tolist()
    return torch.stack([xp[i, :, a:a + h, b:b + w] for i, (a, b) in enumerate(zip(dy, dx))])


def train_progress_encoder(encoder: ProgressEncoder, videos: Sequence[np.ndarray], targets: Sequence[np.ndarray],
                           cfg: ProgressTrainConfig, seed: int = 0, log=None,
                           bounds: Sequence[bool] | None = None) -> list[float]:
    """Fit ``encoder`` on episodes ``videos[i]`` (uint8 ``[T_i, H, W, 3]``) with per-frame targets ``targets[i]``
    ``[T_i]`` (:func:`time_to_go`); the loss of the module docstring. ``bounds[i]`` (default all False): episode
    ``i``'s targets are lower bounds (:func:`policy_targets`' hindsight failures): loss ``relu(y - r)^2``, no order
    term. Returns the loss per step."""
    if len(videos) == 0 or len(videos) != len(targets):
        raise ValueError(f"need one target row per video and at least one video, got {len(videos)} / {len(targets)}")
    if bounds is not None and len(bounds) != len(videos):
        raise ValueError(f"need one bounds flag per video, got {len(bounds)} for {len(videos)} videos")
    is_bound = torch.tensor([bool(b) for b in bounds] if bounds is not None else [False] * len(videos), device="cpu")
    dev = module_device(encoder)
    frames = [encoder.prepare(torch.as_tensor(v, device="cpu").permute(0, 3, 1, 2)) for v in videos]  # [T, 3, S, S]
    tg = [torch.as_tensor(t, dtype=torch.float32, device="cpu") for t in targets]
    lengths = torch.tensor([len(t) for t in tg], device="cpu")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(encoder.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * k / cfg.steps)))
    if encoder.cfg.head == "distance":
        return _train_distance(encoder, frames, lengths, tg, is_bound, cfg, gen, opt, sched, log)
    losses: list[float] = []
    use_aux = bool(encoder.cfg.aux_dim) and cfg.distance_weight > 0
    if use_aux:
        times, direct, ell = _stamps(tg, is_bound)
    encoder.train()
    for step in range(cfg.steps):
        vi, ta, tb, xa, xb = _sample_pairs(frames, lengths, cfg.batch_episodes, gen)
        ya = torch.stack([tg[v][t] for v, t in zip(vi.tolist(), ta.tolist())])
        yb = torch.stack([tg[v][t] for v, t in zip(vi.tolist(), tb.tolist())])
        x = _shift(torch.cat([xa, xb]), cfg.shift, gen).to(dev)
        x0 = None
        if encoder.cfg.context == "first":  # the episode's first frame, shifted on its own
            x0 = torch.stack([frames[v][0] for v in vi.tolist()])
            x0 = _shift(torch.cat([x0, x0]), cfg.shift, gen).to(dev)
        if use_aux:
            logits, z = encoder.frame_logits(x, x0, aux=True)
        else:
            logits, z = encoder.frame_logits(x, x0), None
        r = torch.sigmoid(logits)
        y = torch.cat([ya, yb]).to(dev)
        bd = is_bound[vi].repeat(2).to(dev)
        err = torch.where(bd, F.relu(y - r), r - y)  # a lower bound is only violated from below
        loss = (err ** 2).mean()
        if cfg.rank_weight > 0:
            ra, rb = r[: len(vi)], r[len(vi):]
            order = torch.sign(ya - yb).to(dev)  # +1 where frame a is farther from the goal than frame b
            m = (order != 0) & ~is_bound[vi].to(dev)
            if m.any():
                loss = loss + cfg.rank_weight * F.softplus(-(order * (ra - rb))[m] / cfg.rank_tau).mean() * cfg.rank_tau
        if z is not None:
            loss = loss + cfg.distance_weight * _distance_loss(z, times, direct, ell, vi, ta, tb, dev)
        _optimizer_step(loss, opt, sched, losses, step, cfg.steps, log)
    encoder.eval()
    return losses


def _sample_pairs(frames: list[torch.Tensor], lengths: torch.Tensor, batch: int, gen: torch.Generator):
    """``batch`` episodes drawn with replacement and two frames of each: ``(vi [B], ta [B], tb [B], xa [B, 3, S, S],
    xb [B, 3, S, S])``."""
    vi = torch.randint(len(frames), (batch,), generator=gen, device="cpu")
    ln = lengths[vi].float()
    ta = (torch.rand(len(vi), generator=gen, device="cpu") * ln).long()
    tb = (torch.rand(len(vi), generator=gen, device="cpu") * ln).long()
    xa = torch.stack([frames[v][t] for v, t in zip(vi.tolist(), ta.tolist())])
    xb = torch.stack([frames[v][t] for v, t in zip(vi.tolist(), tb.tolist())])
    return vi, ta, tb, xa, xb


def _optimizer_step(loss: torch.Tensor, opt, sched, losses: list[float], step: int, steps: int, log) -> None:
    """One Adam step on ``loss``, the schedule advanced, the loss recorded and logged every tenth of the run."""
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(float(loss.detach()))
    if log is not None and (step + 1) % max(1, steps // 10) == 0:
        log(f"step {step + 1}/{steps}: loss {np.mean(losses[-max(1, steps // 10):]):.4f}")


def frame_times(targets: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """Per-frame time stamps ``[T]`` (steps) of one episode from its targets, and whether it is *direct*: an episode
    whose targets fall to 0 (a success: :func:`time_to_go`) is stamped ``min(t, T_s)`` (its frames after the success
    hold still, no time passes), any other (play, hindsight failures) ``t``."""
    t = torch.arange(len(targets), dtype=torch.float32)
    zero = (targets <= 0).nonzero()
    if len(zero) == 0 or targets[0] <= 0:
        return t, False
    return t.clamp(max=float(zero[0, 0])), True


def _stamps(tg: list[torch.Tensor], is_bound: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor, float]:
    """Every episode's :func:`frame_times`, whether it is direct (and not a lower-bound episode), and ``L``, the median
    success length over the direct ones."""
    stamped = [frame_times(t) for t in tg]
    times = [s for s, _ in stamped]
    direct = torch.tensor([d and not bool(b) for (_, d), b in zip(stamped, is_bound.tolist())], device="cpu")
    if not direct.any():
        raise ValueError("a temporal-distance loss needs successful episodes (their time stamps set the scale)")
    return times, direct, float(np.median([float(s[-1]) for s, d in zip(times, direct.tolist()) if d]))


def _distance_loss(z: torch.Tensor, times: list[torch.Tensor], direct: torch.Tensor, ell: float, vi: torch.Tensor,
                   ta: torch.Tensor, tb: torch.Tensor, dev) -> torch.Tensor:
    """The temporal-distance loss of the module docstring on latents ``z`` ``[2N, D]`` of frames ``ta`` then ``tb``
    of episodes ``vi`` ``[N]``: equality on direct episodes, an upper bound on the others."""
    n = len(vi)
    delta = torch.stack([(times[v][a] - times[v][b]).abs() for v, a, b in
                         zip(vi.tolist(), ta.tolist(), tb.tolist())]).to(dev) / ell
    d = (z[:n] - z[n:]).pow(2).sum(-1).add(1e-8).sqrt()
    return torch.where(direct[vi].to(dev), d - delta, F.relu(d - delta)).pow(2).mean()


def _train_distance(encoder: ProgressEncoder, frames: list[torch.Tensor], lengths: torch.Tensor,
                    tg: list[torch.Tensor], is_bound: torch.Tensor, cfg: ProgressTrainConfig, gen: torch.Generator,
                    opt, sched, log) -> list[float]:
    """The distance head's fit (module docstring): two frames ``a, b`` of one episode, target distance
    ``delta = |tau_a - tau_b| / L`` (:func:`frame_times`, ``L`` the median success length over the direct
    episodes); on a direct episode (the expert's path: near shortest) ``(||z_a - z_b|| - delta)^2``, on any other
    (play, failures) only the upper bound ``relu(||z_a - z_b|| - delta)^2`` (the states were at most that far
    apart)."""
    dev = module_device(encoder)
    times, direct, ell = _stamps(tg, is_bound)
    losses: list[float] = []
    encoder.train()
    for step in range(cfg.steps):
        vi, ta, tb, xa, xb = _sample_pairs(frames, lengths, cfg.batch_episodes, gen)
        z = encoder.frame_logits(_shift(torch.cat([xa, xb]), cfg.shift, gen).to(dev))
        _optimizer_step(_distance_loss(z, times, direct, ell, vi, ta, tb, dev), opt, sched, losses, step, cfg.steps,
                        log)
    encoder.eval()
    return losses


# ---- data a user has ---------------------------------------------------------------------------------------------
def expert_episode(env, init_seed: int, max_steps: int = 120, camera: str = "agentview", hold_steps: int = 2,
                   noise: float = 0.05, rng: np.random.Generator | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """One scripted-expert episode of the built ``env`` (a ``sims`` env or a wrapper with ``expert_action``) from
    ``init_seed``: ``(frames uint8 [T+1, H, W, 3] of camera, success flags [T+1], states float32 [T+1, D])``, the
    observation state aligned with the frames (as :func:`vla_rl.rollout.run_episodes` records ``Episode.states``).
    It runs until ``hold_steps`` frames after its first success (the expert holding; 0: ends at the success), at most
    ``max_steps`` steps, with the expert's ``noise`` drawn from ``rng``. None when it does not succeed, or succeeds
    at the reset (no episode to learn from)."""
    obs, info = env.reset(seed=init_seed, options={"init_seed": init_seed})
    frames, succ = [obs["images"][camera]], [bool(info.get("success", False))]
    states = [np.asarray(obs["state"], np.float32).copy()]
    first = 0 if succ[0] else -1  # index of the first successful frame
    while len(frames) <= max_steps and (first < 0 or len(frames) - 1 - first < hold_steps):
        obs, _, term, trunc, info = env.step(np.asarray(env.expert_action(rng=rng, noise=noise), np.float32))
        frames.append(obs["images"][camera])
        states.append(np.asarray(obs["state"], np.float32).copy())
        succ.append(first >= 0 or bool(info.get("success", False)))
        if first < 0 and succ[-1]:
            first = len(frames) - 1
        if first < 0 and (term or trunc):
            break
    return (np.stack(frames), np.asarray(succ), np.stack(states)) if first > 0 else None


def record_expert_episodes(task: str, n: int, seed_offset: int, camera: str = "agentview", image_size: int = 32,
                           max_steps: int = 120, hold_steps: int = 2, noise: float = 0.05,
                           env_kwargs: dict | None = None,
                           seed: int = 0, with_states: bool = False) -> list[tuple[np.ndarray, ...]]:
    """Scripted-expert episodes (:func:`expert_episode`) of a ``sims`` task from initial states ``seed_offset,
    seed_offset + 1, ...``: ``n`` successful ones, each ``(frames uint8 [T+1, H, W, 3], success flags [T+1])`` with
    ``hold_steps`` frames after the success (the expert holding). Unsuccessful expert episodes are skipped (at most
    ``3 n`` tries). ``with_states``: each ``(frames, flags, states float32 [T+1, D])``."""
    import sims

    env = sims.make(task, **{**dict(env_kwargs or {}), "image_size": image_size, "cameras": (camera,)})
    rng = np.random.default_rng([seed, seed_offset])
    out: list[tuple[np.ndarray, ...]] = []
    try:
        for s in range(seed_offset, seed_offset + 3 * n):
            if len(out) == n:
                break
            ep = expert_episode(env, s, max_steps, camera, hold_steps, noise, rng)
            if ep is not None:
                out.append(ep if with_states else ep[:2])
    finally:
        env.close()
    if len(out) < n:
        raise RuntimeError(f"the scripted expert of {task!r} succeeded on {len(out)} of {3 * n} tries (wanted {n})")
    return out


def record_play_episodes(task: str, n: int, seed_offset: int, camera: str = "agentview", image_size: int = 32,
                         horizon: int = 30, env_kwargs: dict | None = None, seed: int = 0
                         ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` episodes of undirected play (smooth random actions, the SANS data's ``random`` kind) from initial states
    ``seed_offset, ...``: ``(frames [horizon+1, H, W, 3], targets [horizon+1])``. Targets: 1 on every frame (play
    makes no progress: as far from success as the start, the role of Rank2Reward's expert-vs-policy discriminator),
    or, for a play episode that happens to succeed, its time to go (hindsight: it is a demonstration)."""
    import sims

    from .data import _actor, run_episode

    env = sims.make(task, **{**dict(env_kwargs or {}), "image_size": image_size, "cameras": (camera,)})
    rng = np.random.default_rng([seed, seed_offset, 1])
    out = []
    try:
        a_dim = int(env.action_space.shape[0])
        for s in range(seed_offset, seed_offset + n):
            e = run_episode(env, _actor("random", rng, 0.0, a_dim), s, horizon, camera, "random")
            ok = e["success"] > 0.5
            out.append((e["frames"], time_to_go(ok) if ok.any() and not ok[0] else np.ones(len(ok), np.float32)))
    finally:
        env.close()
    return out


def detour_targets(n_frames: int, first: int, start: int, length: float) -> tuple[np.ndarray, bool]:
    """Targets of a detour episode's frames ``start .. n_frames - 1`` (:func:`record_detour_episodes`): if it
    succeeded at frame ``first`` (>= 0), the expert's time to go from there, ``min(1, (first - t) / L)`` (0 after
    ``first``); if not (``first < 0``), the hindsight lower bound ``min(1, (T - t + 1) / L)`` of the module
    docstring (``T = n_frames - 1``). ``L``: the task's typical success length. Returns ``(targets, is_bound)``."""
    if length <= 0:
        raise ValueError(f"success length must be > 0, got {length}")
    t = np.arange(start, n_frames)
    if first >= 0:
        return np.clip((first - t) / length, 0.0, 1.0).astype(np.float32), False
    return np.minimum(1.0, (n_frames - t) / length).astype(np.float32), True


def record_detour_episodes(task: str, n: int, seed_offset: int, success_length: float, camera: str = "agentview",
                           image_size: int = 32, max_steps: int = 120, hold_steps: int = 2, noise: float = 0.05,
                           detour: tuple[int, int] = (1, 20), env_kwargs: dict | None = None, seed: int = 0
                           ) -> list[tuple[np.ndarray, np.ndarray, bool]]:
    """The scripted expert *after a detour*: from initial state ``s`` (``seed_offset, ...``), ``k ~ U{detour}``
    steps of undirected play (smooth random actions, as :func:`record_play_episodes`) carry the scene off the
    expert's path, then the expert (with ``noise``) takes over for at most ``max_steps`` steps. The frames from
    ``k`` on are kept -- states the expert's own episodes never visit, the kind a failing policy ends in -- with
    the time stamps and success flag as the only labels (:func:`detour_targets`): the expert's time to go from
    there over the task's typical success length ``success_length``, or, if the expert did not recover, the
    hindsight lower bound. The play prefix is dropped (the random steps were no honest path to the goal), unless
    the episode already succeeded during it. Returns ``(frames uint8 [T_i, H, W, 3], targets [T_i], is_bound)``
    per episode, ``n`` of them (DART, Laskey et al. 2017, perturbs the expert for the same reason: to visit the
    states of the learner's errors)."""
    import sims

    lo, hi = (int(x) for x in detour)
    if not 0 <= lo <= hi:
        raise ValueError(f"detour steps must be (low, high) with 0 <= low <= high, got {tuple(detour)}")
    env = sims.make(task, **{**dict(env_kwargs or {}), "image_size": image_size, "cameras": (camera,),
                             "max_steps": hi + max_steps + hold_steps})
    rng = np.random.default_rng([seed, seed_offset, 2])
    out: list[tuple[np.ndarray, np.ndarray, bool]] = []
    try:
        a_dim = int(env.action_space.shape[0])
        for s in range(seed_offset, seed_offset + n):
            obs, info = env.reset(seed=s, options={"init_seed": s})
            k = int(rng.integers(lo, hi + 1))
            prev = rng.uniform(-1, 1, a_dim)
            frames = [obs["images"][camera]]
            first = 0 if info.get("success", False) else -1  # index of the first successful frame
            while len(frames) - 1 < k + max_steps and (first < 0 or len(frames) - 1 - first < hold_steps):
                if len(frames) - 1 < k:
                    prev = np.clip(0.7 * prev + 0.5 * rng.standard_normal(a_dim), -1, 1)
                    a = prev
                else:
                    a = env.expert_action(rng=rng, noise=noise)
                obs, _, term, trunc, info = env.step(np.asarray(a, np.float32))
                frames.append(obs["images"][camera])
                if first < 0 and bool(info.get("success", False)):
                    first = len(frames) - 1
                if first < 0 and (term or trunc):
                    break
            start = 0 if 0 <= first <= k else min(k, len(frames) - 1)
            tg, bound = detour_targets(len(frames), first, start, success_length)
            out.append((np.stack(frames[start:]), tg, bound))
    finally:
        env.close()
    return out


def demo_file_episodes(path: str | os.PathLike, camera: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Successful demos of a robomimic-style HDF5 file (``vla-rl record-demos`` / ``libero-demos`` / an SFT demo
    file): ``(frames [T, H, W, 3] of `camera`, success flags)``; the frames are the observations before each action
    and the last action succeeds, so the flags are set on a virtual frame ``T`` (targets ``(T - t) / T``)."""
    from sims.demos import demo_data_group

    out = []
    with demo_data_group(path) as data:
        for k in sorted(data.keys()):
            g = data[k]
            if not bool(g.attrs.get("success", True)):
                continue
            obs = g["obs"]
            key = f"{camera}_image" if f"{camera}_image" in obs else camera
            if key not in obs:
                raise ValueError(f"data.demo_paths={str(path)!r}: demo {k} has no camera data.camera={camera!r}; "
                                 f"expected one of its obs keys {sorted(obs)}")
            frames = obs[key][()]
            flags = np.zeros(len(frames) + 1, bool)
            flags[-1] = True
            out.append((frames, flags))
    if not out:
        raise ValueError(f"data.demo_paths={str(path)!r}: no successful demos (expected a demo file holding at least "
                         "one demo whose 'success' attribute is true, or none)")
    return out


def policy_targets(episodes: Sequence[tuple[np.ndarray, bool]], failures: str,
                   success_length: float | None = None) -> list[tuple[np.ndarray, np.ndarray, bool]]:
    """A policy's own rollouts of one task, ``(frames [T+1, H, W, 3], success)`` each (an episode that succeeds ends
    at its first successful frame), -> ``(frames, targets [T+1], is_lower_bound)`` for
    :func:`train_progress_encoder`: successes get the time to go ``(T - t) / T``; failures by ``failures``: ``drop``
    (left out), ``play`` (target 1: no progress) or ``hindsight`` (the lower bound ``min(1, (T - t + 1) / L)`` of the
    module docstring, ``L`` = the median length of the successes here, else ``success_length``; with neither, the
    failures are left out)."""
    if failures not in ("drop", "play", "hindsight"):
        raise ValueError(f"policy_failures={failures!r}: expected drop, play or hindsight")
    out: list[tuple[np.ndarray, np.ndarray, bool]] = []
    lengths = [len(f) - 1 for f, ok in episodes if ok and len(f) > 1]
    ell = float(np.median(lengths)) if lengths else success_length
    for frames, ok in episodes:
        n = len(frames)
        if ok and n > 1:
            flags = np.zeros(n, bool)
            flags[-1] = True
            out.append((frames, time_to_go(flags), False))
        elif not ok and failures == "play":
            out.append((frames, np.ones(n, np.float32), False))
        elif not ok and failures == "hindsight" and ell:
            t = np.arange(n)
            out.append((frames, np.minimum(1.0, (n - t) / ell).astype(np.float32), True))
    return out


# ---- the file ------------------------------------------------------------------------------------------------
def save_progress_encoder(encoder: ProgressEncoder, path: str | os.PathLike, trained_on: dict) -> Path:
    """Write the state dict with its architecture and data provenance as safetensors metadata (atomically)."""
    from safetensors.torch import save_file

    from grpo.checkpoint import atomic_output

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"encoder": KIND, "format_version": FORMAT_VERSION, "config": json.dumps(asdict(encoder.cfg)),
            "trained_on": json.dumps(trained_on)}
    with atomic_output(path) as tmp:
        save_file({k: v.detach().cpu().contiguous() for k, v in encoder.state_dict().items()}, str(tmp), metadata=meta)
    return path


def read_progress_metadata(path: str | os.PathLike, key: str = "srpo.encoder_path") -> dict:
    """The file's metadata, checked (cheap: the header only); one-line ``ValueError`` / ``FileNotFoundError``."""
    from safetensors import safe_open

    if path is None or not os.path.isfile(path):
        raise FileNotFoundError(f"{key}={str(path)!r}: no such file (expected a .safetensors written by "
                                "`vla-rl fit-encoder`)")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
            keys = set(f.keys())
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types for a damaged header
        raise ValueError(f"{key}={str(path)!r}: not a readable safetensors file "
                         f"({' '.join(str(e).split())[:120]})") from None
    if meta.get("encoder") != KIND:
        raise ValueError(f"{key}={str(path)!r}: metadata encoder={meta.get('encoder')!r}, expected {KIND!r} (a file "
                         "written by `vla-rl fit-encoder`)")
    try:
        cfg = ProgressEncoderConfig(**json.loads(meta["config"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{key}={str(path)!r}: bad architecture metadata ({e})") from None
    want = set(ProgressEncoder(cfg).state_dict())
    if keys != want:
        raise ValueError(f"{key}={str(path)!r}: tensors do not match the architecture in its metadata (missing "
                         f"{sorted(want - keys)[:3]}, unexpected {sorted(keys - want)[:3]})")
    return {"config": cfg, "trained_on": json.loads(meta.get("trained_on", "{}"))}


def load_progress_encoder(path: str | os.PathLike, key: str = "srpo.encoder_path") -> ProgressEncoder:
    """A :class:`ProgressEncoder` from :func:`save_progress_encoder`'s file (checked by
    :func:`read_progress_metadata`)."""
    from safetensors.torch import load_file

    meta = read_progress_metadata(path, key)
    enc = ProgressEncoder(meta["config"])
    try:
        enc.load_state_dict(load_file(str(path)))
    except RuntimeError as e:  # a tensor of the wrong shape
        raise ValueError(f"{key}={str(path)!r}: {' '.join(str(e).split())[:200]}") from None
    enc.trained_on = meta["trained_on"]
    return enc.eval().requires_grad_(False)


# ---- one command: vla-rl fit-encoder CONFIG ------------------------------------------------------------------
@dataclass
class FitDataConfig:
    demo_paths: list[str] = field(default_factory=list)  # robomimic-style HDF5 demo files (record-demos, libero-demos,
                                                         # SFT demos): their successful demos
    expert_tasks: list[str] = field(default_factory=list)  # sims tasks whose scripted expert is recorded here
                                                           # (successful episodes only)
    expert_per_task: int = 30  # successful expert episodes per task in expert_tasks
    expert_seed_offset: int = 500_000  # initial state of the first expert episode (keep disjoint from RL,
                                       # evaluation and bench states)
    expert_noise: float = 0.05  # Gaussian noise on the expert's motion (more varied frames)
    play_per_task: int = 0  # undirected-play episodes (smooth random actions) per task in
                            # expert_tasks, target 1 (no progress)
    play_horizon: int = 30  # steps of one play episode
    detour_per_task: int = 0  # scripted-expert episodes after a random detour per task in expert_tasks (states off
                              # the expert's path; targets: the expert's time to go from there, or the hindsight
                              # bound if it did not recover; world_models.progress_encoder.record_detour_episodes)
    detour_steps: list[int] = field(default_factory=lambda: [1, 20])  # [low, high]: play steps before the expert
                                                                      # takes over, drawn uniformly per episode
    hold_steps: int = 2  # frames recorded after a success (target 0)
    max_steps: int = 120  # step limit of one expert episode
    camera: str = "agentview"  # the camera SRPO sees: the RL run's env.video_camera
    image_size: int = 32  # render size of the recorded episodes (the RL run's env image size)
    env_kwargs: dict = field(default_factory=dict)  # extra sims.make arguments for the recorded tasks
    policy: str = ""  # a VLA whose own rollouts join the data (builtin:tabletop_base or a vla-rl train run's policy
                      # directory; vla-rl fit-encoder rolls it out); "": none
    policy_tasks: list[str] = field(default_factory=list)  # sims tasks it is rolled out on (empty: data.expert_tasks)
    policy_per_task: int = 0  # the policy's episodes per task (its flow head sampled, as in RL)
    policy_seed_offset: int = 600_000  # initial state of the first policy episode (disjoint from RL / eval / benches)
    policy_max_steps: int = 40  # step limit of one policy episode
    policy_image_size: int = 0  # render size of the policy's own cameras in its rollouts (the RL run's
                                # env.kwargs.image_size); its frames for this encoder come at image_size (an extra
                                # view); 0: image_size
    policy_failures: Literal["drop", "play", "hindsight"] = "play"  # targets of its failed episodes: drop (left out),
        # play (1: no progress) or hindsight (VIP-style lower bound on the time to go; world_models.progress_encoder)

    def __post_init__(self) -> None:
        if not self.demo_paths and not self.expert_tasks:
            raise ValueError("data: no training data; set data.demo_paths (HDF5 demo files) and/or data.expert_tasks "
                             "(sims tasks with a scripted expert)")
        require_at_least("data", self, expert_per_task=1, expert_seed_offset=0, max_steps=1, image_size=8,
                         hold_steps=0, play_per_task=0, play_horizon=1, detour_per_task=0, policy_seed_offset=0)
        require_at_most("data", self, expert_per_task=MAX_EPISODES, play_per_task=MAX_EPISODES,
                        detour_per_task=MAX_EPISODES, play_horizon=MAX_EPISODES)  # (1e9: recorded for days)
        for key in ("expert_seed_offset", "policy_seed_offset"):  # initial-state seeds, as every job's ``seed``
            if getattr(self, key) > MAX_SEED:
                raise ValueError(f"data.{key}={getattr(self, key)}: expected at most 2**32 - 1 = {MAX_SEED}")
        if len(self.detour_steps) != 2 or not 0 <= int(self.detour_steps[0]) <= int(self.detour_steps[1]):
            raise ValueError(f"data.detour_steps={self.detour_steps}: expected [low, high] with 0 <= low <= high")
        if int(self.detour_steps[1]) > MAX_EPISODE_STEPS:  # (was: 1e9 accepted: one detour played for ever)
            raise ValueError(f"data.detour_steps={self.detour_steps}: expected at most {MAX_EPISODE_STEPS} play steps "
                             "before the expert")
        if self.policy_tasks and not self.policy:  # (was: accepted and read nowhere)
            raise ValueError(f"data.policy_tasks={self.policy_tasks} but data.policy is empty: expected [] (no policy "
                             "is rolled out), or name the VLA in data.policy")
        if not 0 <= self.expert_noise < math.inf:
            raise ValueError(f"data.expert_noise must be a finite std >= 0, got {self.expert_noise}")
        if self.policy_image_size != 0 and self.policy_image_size < 16:
            raise ValueError(f"data.policy_image_size={self.policy_image_size}: expected 0 (= data.image_size) or a "
                             "render size >= 16 px")
        require_at_least("data", self, policy_per_task=0, policy_max_steps=1)
        require_at_most("data", self, max_steps=MAX_EPISODE_STEPS, hold_steps=MAX_EPISODE_STEPS,  # (1e12 steps: one
                        policy_max_steps=MAX_EPISODE_STEPS, policy_image_size=1024)  # episode recorded for ever)
        for key in ("expert_tasks", "policy_tasks", "demo_paths"):  # twice: the same episodes (same seeds) twice
            names = [str(t) for t in getattr(self, key)]
            dup = sorted({t for t in names if names.count(t) > 1})
            if dup:
                raise ValueError(f"data.{key} names {dup} more than once (expected distinct entries; "
                                 + ("data.expert_per_task sets the episodes per task)" if key != "demo_paths"
                                    else "each file is read once)"))
        if self.policy_per_task and not self.policy:
            raise ValueError(f"data.policy_per_task={self.policy_per_task} but data.policy is empty (name the VLA to "
                             "roll out, e.g. builtin:tabletop_base)")
        if self.policy and not self.policy_per_task:  # (was: accepted, the policy never rolled out nor checked)
            raise ValueError(f"data.policy={self.policy!r} does nothing with data.policy_per_task=0 (set the policy's "
                             "episodes per task, e.g. data.policy_per_task: 20, or leave data.policy empty)")


@dataclass
class FitEncoderConfig:
    output: str = "runs/progress_encoder/encoder.safetensors"  # the encoder file to write (srpo.encoder_path)
    seed: int = 0  # seeds the weights, the minibatches and the expert's noise
    data: FitDataConfig = field(  # what it learns from
        default_factory=lambda: FitDataConfig(expert_tasks=["tabletop/reach"]))
    model: ProgressEncoderConfig = field(default_factory=ProgressEncoderConfig)  # the architecture
    train: ProgressTrainConfig = field(default_factory=ProgressTrainConfig)  # the optimization

    def inactive_keys(self) -> dict[str, str]:
        """Keys the chosen model reads nowhere (:func:`grpo.config.check_inactive_keys` refuses them when given):
        ``model.dim`` unless ``model.head=distance``, ``train.distance_weight`` without ``model.aux_dim``."""
        out: dict[str, str] = {}
        if self.model.head != "distance":
            out["model.dim"] = (f"model.head={self.model.head!r} (the distance head's latent width; the time-to-go "
                                "head's auxiliary projection is model.aux_dim)")
        if not self.model.aux_dim:
            out["train.distance_weight"] = "model.aux_dim=0 (the weight of the auxiliary temporal-distance loss)"
        return out

    def __post_init__(self) -> None:
        if not str(self.output).endswith(".safetensors"):
            raise ValueError(f"output={self.output!r}: expected a path ending in .safetensors")
        if self.train.shift >= self.model.image_size:  # the pad + crop would move the frame out of its own view
            raise ValueError(f"train.shift={self.train.shift}: expected fewer pixels than model.image_size="
                             f"{self.model.image_size} (a random shift of a few pixels; 0: none)")
        if self.data.expert_tasks and self.data.image_size != self.model.image_size:
            raise ValueError(f"data.image_size={self.data.image_size} but model.image_size={self.model.image_size}: "
                             "the encoder would learn from resized frames, not the view SRPO gives it; set both to "
                             "the frame size SRPO will use (srpo.frame_size)")


def check_fit_inputs(cfg: FitEncoderConfig) -> None:
    """Before anything is recorded or trained: the demo files exist, the tasks are registered, the output can be
    written."""
    import sims
    from grpo.preflight import (
        check_choice,
        check_hdf5_demo_file,
        check_not_in_a_checkpoint,
        check_path_exists,
        check_writable_file,
    )
    from sims.config import extra_view_name_size

    for p in cfg.data.demo_paths:
        what = "an HDF5 demo file (vla-rl record-demos / libero-demos)"
        check_path_exists("data.demo_paths", p, what)
        check_hdf5_demo_file("data.demo_paths", p, what)
    tasks = list(sims.list_tasks())
    for t in cfg.data.expert_tasks:
        check_choice("data.expert_tasks", t, tasks)
        if sims.has_scripted_expert(t) is False:  # (was: NotImplementedError's traceback once its env was built)
            raise ValueError(f"data.expert_tasks: {t!r} has no scripted expert; expected tasks with one "
                             f"({sims.EXPERT_TASKS})")
    for t in cfg.data.policy_tasks:
        check_choice("data.policy_tasks", t, tasks)
    name, size = extra_view_name_size(cfg.data.env_kwargs)
    own_view = size is not None and name == cfg.data.camera
    for t in dict.fromkeys([*cfg.data.expert_tasks, *cfg.data.policy_tasks]):  # options and camera, no env built
        sims.check_options(t, dict(cfg.data.env_kwargs), "data.env_kwargs")
        if not own_view:
            sims.check_options(t, {**cfg.data.env_kwargs, "cameras": (cfg.data.camera,)}, "data.camera")
    check_path_exists("data.policy", cfg.data.policy, "a VLA policy directory (save_pretrained) or builtin:<name>")
    # (what is inside a policy directory is the frontend's check: vla-rl fit-encoder, vla_rl.preflight)
    check_writable_file(cfg.output, "output")
    check_not_in_a_checkpoint(cfg.output, "output")


# rollout(task, n, seed_offset, max_steps) -> n episodes (frames uint8 [T+1, H, W, 3], success): the policy's own
Rollout = Callable[[str, int, int, int], list[tuple[np.ndarray, bool]]]


def gather_episodes(cfg: FitDataConfig, seed: int, log=print, rollout: Rollout | None = None
                    ) -> tuple[list[np.ndarray], list[np.ndarray], dict, list[bool]]:
    """The training episodes of ``cfg`` -> ``(videos [T_i, H, W, 3], targets [T_i], provenance, is_lower_bound)``;
    ``rollout`` (the frontend's) runs ``cfg.policy`` when ``cfg.policy_per_task`` > 0."""
    videos, targets, bounds, where = [], [], [], {"demo_paths": {}, "expert": {}}
    expert_len: dict[str, float] = {}
    for p in cfg.demo_paths:
        eps = demo_file_episodes(p, cfg.camera)
        where["demo_paths"][str(p)] = len(eps)
        for frames, flags in eps:
            videos.append(frames)
            targets.append(time_to_go(flags)[: len(frames)])
            bounds.append(False)
        log(f"{p}: {len(eps)} successful demos")
    for task in cfg.expert_tasks:
        eps = record_expert_episodes(task, cfg.expert_per_task, cfg.expert_seed_offset, cfg.camera, cfg.image_size,
                                     cfg.max_steps, cfg.hold_steps, cfg.expert_noise, cfg.env_kwargs, seed)
        where["expert"][task] = {"episodes": len(eps), "init_seeds_from": cfg.expert_seed_offset}
        expert_len[task] = float(np.median([int(np.argmax(s)) for _, s in eps]))
        for frames, flags in eps:
            videos.append(frames)
            targets.append(time_to_go(flags))
            bounds.append(False)
        log(f"{task}: {len(eps)} scripted-expert episodes (mean {np.mean([len(f) for f, _ in eps]):.1f} frames)")
        if cfg.play_per_task:
            play = record_play_episodes(task, cfg.play_per_task, cfg.expert_seed_offset + 50_000, cfg.camera,
                                        cfg.image_size, cfg.play_horizon, cfg.env_kwargs, seed)
            where["expert"][task]["play_episodes"] = len(play)
            for frames, tg in play:
                videos.append(frames)
                targets.append(tg)
                bounds.append(False)
        if cfg.detour_per_task:
            det = record_detour_episodes(task, cfg.detour_per_task, cfg.expert_seed_offset + 70_000, expert_len[task],
                                         cfg.camera, cfg.image_size, cfg.max_steps, cfg.hold_steps, cfg.expert_noise,
                                         tuple(cfg.detour_steps), cfg.env_kwargs, seed)
            n_rec = sum(not b for _, _, b in det)
            where["expert"][task]["detour_episodes"] = {"episodes": len(det), "recovered": n_rec,
                                                        "steps": list(cfg.detour_steps)}
            for frames, tg, bd in det:
                videos.append(frames)
                targets.append(tg)
                bounds.append(bd)
            log(f"{task}: {len(det)} expert episodes after a detour of {cfg.detour_steps[0]}-{cfg.detour_steps[1]} "
                f"play steps ({n_rec} recovered)")
    if cfg.policy_per_task:
        if rollout is None:
            raise ValueError("data.policy_per_task > 0 needs the policy's rollouts (run it through vla-rl fit-encoder)")
        where["policy"] = {"policy": cfg.policy, "failures": cfg.policy_failures, "tasks": {}}
        for task in cfg.policy_tasks or cfg.expert_tasks:
            eps = rollout(task, cfg.policy_per_task, cfg.policy_seed_offset, cfg.policy_max_steps)
            rows = policy_targets(eps, cfg.policy_failures, expert_len.get(task))
            n_ok = sum(ok for _, ok in eps)
            where["policy"]["tasks"][task] = {"episodes": len(eps), "successes": int(n_ok), "used": len(rows)}
            for frames, tg, bd in rows:
                videos.append(frames)
                targets.append(tg)
                bounds.append(bd)
            log(f"{task}: {len(eps)} episodes of {cfg.policy} ({n_ok} successes; {len(rows)} used, failures: "
                f"{cfg.policy_failures})")
    where["camera"] = cfg.camera
    return videos, targets, where, bounds


def fit_encoder(cfg: FitEncoderConfig, log=print, rollout: Rollout | None = None) -> tuple[Path, list[float]]:
    """Gather the data (``rollout``: the frontend's runner of ``data.policy``), train, save: the encoder file and
    the loss curve."""
    videos, targets, where, bounds = gather_episodes(cfg.data, cfg.seed, log, rollout)
    torch.manual_seed(cfg.seed)
    enc = ProgressEncoder(cfg.model)
    losses = train_progress_encoder(enc, videos, targets, cfg.train, cfg.seed, log, bounds)
    where.update(seed=cfg.seed, steps=cfg.train.steps, final_loss=float(np.mean(losses[-max(1, len(losses) // 10):])))
    return save_progress_encoder(enc, cfg.output, where), losses

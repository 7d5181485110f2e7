"""The world model as a batched gymnasium environment (World-Env / World-VLA-Loop: RL inside the model).

``WorldModelVecEnv`` implements ``gymnasium.vector.VectorEnv`` over ``num_envs`` imagined rollouts that are
advanced together in one batched model call (GPU-friendly: no per-env Python loop in the hot path).

* ``reset(seed, options={"starts": idx})`` picks start states from a pool of real context clips
  (``start_frames[N, Tc, 3, H, W]`` with their instructions) -- by default uniformly from ``seed``.
* ``step(actions[B, K, A])`` takes an action *chunk* per env (the policy's chunk; ``K = cfg.chunk``), predicts
  ``K`` frames, and returns the last one as the observation. The reward is the success head's verdict
  (``sigmoid(logit) > threshold`` at any of the K frames: 1, else 0), as in World-VLA-Loop; the episode
  terminates on success and truncates after ``max_chunks`` chunks. There is no autoreset: a group
  rollout runs until every env is done, then calls ``reset`` (what GRPO over env groups does anyway).

Observations match ``sims``: ``{"images": {"agentview": uint8[B, H, W, 3]}, "instruction": tuple[str]}``, so
a policy trained in the simulator runs here unchanged. For a fixed seed the env is deterministic.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import VectorEnv

from .video_wm import VideoWorldModel


class WorldModelVecEnv(VectorEnv):
    def __init__(self, wm: VideoWorldModel, start_frames: torch.Tensor, instructions: list[str], num_envs: int,
                 max_chunks: int = 10, threshold: float = 0.5, sde: str = "ode"):
        cfg = wm.cfg
        if start_frames.dim() != 5 or start_frames.shape[1:] != (cfg.context_frames, 3, cfg.image_size, cfg.image_size):
            raise ValueError(f"start_frames must be [N, {cfg.context_frames}, 3, {cfg.image_size}, {cfg.image_size}], "
                             f"got {tuple(start_frames.shape)}")
        if len(instructions) != start_frames.shape[0]:
            raise ValueError(f"{len(instructions)} instructions for {start_frames.shape[0]} start clips")
        self.wm = wm.eval()
        self.starts = start_frames.float()
        self.instructions_pool = list(instructions)
        self.num_envs = num_envs
        self.max_chunks = max_chunks
        self.threshold = threshold
        self.sde = sde
        s = cfg.image_size
        self.single_observation_space = gym.spaces.Dict({
            "images": gym.spaces.Dict({"agentview": gym.spaces.Box(0, 255, (s, s, 3), np.uint8)}),
            "instruction": gym.spaces.Text(256),
        })
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (cfg.chunk, cfg.action_dim), np.float32)
        self.observation_space = self.single_observation_space
        self.action_space = gym.spaces.Box(-1.0, 1.0, (num_envs, cfg.chunk, cfg.action_dim), np.float32)
        self._gen = torch.Generator().manual_seed(0)
        self.context = torch.zeros(num_envs, cfg.context_frames, 3, s, s)
        self.instr: list[str] = [""] * num_envs
        self.t = np.zeros(num_envs, dtype=np.int64)

    def _obs(self) -> dict[str, Any]:
        img = (self.context[:, -1].permute(0, 2, 3, 1) * 255).round().clamp(0, 255).to(torch.uint8).numpy()
        return {"images": {"agentview": img}, "instruction": tuple(self.instr)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._gen.manual_seed(seed)
        idx = (options or {}).get("starts")
        if idx is None:
            idx = torch.randint(self.starts.shape[0], (self.num_envs,), generator=self._gen)
        idx = torch.as_tensor(idx, dtype=torch.long)
        if idx.shape != (self.num_envs,):
            raise ValueError(f"options['starts'] must hold {self.num_envs} start indices, got shape {tuple(idx.shape)}")
        self.context = self.starts[idx].clone()
        self.instr = [self.instructions_pool[i] for i in idx.tolist()]
        self.t[:] = 0
        return self._obs(), {"start_index": idx.numpy()}

    def step(self, actions):
        a = torch.as_tensor(np.asarray(actions), dtype=torch.float32)
        if a.shape != self.action_space.shape:
            raise ValueError(f"actions must have shape {self.action_space.shape}, got {tuple(a.shape)}")
        if not torch.isfinite(a).all():
            raise ValueError("non-finite actions passed to the world-model env")
        frames, logits = self.wm.predict(self.context, a.clamp(-1, 1), generator=self._gen, sde=self.sde)
        success = (torch.sigmoid(logits) > self.threshold).any(dim=1).numpy()
        tc = self.context.shape[1]
        self.context = torch.cat([self.context, frames], dim=1)[:, -tc:]
        self.t += 1
        truncated = (self.t >= self.max_chunks) & ~success
        obs = self._obs()
        info = {"success": success.copy(), "success_prob": torch.sigmoid(logits).max(dim=1).values.numpy(),
                "frames": frames}
        return obs, success.astype(np.float32), success, truncated, info

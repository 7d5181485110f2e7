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

With a state-aware success head (``wm.cfg.state_dim > 0``) both envs advance the state with the state model
every action and pass the chunk's per-step predicted states to ``wm.predict(state=[B, K, D])``
(``WorldModelVecEnv`` then needs ``state_model`` and ``start_states[N, D]``); a grounding head
(``wm.cfg.state_camera``) also gets the episode's real start frame (``ref``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import VectorEnv

from grpo.device import module_device, randn

from .video_wm import VideoWorldModel


def _last_frame_uint8(context: torch.Tensor) -> np.ndarray:
    """The newest context frame as images: ``[B, Tc, 3, H, W]`` in [0, 1] -> uint8 ``[B, H, W, 3]``."""
    return (context[:, -1].permute(0, 2, 3, 1) * 255).round().clamp(0, 255).to(torch.uint8).cpu().numpy()


def _advance(context: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """Slide the ``[B, Tc, ...]`` context window over the newly predicted ``[B, n, ...]`` frames (keeps ``Tc``)."""
    return torch.cat([context, frames], dim=1)[:, -context.shape[1]:]


class WorldModelVecEnv(VectorEnv):
    def __init__(self, wm: VideoWorldModel, start_frames: torch.Tensor, instructions: list[str], num_envs: int,
                 max_chunks: int = 10, threshold: float = 0.5, sde: str = "ode",
                 state_model: torch.nn.Module | None = None,
                 start_states: torch.Tensor | None = None):
        cfg = wm.cfg
        if cfg.state_dim and (state_model is None or start_states is None
                              or tuple(start_states.shape) != (start_frames.shape[0], cfg.state_dim)):
            raise ValueError(f"a state-aware world model (state_dim={cfg.state_dim}) needs state_model and "
                             f"start_states [N={start_frames.shape[0]}, {cfg.state_dim}], got "
                             f"{None if start_states is None else tuple(start_states.shape)}")
        if start_frames.dim() != 5 or start_frames.shape[1:] != (cfg.context_frames, 3, cfg.image_size, cfg.image_size):
            raise ValueError(f"start_frames must be [N, {cfg.context_frames}, 3, {cfg.image_size}, {cfg.image_size}], "
                             f"got {tuple(start_frames.shape)}")
        if len(instructions) != start_frames.shape[0]:
            raise ValueError(f"{len(instructions)} instructions for {start_frames.shape[0]} start clips")
        self.wm = wm.eval()
        self.device = dev = wm.device  # the imagined state lives here; start pools stay in CPU RAM
        self.state_model = None if state_model is None else state_model.eval()
        self.start_states = None if start_states is None else torch.as_tensor(start_states, device="cpu").float()
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
        self._gen = torch.Generator().manual_seed(0)  # a CPU generator: the same noise on any device
        self.context = torch.zeros(num_envs, cfg.context_frames, 3, s, s, device=dev)
        self.ref = self.context[:, 0]
        self.instr: list[str] = [""] * num_envs
        self.state = None if self.start_states is None else torch.zeros(num_envs, self.start_states.shape[1],
                                                                        device=dev)
        self.t = np.zeros(num_envs, dtype=np.int64)

    def _obs(self) -> dict[str, Any]:
        return {"images": {"agentview": _last_frame_uint8(self.context)}, "instruction": tuple(self.instr)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._gen.manual_seed(seed)
        idx = (options or {}).get("starts")
        if idx is None:
            idx = torch.randint(self.starts.shape[0], (self.num_envs,), generator=self._gen, device="cpu")
        idx = torch.as_tensor(idx, dtype=torch.long, device="cpu")
        if idx.shape != (self.num_envs,):
            raise ValueError(f"options['starts'] must hold {self.num_envs} start indices, got shape {tuple(idx.shape)}")
        self.context = self.starts[idx].to(self.device)
        self.ref = self.context[:, 0].clone()
        if self.start_states is not None:
            self.state = self.start_states[idx].to(self.device)
        self.instr = [self.instructions_pool[i] for i in idx.tolist()]
        self.t[:] = 0
        return self._obs(), {"start_index": idx.numpy()}

    def step(self, actions):
        a = torch.as_tensor(np.asarray(actions), dtype=torch.float32, device="cpu")
        if a.shape != self.action_space.shape:
            raise ValueError(f"actions must have shape {self.action_space.shape}, got {tuple(a.shape)}")
        if not torch.isfinite(a).all():
            raise ValueError("non-finite actions passed to the world-model env")
        a = a.clamp(-1, 1).to(self.device)
        states = None
        if self.state_model is not None:  # per-step states of the chunk (the state at each predicted frame)
            from .data import predict_states

            states = predict_states(self.state_model, self.state, a)
            self.state = states[:, -1]
        frames, logits = self.wm.predict(self.context, a, generator=self._gen, sde=self.sde, text=self.instr,
                                         state=states if self.wm.cfg.state_dim else None,
                                         ref=self.ref if self.wm.cfg.state_camera else None)
        prob = torch.sigmoid(logits).cpu()
        success = (prob > self.threshold).any(dim=1).numpy()
        self.context = _advance(self.context, frames)
        self.t += 1
        truncated = (self.t >= self.max_chunks) & ~success
        obs = self._obs()
        info = {"success": success.copy(), "success_prob": prob.max(dim=1).values.numpy(), "frames": frames}
        return obs, success.astype(np.float32), success, truncated, info


# ---- per-step env for sims-style consumers (vla_rl's rollouts) ------------------------------------------
class StartPool:
    """Real initial observations ``frames uint8 [N, H, W, 3]``, ``states [N, D]``, instructions; an
    ``init_seed`` picks row ``init_seed % N`` (so a GRPO group shares its start)."""

    def __init__(self, frames: np.ndarray, states: np.ndarray, instructions: list[str]):
        if not (len(frames) == len(states) == len(instructions) > 0):
            raise ValueError(f"start pool needs as many frames, states and instructions (> 0), got "
                             f"{len(frames)}, {len(states)}, {len(instructions)}")
        self.frames, self.states = np.asarray(frames), np.asarray(states, np.float32)
        self.instructions = list(instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    @classmethod
    def from_sim(cls, task: str, seeds, image_size: int, camera: str = "agentview", env_kwargs: dict | None = None
                 ) -> "StartPool":
        import sims

        env = sims.make(task, **{**dict(env_kwargs or {}), "image_size": image_size, "cameras": (camera,)})
        frames, states, instr = [], [], []
        try:
            for s in seeds:
                obs, _ = env.reset(seed=int(s), options={"init_seed": int(s)})
                frames.append(obs["images"][camera])
                states.append(obs["state"])
                instr.append(obs["instruction"])
        finally:
            env.close()
        return cls(np.stack(frames), np.stack(states), instr)


class WorldModelEnv(gym.Env):
    """One imagined episode with the ``sims`` API (``reset(seed, options={"init_seed"})``, ``step(a[A])``,
    obs ``{"images": {camera}, "state", "instruction"}``, ``info["success"/"progress"/"failed"]``), so code
    written for the simulator (``vla_rl``'s rollouts) runs inside the world model unchanged.

    * Proprio ``state`` advances every step with the state model (``world_models.data.StatePredictor``).
    * Frames advance per action *chunk*: actions are buffered until ``wm.cfg.chunk`` of them (or the episode
      end), then one world-model call predicts the chunk's frames. Observations in between repeat the last
      predicted frame (a chunking policy only looks at the frame after its chunk; recorded videos show the
      model at chunk boundaries).
    * Reward/termination: the success head's probability on the predicted frames (a state-aware head also
      reads the state model's state after each action of the chunk); success when it exceeds
      ``threshold`` at any executed frame (sparse reward 1, ``terminated``), ``truncated`` after ``max_steps``.
    """

    metadata = {"render_modes": []}

    def __init__(self, wm: VideoWorldModel, state_model: torch.nn.Module, starts: StartPool, max_steps: int = 40,
                 threshold: float = 0.5, camera: str = "agentview", task: str = "wm/task",
                 sampling_steps: int | None = None,
                 seed: int = 0):
        cfg = wm.cfg
        if starts.frames.shape[1:] != (cfg.image_size, cfg.image_size, 3):
            raise ValueError(f"start frames are {starts.frames.shape[1:]}, the world model predicts "
                             f"{(cfg.image_size, cfg.image_size, 3)}")
        self.wm, self.state_model, self.starts = wm.eval(), state_model.eval(), starts
        self.max_steps, self.threshold, self.camera, self.task = max_steps, threshold, camera, task
        self.sampling_steps = sampling_steps
        s = cfg.image_size
        d = starts.states.shape[1]
        if cfg.state_dim and cfg.state_dim != d:
            raise ValueError(f"the state-aware success head reads state [B, K, {cfg.state_dim}], the start pool's "
                             f"states have {d} values (collect them with the same env kwargs, e.g. object_state)")
        self.observation_space = gym.spaces.Dict({
            "images": gym.spaces.Dict({camera: gym.spaces.Box(0, 255, (s, s, 3), np.uint8)}),
            "state": gym.spaces.Box(-np.inf, np.inf, (d,), np.float32),
            "instruction": gym.spaces.Text(256),
        })
        self.action_space = gym.spaces.Box(-1.0, 1.0, (cfg.action_dim,), np.float32)
        self._gen = torch.Generator().manual_seed(seed)  # a CPU generator: the same noise on any device
        self.device = wm.device  # the imagined frames live here; observations go out as CPU numpy
        self.context = torch.zeros(1, cfg.context_frames, 3, s, s, device=self.device)
        self.ref = self.context[:, 0]
        self.state = np.zeros(d, np.float32)
        self.instruction, self.init_seed, self.t = "", -1, 0
        self._buf: list[np.ndarray] = []
        self._sbuf: list[np.ndarray] = []  # the state after each buffered action
        self._prob = 0.0

    def _obs(self) -> dict[str, Any]:
        return {"images": {self.camera: _last_frame_uint8(self.context)[0]}, "state": self.state.copy(),
                "instruction": self.instruction}

    def _info(self, success: bool) -> dict[str, Any]:
        return {"success": success, "progress": float(self._prob), "failed": False, "task": self.task,
                "init_seed": self.init_seed, "step": self.t}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        init_seed = options.pop("init_seed", None)
        options.pop("group_id", None)
        options.pop("task", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; valid: init_seed, group_id, task")
        if init_seed is None:
            init_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        self.init_seed = int(init_seed)
        if seed is not None:
            self._gen.manual_seed(int(seed))
        i = self.init_seed % len(self.starts)
        frame = torch.from_numpy(np.ascontiguousarray(self.starts.frames[i])).to(self.device)
        frame = frame.permute(2, 0, 1).float() / 255.0
        self.context = frame[None, None].expand(1, self.wm.cfg.context_frames, -1, -1, -1).clone()
        self.ref = frame[None].clone()  # the real start frame (the success head's instruction grounding)
        self.state = self.starts.states[i].copy()
        self.instruction = self.starts.instructions[i]
        self.t, self._buf, self._sbuf, self._prob = 0, [], [], 0.0
        return self._obs(), self._info(False)

    def _check_action(self, action) -> np.ndarray:
        a = np.asarray(action, dtype=np.float32)
        if a.shape != self.action_space.shape or not np.isfinite(a).all():
            raise ValueError(f"action must be {self.action_space.shape[0]} finite numbers, got {action!r}")
        return np.clip(a, -1.0, 1.0)

    def _push(self, a: np.ndarray, state: np.ndarray) -> bool:
        """Record one action and the state after it; True when the frame chunk is due (full, or the episode ends)."""
        self.state = state.astype(np.float32)
        self._buf.append(a)
        self._sbuf.append(self.state)
        self.t += 1
        return len(self._buf) == self.wm.cfg.chunk or self.t >= self.max_steps

    def _chunk_inputs(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The buffered actions padded to ``[1, K, A]`` and, for a state-aware head, the states ``[1, K, D]``
        (the last one repeats as padding)."""
        k, n = self.wm.cfg.chunk, len(self._buf)
        chunk = np.zeros((k, self._buf[0].shape[0]), np.float32)
        chunk[:n] = np.stack(self._buf)
        states = None
        if self.wm.cfg.state_dim:
            states = torch.from_numpy(np.stack(self._sbuf + [self._sbuf[-1]] * (k - n)))[None].to(self.device)
        return torch.from_numpy(chunk)[None].to(self.device), states

    def _noise(self) -> torch.Tensor:
        """This env's initial noise for the next chunk ``[1, 3, K, H, W]``, from its own generator."""
        c = self.wm.cfg
        return randn((1, 3, c.chunk, c.image_size, c.image_size), self._gen, self.device)

    def _take_chunk(self, frames: torch.Tensor, logits: torch.Tensor) -> bool:
        """Advance by the predicted ``frames[K, 3, H, W]`` / ``logits[K]`` of the buffered actions; the success."""
        n = len(self._buf)
        prob = torch.sigmoid(logits[:n]).cpu()
        self._prob = float(prob.max())
        self.context = _advance(self.context, frames[None, :n])
        self._buf, self._sbuf = [], []
        return bool((prob > self.threshold).any())

    def _result(self, success: bool):
        truncated = self.t >= self.max_steps and not success
        return self._obs(), float(success), success, truncated, self._info(success)

    def step(self, action):
        return type(self).step_batch([self], [action])[0]

    @classmethod
    @torch.no_grad()
    def step_batch(cls, envs: list["WorldModelEnv"], actions) -> list[tuple]:
        """``[env.step(a) for env, a in zip(envs, actions)]`` with one state-model call for all envs and one
        world-model call for all whose chunk is due (each env's noise still comes from its own generator, so the
        result matches stepping them one by one up to float rounding of the batched model). Envs over other
        models or sampling steps are stepped one by one. Raises before changing any env on a bad action.
        :meth:`step` is this with one env."""
        acts = [e._check_action(a) for e, a in zip(envs, actions)]  # all checked before any env changes
        e0 = envs[0]
        if any(e.wm is not e0.wm or e.state_model is not e0.state_model or e.sampling_steps != e0.sampling_steps
               for e in envs):
            return [cls.step_batch([e], [a])[0] for e, a in zip(envs, acts)]
        sdev = module_device(e0.state_model)
        states = e0.state_model(torch.from_numpy(np.stack([e.state for e in envs])).to(sdev),
                                torch.from_numpy(np.stack(acts)).to(sdev)).cpu().numpy()
        due = [j for j, (e, a, s) in enumerate(zip(envs, acts, states)) if e._push(a, s)]
        success = [False] * len(envs)
        if due:
            inputs = [envs[j]._chunk_inputs() for j in due]
            st = torch.cat([s for _, s in inputs]) if e0.wm.cfg.state_dim else None
            frames, logits = e0.wm.predict(
                torch.cat([envs[j].context for j in due]), torch.cat([c for c, _ in inputs]),
                noise=torch.cat([envs[j]._noise() for j in due]), steps=e0.sampling_steps,
                text=[envs[j].instruction for j in due], state=st,
                ref=torch.cat([envs[j].ref for j in due]) if e0.wm.cfg.state_camera else None)
            for row, j in enumerate(due):
                success[j] = envs[j]._take_chunk(frames[row], logits[row])
        return [e._result(s) for e, s in zip(envs, success)]


def register_world_model_env(name: str, wm: VideoWorldModel, state_model: torch.nn.Module, starts: StartPool,
                             sim_task: str | None = None, **env_kw: Any) -> str:
    """Register ``name`` (e.g. ``"wm/reach"``) in ``sims``' registry so ``sims.make(name, **kw)`` builds a
    :class:`WorldModelEnv` over these models. Options ``kw``: ``image_size`` must be the world model's, ``max_steps``
    and ``cameras`` (its first name) are honoured; the options of ``sim_task``, the simulator the world model
    imitates (a run hands both the same ``env.kwargs``), are accepted and otherwise ignored; any other option raises
    TypeError naming the valid ones. ``sims.check_options(name, kw)`` runs the same check without building an env."""
    import sims

    own = ("cameras", "image_size", "max_steps")

    def check(kw: dict[str, Any]) -> None:
        size, px = kw.get("image_size"), wm.cfg.image_size
        if size is not None and size not in (px, (px, px), [px, px]):
            raise ValueError(f"{name} renders {px}px frames, image_size={size!r} was asked for")
        if sim_task is not None:
            sims.check_options(sim_task, kw)
            return
        other = sorted(set(kw) - set(own))
        if other:
            raise TypeError(f"unknown world-model env option(s) {other}; valid: {list(own)}")

    def factory(**kw: Any) -> WorldModelEnv:
        check(kw)
        kw_env = dict(env_kw, task=name)
        if kw.get("max_steps") is not None:
            kw_env["max_steps"] = int(kw["max_steps"])
        cameras = kw.get("cameras")
        if cameras:
            kw_env["camera"] = ((cameras,) if isinstance(cameras, str) else tuple(cameras))[0]
        return WorldModelEnv(wm, state_model, starts, **kw_env)

    sims.register(name, factory, check)
    return name

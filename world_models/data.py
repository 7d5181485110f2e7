"""Simulator data for the world models: SANS-style episode mixes, policy rollouts, training windows.

World models trained only on expert successes cannot tell a success from a near miss, so (as SANS and
World-VLA-Loop do) the data mixes four kinds of episodes of one ``sims`` task, all with the same fixed
horizon ``T`` (the simulator keeps stepping after success; the expert holds its position)::

    success   the scripted expert with a little motion noise
    near      the expert until the task's progress reaches a random level (``near_progress``, 50-85 % by
              default), then hovering with small random motions: close to the goal, mostly unsuccessful
    failure   the expert working on the wrong object (plausible, smooth, unsuccessful); on simulators
              without one (robosuite: one object, ``expert_action`` only) the expert with its gripper
              held open (the last action component -1 opens in every ``sims`` env): it never grasps
    random    smooth random actions (AR(1) noise)

Actions have the env's own dimension ``A`` (tabletop 4, robosuite 7); the near-success's hover and the
random actions move the first three (translation) components only.

Every episode stores frames ``uint8 [T+1, 3, H, W]`` (frame ``t`` is the observation before action ``t``),
actions ``[T, A]``, the simulator's success flag and progress per frame ``[T+1]`` and the proprio state
``[T+1, D]``. :func:`collect_policy_episodes` records the same arrays for any policy given as an ``act``
callable (the World-VLA-Loop, ``vla_rl.wm_loop``, adds its VLA's rollouts to the data);
:mod:`world_models.windows` cuts the video world model's training windows from them, and
:class:`StatePredictor` is the state half of the
state-aware world model (``state_{t+1} = state_t + f(state_t, a_t)``; :func:`predict_states` rolls it out
open-loop, which is what the state-aware success head reads in the world-model env).

``sims`` is numpy-only; this module is where frames become tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from grpo.device import module_device

KINDS = ("success", "near", "failure", "random")


@dataclass
class Trajectories:
    frames: torch.Tensor  # uint8 [N, T+1, 3, H, W]
    actions: torch.Tensor  # float32 [N, T, A]
    success: torch.Tensor  # float32 [N, T+1]
    progress: torch.Tensor  # float32 [N, T+1]
    state: torch.Tensor  # float32 [N, T+1, D]
    kinds: list[str] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    init_seeds: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.frames.shape[0])

    @property
    def videos(self) -> torch.Tensor:
        """float ``[N, T+1, 3, H, W]`` in [0, 1]."""
        return self.frames.float() / 255.0

    @property
    def episode_success(self) -> torch.Tensor:
        return self.success.amax(dim=1) > 0.5

    def subset(self, idx: Sequence[int] | torch.Tensor) -> "Trajectories":
        idx = torch.as_tensor(idx, dtype=torch.long, device="cpu")
        il = idx.tolist()
        return Trajectories(self.frames[idx], self.actions[idx], self.success[idx], self.progress[idx], self.state[idx],
                            [self.kinds[i] for i in il], [self.instructions[i] for i in il],
                            [self.init_seeds[i] for i in il])

    def cat(self, other: "Trajectories") -> "Trajectories":
        if self.frames.shape[1:] != other.frames.shape[1:] or self.actions.shape[1:] != other.actions.shape[1:]:
            raise ValueError(f"cannot concatenate trajectories of shapes {tuple(self.frames.shape)} and "
                             f"{tuple(other.frames.shape)}")
        return Trajectories(torch.cat([self.frames, other.frames]), torch.cat([self.actions, other.actions]),
                            torch.cat([self.success, other.success]), torch.cat([self.progress, other.progress]),
                            torch.cat([self.state, other.state]), self.kinds + other.kinds,
                            self.instructions + other.instructions, self.init_seeds + other.init_seeds)

    def counts(self) -> dict[str, int]:
        out = {k: self.kinds.count(k) for k in dict.fromkeys(self.kinds)}
        out["episodes_successful"] = int(self.episode_success.sum())
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = dict(self.__dict__, kinds=[str(k) for k in self.kinds],
                     instructions=[str(i) for i in self.instructions],
                     init_seeds=[int(i) for i in self.init_seeds])  # plain types: loadable with weights_only=True
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        tmp.replace(path)  # atomic
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Trajectories":
        """Tensors and plain lists only (``torch.load(weights_only=True)``: no pickled code runs)."""
        return cls(**torch.load(path, map_location="cpu", weights_only=True))


def _stack_episodes(eps: list[dict]) -> Trajectories:
    def stack(key: str, dtype: torch.dtype | None = torch.float32) -> torch.Tensor:  # data lives in CPU RAM
        return torch.as_tensor(np.stack([e[key] for e in eps]), dtype=dtype, device="cpu")

    return Trajectories(
        frames=stack("frames", None).permute(0, 1, 4, 2, 3).contiguous(), actions=stack("actions"),
        success=stack("success"), progress=stack("progress"), state=stack("state"),
        kinds=[e["kind"] for e in eps], instructions=[e["instruction"] for e in eps],
        init_seeds=[e["init_seed"] for e in eps])


def run_episode(env, act, init_seed: int, horizon: int, camera: str = "agentview", kind: str = "") -> dict:
    """``horizon`` steps of ``act(env, obs, t, info) -> action[A]`` from ``init_seed`` (no early stop on success;
    ``info``: the last reset/step info). Frames ``[T+1, H, W, 3]`` of ``camera``, actions ``[T, A]``, state
    ``[T+1, D]``, success / progress ``[T+1]``."""
    obs, info = env.reset(seed=int(init_seed), options={"init_seed": int(init_seed)})
    if camera not in obs["images"]:
        raise ValueError(f"camera {camera!r} is not among the env's images {sorted(obs['images'])}")
    frames, states, acts = [obs["images"][camera]], [obs["state"]], []
    succ, prog = [float(info.get("success", False))], [float(info.get("progress", 0.0))]
    for t in range(horizon):
        a = np.clip(np.asarray(act(env, obs, t, info), dtype=np.float32), -1.0, 1.0)
        obs, _, _, _, info = env.step(a)
        acts.append(a)
        frames.append(obs["images"][camera])
        states.append(obs["state"])
        succ.append(float(info.get("success", False)))
        prog.append(float(info.get("progress", 0.0)))
    return {"frames": np.stack(frames), "actions": np.stack(acts), "success": np.asarray(succ, np.float32),
            "progress": np.asarray(prog, np.float32), "state": np.stack(states).astype(np.float32),
            "instruction": obs["instruction"], "init_seed": int(init_seed), "kind": kind}


NEAR_PROGRESS = (0.5, 0.85)  # tabletop's: task progress at which a near-success stops following the expert


def _progress(env, info: dict) -> float:
    """The task's progress in [0, 1] now: tabletop's own ``task.progress(env)``, else the last step's
    ``info["progress"]`` (robosuite: its shaped reward, normalised)."""
    u = getattr(env, "unwrapped", env)
    task = getattr(u, "task", None)
    if task is not None and hasattr(task, "progress"):
        return float(task.progress(u))
    return float(info.get("progress", 0.0))


def _actor(kind: str, rng: np.random.Generator, noise: float, action_dim: int = 4,
           near_progress: tuple[float, float] = NEAR_PROGRESS):
    """``act(env, obs, t, info) -> float32[action_dim]`` for one episode of ``kind`` (module docstring)."""
    from sims import ScriptedExpert, TabletopEnv

    if kind == "success":
        return lambda env, obs, t, info: env.expert_action(rng=rng, noise=noise)
    if kind == "failure":
        ex = ScriptedExpert(noise=noise, wrong_object=True, seed=int(rng.integers(2**31)))

        def failure(env, obs, t, info):
            if isinstance(getattr(env, "unwrapped", env), TabletopEnv):
                return ex.act(env)
            a = np.array(env.expert_action(rng=rng, noise=noise), dtype=np.float32)
            a[-1] = -1.0  # gripper held open: the expert never grasps
            return a

        return failure
    if kind == "near":
        lo, hi = near_progress
        stop_at = float(rng.uniform(lo, hi))
        state = {"hover": False}

        def near(env, obs, t, info):
            if _progress(env, info) >= stop_at:
                state["hover"] = True
            if state["hover"]:
                a = np.zeros(action_dim, np.float32)
                a[:3] = 0.15 * rng.standard_normal(3)
                return a
            return env.expert_action(rng=rng, noise=noise)

        return near
    if kind == "random":
        prev = {"a": rng.uniform(-1, 1, action_dim)}

        def rand(env, obs, t, info):
            prev["a"] = np.clip(0.7 * prev["a"] + 0.5 * rng.standard_normal(action_dim), -1, 1)
            return prev["a"]

        return rand
    raise ValueError(f"unknown episode kind {kind!r}; expected one of {KINDS}")


def collect_sans(task: str = "tabletop/reach", counts: dict[str, int] | None = None, horizon: int = 16,
                 image_size: int = 32, seed: int = 0, seed_offset: int = 0, noise: float = 0.1,
                 camera: str = "agentview", env_kwargs: dict | None = None,
                 near_progress: tuple[float, float] = NEAR_PROGRESS) -> Trajectories:
    """A SANS-style mix (module docstring) of ``counts`` episodes per kind; initial states are
    ``seed_offset + i`` (use disjoint offsets for training and held-out data); ``env_kwargs`` go to
    ``sims.make`` (e.g. ``object_state=True``); ``near_progress``: the range of task progress at which a
    near-success stops following the expert (the task's progress scale: robosuite Lift's shaped progress is
    ~0.4 over the cube and 0.5 once grasped, so it needs ~(0.25, 0.5) where tabletop uses (0.5, 0.85))."""
    import sims

    counts = dict(counts or {"success": 16, "near": 16, "failure": 8, "random": 8})
    bad = sorted(set(counts) - set(KINDS))
    if bad:
        raise ValueError(f"unknown episode kind(s) {bad}; expected {KINDS}")
    lo, hi = (float(x) for x in near_progress)
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"near_progress must be (low, high) with 0 <= low <= high <= 1, got {tuple(near_progress)}")
    env = sims.make(task, **{**dict(env_kwargs or {}), "image_size": image_size, "cameras": (camera,)})
    rng = np.random.default_rng([seed, seed_offset])
    eps, s = [], seed_offset
    a_dim = int(env.action_space.shape[0])
    try:
        for kind in KINDS:
            for _ in range(int(counts.get(kind, 0))):
                eps.append(run_episode(env, _actor(kind, rng, noise, a_dim, (lo, hi)), s, horizon, camera, kind))
                s += 1
    finally:
        env.close()
    if not eps:
        raise ValueError("counts asks for no episodes")
    return _stack_episodes(eps)


@torch.no_grad()
def collect_policy_episodes(act, task: str, init_seeds: Sequence[int], horizon: int, image_size: int,
                            camera: str = "agentview", kind: str = "policy", env_kwargs: dict | None = None
                            ) -> Trajectories:
    """Real-simulator rollouts of a policy, recorded like :func:`collect_sans`: ``act(env, obs, t, info) ->
    action[A]`` (:func:`run_episode`; called with ``t = 0`` first in every episode, where a stateful policy, e.g.
    one with an action queue, resets) from each of ``init_seeds``, ``horizon`` steps. ``kind`` of each episode
    becomes ``<kind>_success`` / ``_near`` / ``_failure`` (near: unsuccessful with max progress >= 0.5)."""
    import sims

    env = sims.make(task, **{**dict(env_kwargs or {}), "image_size": image_size, "cameras": (camera,)})
    eps = []
    try:
        for s in init_seeds:
            e = run_episode(env, act, s, horizon, camera)
            ok = e["success"].max() > 0.5
            e["kind"] = f"{kind}_" + ("success" if ok else "near" if e["progress"].max() >= 0.5 else "failure")
            eps.append(e)
    finally:
        env.close()
    return _stack_episodes(eps)


# ---- proprio state model ---------------------------------------------------------------------------
class StatePredictor(nn.Module):
    """``state_{t+1} = state_t + MLP([(state_t - mu) / sigma, a_t]) * sigma_delta`` (normalizers fit on data)."""

    def __init__(self, state_dim: int, action_dim: int, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim + action_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(),
                                 nn.Linear(hidden, state_dim))
        for name, dim in (("mu", state_dim), ("sigma", state_dim), ("dsigma", state_dim)):
            self.register_buffer(name, torch.zeros(dim) if name == "mu" else torch.ones(dim))

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([(state - self.mu) / self.sigma, action.float()], dim=-1)
        return state + self.net(x) * self.dsigma


@torch.no_grad()
def predict_states(model: nn.Module, first: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Open-loop state rollout: ``first[N, D]`` + ``actions[N, T, A]`` -> the predicted state after each action
    ``[N, T, D]`` (entry ``t`` goes with frame ``t + 1``), as the world-model env advances its state."""
    dev = module_device(model)  # the result stays on the model's device
    s, actions, out = first.float().to(dev), actions.to(dev), []
    for t in range(actions.shape[1]):
        s = model(s, actions[:, t].float())
        out.append(s)
    return torch.stack(out, dim=1) if out else torch.zeros(first.shape[0], 0, first.shape[-1], device=dev)


def _transitions(data: Trajectories):
    s, a = data.state, data.actions
    return s[:, :-1].reshape(-1, s.shape[-1]), a.reshape(-1, a.shape[-1]), s[:, 1:].reshape(-1, s.shape[-1])


def train_state_predictor(model: StatePredictor, data: Trajectories, steps: int = 500, batch: int = 256,
                          lr: float = 2e-3, seed: int = 0, fit_normalizers: bool = True) -> list[float]:
    s0, a, s1 = _transitions(data)
    if fit_normalizers:
        model.mu.copy_(s0.mean(0))
        model.sigma.copy_(s0.std(0).clamp_min(1e-4))
        model.dsigma.copy_((s1 - s0).std(0).clamp_min(1e-4))
    gen = torch.Generator().manual_seed(seed)  # batches drawn on the CPU, then moved to the model
    dev = module_device(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        i = torch.randint(s0.shape[0], (min(batch, s0.shape[0]),), generator=gen, device="cpu")
        x0, x1 = s0[i].to(dev), s1[i].to(dev)
        loss = F.mse_loss((model(x0, a[i].to(dev)) - x0) / model.dsigma, (x1 - x0) / model.dsigma)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def state_predictor_error(model: StatePredictor, data: Trajectories) -> dict[str, float]:
    """One-step MSE of the predicted next state vs the simulator, and of "state unchanged"."""
    s0, a, s1 = _transitions(data)
    dev = module_device(model)
    pred = model(s0.to(dev), a.to(dev)).cpu()
    return {"state_mse": float(((pred - s1) ** 2).mean()), "state_copy_mse": float(((s0 - s1) ** 2).mean())}

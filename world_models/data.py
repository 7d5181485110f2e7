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
``[T+1, D]``. :func:`collect_policy_episodes` records the same arrays for a VLA policy (the World-VLA-Loop
adds them to the data), :func:`wm_windows` cuts (context, action chunk, future, success) windows for the
video world model (the first frame is repeated ``context_frames - 1`` times with zero actions so that a
rollout can start from a single real observation), and :class:`StatePredictor` is the state half of the
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

from grpo.device import device_of, module_device

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
                            [self.kinds[i] for i in il], [self.instructions[i] for i in il], [self.init_seeds[i] for i in il])

    def cat(self, other: "Trajectories") -> "Trajectories":
        if self.frames.shape[1:] != other.frames.shape[1:] or self.actions.shape[1:] != other.actions.shape[1:]:
            raise ValueError(f"cannot concatenate trajectories of shapes {tuple(self.frames.shape)} and {tuple(other.frames.shape)}")
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
        state = dict(self.__dict__, kinds=[str(k) for k in self.kinds], instructions=[str(i) for i in self.instructions],
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
def collect_policy_episodes(policy, task: str, init_seeds: Sequence[int], horizon: int, image_size: int,
                            stochastic: bool = True, seed: int = 0, camera: str = "agentview",
                            kind: str = "policy", env_kwargs: dict | None = None) -> Trajectories:
    """Real-simulator rollouts of a ``vla_rl`` policy (chunked, its public ``sample_chunk``), recorded like
    :func:`collect_sans`; ``kind`` of each episode becomes ``<kind>_success`` / ``_near`` / ``_failure``
    (near: unsuccessful with max progress >= 0.5)."""
    import sims
    from vla_rl.policy import batch_to
    from vla_rl.rollout import obs_to_batch

    env = sims.make(task, **{**dict(env_kwargs or {}), "image_size": image_size, "cameras": (camera,)})
    gen = torch.Generator().manual_seed(seed)  # CPU: the policy draws on it and moves the noise
    dev = device_of(policy)

    def act(env, obs, t, info):  # LeRobot's interface: a new chunk when the policy's action queue runs dry
        batch = batch_to(obs_to_batch([obs], policy.cfg.cameras, policy.cfg.use_images), dev)
        return policy.select_action(batch, stochastic=stochastic, generator=gen)[0].clamp(-1, 1).cpu().numpy()

    eps = []
    try:
        for s in init_seeds:
            policy.reset()
            e = run_episode(env, act, s, horizon, camera)
            ok = e["success"].max() > 0.5
            e["kind"] = f"{kind}_" + ("success" if ok else "near" if e["progress"].max() >= 0.5 else "failure")
            eps.append(e)
    finally:
        env.close()
    return _stack_episodes(eps)


def wm_windows(data: Trajectories, context_frames: int, chunk: int, stride: int = 1, text_dim: int = 0,
               state: bool = False):
    """(context ``[W, Tc, 3, H, W]``, actions ``[W, K, A]``, future ``[W, K, 3, H, W]``, success ``[W, K]``)
    windows, floats in [0, 1]; the first frame is repeated ``context_frames - 1`` times (zero actions).
    With ``text_dim > 0`` a fifth tensor holds each window's instruction features ``[W, text_dim]``. With
    ``state=True`` the tuple always has seven entries: the fifth is the text features or None, the sixth the
    simulator state at each future frame ``[W, K, D]`` and the seventh the episode's first real frame
    ``[W, 3, H, W]`` (for a state-aware success head and its instruction grounding).

    Materialized: ``(Tc + K + 1)`` float frames per window. :class:`WindowSet` (the same windows, cut per batch)
    is what the loop trains on."""
    return WindowSet(data, context_frames, chunk, stride, text_dim, state).materialize()


class WindowSet:
    """:func:`wm_windows` without the copy: windows cut on the fly from the trajectories' uint8 frames.

    Window ``w`` is the ``w``-th of :func:`wm_windows`' order (start-major, episodes inner, every ``stride``-th
    start), and ``take(idx)`` returns exactly ``tuple(x[idx] for x in wm_windows(...))``: the same floats, so
    training on either draws the same batches. Memory is the trajectories' (uint8 frames, ``T+1`` per episode)
    instead of ``(context + chunk + 1)`` float frames per window: at 128 px with context 2 and chunk 4, 1.4 MB
    a window, ~31 GB for loop_robosuite_lift.yaml's 288 episodes, against ~1.1 GB of episodes.

    In padded time (the first frame repeated ``pad = context_frames - 1`` times, zero actions before it), the
    window starting at ``s`` holds context frames ``s .. s+Tc-1``, actions ``s+Tc-1 .. s+Tc+K-2`` and future
    frames / success / state ``s+Tc .. s+Tc+K-1``; in the episode's own time that is frames ``max(s+i-pad, 0)``,
    actions ``s .. s+K-1`` and futures ``s+1 .. s+K``.

    :meth:`frame_samples` gives the success head's per-frame samples of these windows (``success_samples``'
    order: window-major, then the ``K`` future frames), also without copying."""

    def __init__(self, data: Trajectories, context_frames: int, chunk: int, stride: int = 1, text_dim: int = 0,
                 state: bool = False):
        from .video_wm import instruction_features

        st = data.state
        if state and (st is None or st.dim() != 3 or st.shape[-1] == 0):
            raise ValueError("state=True needs trajectories with a state [N, T+1, D] (D > 0)")
        if context_frames < 1 or chunk < 1 or stride < 1:
            raise ValueError(f"need context_frames, chunk, stride >= 1, got {context_frames}, {chunk}, {stride}")
        n, t1 = data.frames.shape[:2]
        if data.actions.shape[:2] != (n, t1 - 1) or data.success.shape != (n, t1):
            raise ValueError(f"expected actions [N={n}, T={t1 - 1}, A] and success [N, T+1={t1}], got "
                             f"{tuple(data.actions.shape)}, {tuple(data.success.shape)}")
        self.data, self.tc, self.k, self.state = data, context_frames, chunk, state
        n_starts = t1 - chunk  # padded length (t1 + Tc - 1) minus the window (Tc + K), plus 1
        if n_starts < 1:
            raise ValueError(f"trajectories of {t1} frames are too short for {context_frames} context + {chunk} "
                             "future frames")
        starts = torch.arange(0, n_starts, stride, device="cpu")
        self._start = starts.repeat_interleave(n)  # [W] padded start of each window
        self._episode = torch.arange(n, device="cpu").repeat(len(starts))  # [W]
        self.text = instruction_features(data.instructions, text_dim) if text_dim else None  # [N, text_dim]

    def __len__(self) -> int:
        return int(self._episode.shape[0])

    def _index(self, idx) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Episode ``[B]``, context frame indices ``[B, Tc]``, action indices ``[B, K]``, future indices ``[B, K]``."""
        idx = torch.as_tensor(idx, dtype=torch.long, device="cpu")
        e, s = self._episode[idx], self._start[idx]
        pad = self.tc - 1
        ctx_t = (s[:, None] + torch.arange(self.tc, device="cpu") - pad).clamp_min(0)
        act_t = s[:, None] + torch.arange(self.k, device="cpu")
        return e, ctx_t, act_t, act_t + 1

    def take(self, idx) -> tuple[torch.Tensor | None, ...]:
        """Windows ``idx`` (``[B]``): the entries of :func:`wm_windows` for them (context, actions, future, success,
        then text features, and with ``state`` the future states and the first real frame; None where absent)."""
        d = self.data
        e, ctx_t, act_t, fut_t = self._index(idx)
        ep = e[:, None]
        out = [d.frames[ep, ctx_t].float() / 255.0, d.actions[ep, act_t], d.frames[ep, fut_t].float() / 255.0,
               d.success[ep, fut_t]]
        if self.text is not None:
            out.append(self.text[e])
        elif self.state:
            out.append(None)
        if self.state:
            out += [d.state[ep, fut_t].float(), d.frames[e, 0].float() / 255.0]
        return tuple(out)

    def materialize(self) -> tuple[torch.Tensor | None, ...]:
        """Every window at once (what :func:`wm_windows` returns)."""
        return self.take(torch.arange(len(self), device="cpu"))

    def future_states(self) -> torch.Tensor:
        """The state at every window's future frames ``[W, K, D]`` (small: fits a state-aware head's normalizer)."""
        e, _, _, fut_t = self._index(torch.arange(len(self), device="cpu"))
        return self.data.state[e[:, None], fut_t].float()

    def frame_samples(self) -> "WindowFrames":
        return WindowFrames(self)


class WindowFrames:
    """The success head's samples of a :class:`WindowSet`: sample ``j`` is future frame ``j % K`` of window
    ``j // K`` with the action that produced it, its success label (and text, state, first real frame), as
    ``success_samples(*wm_windows(...))`` would flatten them. ``labels``: all ``W*K`` labels (for class weights)."""

    def __init__(self, windows: WindowSet):
        self.w = windows
        e, _, f_t = self._at(torch.arange(len(windows) * windows.k, device="cpu"))
        self.labels = windows.data.success[e, f_t].float()

    def _at(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample ``idx`` -> (episode, action index, future frame index), each ``[B]``: sample ``j`` of window ``w``
        (padded start ``s``) is the frame after action ``s + j``."""
        w, j = idx // self.w.k, idx % self.w.k
        a_t = self.w._start[w] + j
        return self.w._episode[w], a_t, a_t + 1

    def take(self, idx) -> tuple[torch.Tensor | None, ...]:
        """Samples ``idx`` ``[B]`` -> ``(frames[B, 3, H, W], actions[B, A], labels[B], text[B, D] or None)`` and with
        ``state`` also ``(state[B, D], ref[B, 3, H, W])``."""
        e, a_t, f_t = self._at(torch.as_tensor(idx, dtype=torch.long, device="cpu"))
        d = self.w.data
        out = (d.frames[e, f_t].float() / 255.0, d.actions[e, a_t].float(), d.success[e, f_t].float(),
               None if self.w.text is None else self.w.text[e])
        if not self.w.state:
            return out
        return out + (d.state[e, f_t].float(), d.frames[e, 0].float() / 255.0)


# ---- proprio state model ---------------------------------------------------------------------------
class StatePredictor(nn.Module):
    """``state_{t+1} = state_t + MLP([(state_t - mu) / sigma, a_t]) * sigma_delta`` (normalizers fit on data)."""

    def __init__(self, state_dim: int, action_dim: int, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim + action_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
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

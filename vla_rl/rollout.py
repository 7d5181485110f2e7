"""Group rollouts of a chunking policy over ``sims`` environments, and held-out evaluation.

A *group* is ``G`` episodes that share a task and an initial state (``reset(options={"init_seed": s})``);
they differ only in the policy's sampling noise (and the env's own seed). All episodes of a call run in
lockstep: at each decision point the observations of the still-running envs are batched, the policy draws
one action chunk ``a[B, K, A]`` per env (with its log-prob record), and each env executes the first
``n_action_steps`` actions (stopping early when the episode ends).

Per decision point ``m`` the batch keeps what the update needs to recompute log-probs: the observation
(camera images uint8, state, instruction), the head's record (denoising chain or sampled actions), the old
log-probs ``[M, S]`` and stochastic-step mask ``[M, S]``, ``episode_of[m]`` and ``chunk_of[m]`` (the decision
point's index within its episode). Per episode it keeps the
frames of ``video_camera`` (for SRPO embeddings and rollout videos), success, length and the env's
``progress``.

Noise: with ``noise_key`` the policy's draws for episode ``e`` at its ``c``-th decision point come from
``grpo.distributed.keyed_generator(*noise_key, e.spec.group_id, e.spec.seed, c)``, one generator per row, so an
episode's rollout does not depend on which other episodes share its batch (or its process): a 2-process run
reproduces the 1-process one. Without it one ``generator`` serves the whole batch (evaluation).

Devices: observations are built on the CPU from the envs' numpy arrays and moved to the policy's device for each
policy call (:func:`grpo.device.device_of`); actions go back to the envs as CPU numpy. The :class:`RolloutBatch` is
kept on the CPU (observations, records, log-probs, masks, indices): the update moves each minibatch to the device.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import torch

from grpo.device import device_of
from grpo.distributed import gather_cpu, keyed_generator

from .policy import IMAGE_PREFIX, STATE_KEY, batch_to

if TYPE_CHECKING:
    from .config import VLARLConfig


@dataclass
class EpisodeSpec:
    env_name: str  # e.g. "tabletop/reach"
    init_seed: int  # fixes the initial state (shared by the group)
    group_id: int
    seed: int  # env seed (per episode)


@dataclass
class Episode:
    spec: EpisodeSpec
    instruction: str = ""
    success: bool = False
    failed: bool = False
    length: int = 0
    progress: float = 0.0
    frames: list[np.ndarray] = field(default_factory=list)  # uint8 [H, W, 3] per env step (+ the initial frame)
    states: list[np.ndarray] = field(default_factory=list)  # float32 [D] observation state, aligned with frames
    error: str = ""  # the simulator's exception, when it raised mid-episode (the episode then counts as failed)


@dataclass
class RolloutBatch:
    episodes: list[Episode]
    obs: dict[str, Any]  # LeRobot-style batch over decision points: images uint8 [M,H,W,3], state [M,D], task list
    record: dict[str, torch.Tensor]  # head record, [M, ...]
    old_logp: torch.Tensor  # [M, S]
    step_mask: torch.Tensor  # [M, S] bool
    episode_of: torch.Tensor  # [M] long
    chunk_of: torch.Tensor | None = None  # [M] long, index of the decision point within its episode
    env_steps: int = 0
    policy_calls: int = 0

    @property
    def success(self) -> torch.Tensor:
        return torch.tensor([e.success for e in self.episodes], dtype=torch.bool, device="cpu")

    @property
    def group_ids(self) -> torch.Tensor:
        return torch.tensor([e.spec.group_id for e in self.episodes], dtype=torch.long, device="cpu")

    def select(self, idx: torch.Tensor) -> dict[str, Any]:
        """The decision-point sub-batch ``idx`` as a policy batch (images converted lazily by the policy)."""
        out = {k: (v[idx] if isinstance(v, torch.Tensor) else [v[i] for i in idx.tolist()])
               for k, v in self.obs.items()}
        return out


def obs_to_batch(obs_list: Sequence[dict], cameras: Sequence[str], use_images: bool = True) -> dict[str, Any]:
    """sims observation dicts -> LeRobot-style CPU batch (images stay uint8 ``[B, H, W, 3]``; :func:`batch_to`
    moves it to the policy's device)."""
    state = np.stack([o["state"] for o in obs_list])
    batch: dict[str, Any] = {"task": [o["instruction"] for o in obs_list],
                             STATE_KEY: torch.as_tensor(state, dtype=torch.float32, device="cpu")}
    if use_images:
        for cam in cameras:
            try:
                batch[IMAGE_PREFIX + cam] = torch.as_tensor(np.stack([o["images"][cam] for o in obs_list]),
                                                            device="cpu")
            except KeyError:
                have = sorted(obs_list[0].get("images", {}))
                raise KeyError(f"camera {cam!r} not in the observation; the env renders {have}") from None
    return batch


def make_env(name: str, env_kwargs: dict | None = None):
    """``sims.make(name, **env_kwargs)`` (``sims`` owns every environment; unknown names raise there)."""
    import sims

    return sims.make(name, **dict(env_kwargs or {}))


class EnvPool:
    """Keeps ``sims`` environments alive between rollouts (creating a MuJoCo env costs more than an episode)."""

    def __init__(self, env_kwargs: dict | None = None, video_camera: str = "agentview"):
        self.env_kwargs = dict(env_kwargs or {})
        self.video_camera = video_camera
        self._free: dict[str, list] = {}
        self.created = 0
        self.discarded = 0

    def get(self, name: str, n: int) -> list:
        free = self._free.setdefault(name, [])
        while len(free) < n:
            free.append(make_env(name, self.env_kwargs))
            self.created += 1
        return free[:n]

    def discard(self, name: str, env) -> None:
        """Drop a broken env (it raised mid-episode); the next :meth:`get` builds a fresh one in its place."""
        free = self._free.get(name, [])
        if any(e is env for e in free):
            free[:] = [e for e in free if e is not env]
            self.discarded += 1
        try:
            env.close()
        except Exception:  # noqa: BLE001 - a crashed simulator may not close cleanly; it is dropped either way
            pass

    def close(self) -> None:
        for envs in self._free.values():
            for e in envs:
                e.close()
        self._free.clear()


def step_envs(envs: Sequence[Any], actions: Sequence[np.ndarray], batch: bool = True) -> list[Any]:
    """One step of each env: ``env.step(a)``'s 5-tuple, or the exception it raised, per env.

    When all envs are of one class that defines ``step_batch(envs, actions)`` (the world-model env: one state-model
    and one world-model call for the whole batch instead of one per env), that is used; its contract is to raise
    before changing any env, so on an error the envs are stepped one by one to pin the fault on its env.
    ``batch=False`` always steps one by one."""
    cls = type(envs[0])
    if batch and len(envs) > 1 and hasattr(cls, "step_batch") and all(type(e) is cls for e in envs):
        try:
            return list(cls.step_batch(envs, actions))
        except Exception:  # noqa: BLE001 - retried per env below, where the faulty one is identified
            pass
    out: list[Any] = []
    for env, a in zip(envs, actions):
        try:
            out.append(env.step(a))
        except Exception as e:  # noqa: BLE001
            out.append(e)
    return out


@torch.no_grad()
def run_episodes(policy, pool: EnvPool, specs: Sequence[EpisodeSpec], max_steps: int, stochastic: bool = True,
                 generator: torch.Generator | None = None, record_frames: bool = True,
                 stop_on_success: bool = True, noise_key: Sequence[int] | None = None, batch_envs: bool = True
                 ) -> RolloutBatch:
    """Run ``specs`` in lockstep with chunked actions; see the module docstring. ``batch_envs``: step envs that
    can be stepped together (:func:`step_envs`) in one call.

    ``noise_key`` (e.g. ``(seed, iteration)``): per-episode noise keyed by the episode's identity (module
    docstring); it replaces ``generator``."""
    if noise_key is not None and generator is not None:
        raise ValueError("pass either generator (one stream for the batch) or noise_key (one per episode), not both")
    cfg = policy.cfg
    dev = device_of(policy)
    by_name: dict[str, list[int]] = {}
    for i, s in enumerate(specs):
        by_name.setdefault(s.env_name, []).append(i)
    envs: list[Any] = [None] * len(specs)
    for name, idx in by_name.items():
        for i, env in zip(idx, pool.get(name, len(idx))):
            envs[i] = env
    episodes = [Episode(spec=s) for s in specs]
    obs: list[dict] = []
    for ep, env in zip(episodes, envs):
        o, _ = env.reset(seed=ep.spec.seed, options={"init_seed": ep.spec.init_seed})
        ep.instruction = o["instruction"]
        if record_frames:
            ep.frames.append(np.asarray(o["images"][pool.video_camera]).copy())
            ep.states.append(np.asarray(o["state"], np.float32).copy())
        obs.append(o)
    active = list(range(len(specs)))
    obs_rows: list[dict] = []
    records: list[dict[str, torch.Tensor]] = []
    logps, masks, owners, chunk_idx = [], [], [], []
    n_chunks = [0] * len(specs)
    env_steps = calls = 0
    while active:
        batch = obs_to_batch([obs[i] for i in active], cfg.cameras, cfg.use_images)
        gen: Any = generator
        if noise_key is not None:
            gen = [keyed_generator(int(noise_key[0]), *noise_key[1:], specs[i].group_id, specs[i].seed, n_chunks[i])
                   for i in active]
        sample = policy.sample_chunk(batch_to(batch, dev), stochastic=stochastic, generator=gen)
        chunk_idx.append(torch.tensor([n_chunks[i] for i in active], dtype=torch.long, device="cpu"))
        for i in active:
            n_chunks[i] += 1
        calls += 1
        obs_rows.append(batch)
        records.append({k: v.cpu() for k, v in sample.record.items()})
        logps.append(sample.logp.cpu())
        masks.append(sample.step_mask.cpu())
        owners.append(torch.tensor(active, dtype=torch.long, device="cpu"))
        chunk = sample.actions.clamp(-1.0, 1.0).cpu().numpy()
        done = dict.fromkeys(active, False)
        for k in range(cfg.n_action_steps):  # action k of every running env's chunk, batched where the env can
            running = [(row, i) for row, i in enumerate(active) if not done[i]]
            if not running:
                break
            results = step_envs([envs[i] for _, i in running], [chunk[row, k] for row, _ in running], batch_envs)
            for (row, i), res in zip(running, results):
                ep, env = episodes[i], envs[i]
                if isinstance(res, Exception):  # a simulator fault ends this episode as failed, never the run
                    ep.failed, ep.error, done[i] = True, f"{type(res).__name__}: {res}", True
                    warnings.warn(f"{ep.spec.env_name} (init_seed {ep.spec.init_seed}) raised at step {ep.length}: "
                                  f"{ep.error}; episode counted as failed, env replaced", RuntimeWarning, stacklevel=2)
                    pool.discard(ep.spec.env_name, env)
                    continue
                o, _, terminated, truncated, info = res
                env_steps += 1
                ep.length += 1
                obs[i] = o
                if record_frames:
                    ep.frames.append(np.asarray(o["images"][pool.video_camera]).copy())
                    ep.states.append(np.asarray(o["state"], np.float32).copy())
                ep.success = ep.success or bool(info.get("success", False))
                ep.failed = bool(info.get("failed", False))
                ep.progress = float(info.get("progress", 0.0))
                if terminated or truncated or ep.length >= max_steps or (stop_on_success and ep.success):
                    done[i] = True
        active = [i for i in active if not done[i]]
    obs_cat: dict[str, Any] = {}
    for k in obs_rows[0]:
        obs_cat[k] = (sum((r[k] for r in obs_rows), []) if isinstance(obs_rows[0][k], list)
                      else torch.cat([r[k] for r in obs_rows]))
    record = {k: torch.cat([r[k] for r in records]) for k in records[0]}
    return RolloutBatch(episodes, obs_cat, record, torch.cat(logps), torch.cat(masks), torch.cat(owners),
                        chunk_of=torch.cat(chunk_idx), env_steps=env_steps, policy_calls=calls)


@dataclass
class EvalResult:
    success_rate: float
    mean_length: float
    per_task: dict[str, float]
    episodes: list[Episode]


def evaluate(policy, pool: EnvPool, env_names: Sequence[str], init_seeds: Sequence[int], max_steps: int,
             record_frames: bool = False, batch_size: int = 64, seed: int = 0) -> EvalResult:
    """Deterministic policy (ODE / Gaussian mean) on held-out ``init_seeds`` of every task.

    The flow head's initial noise comes from a CPU generator seeded with ``seed``, so the same weights give the
    same result (on any device)."""
    specs = [EpisodeSpec(n, s, gid, s) for gid, (n, s) in enumerate((n, s) for n in env_names for s in init_seeds)]
    eps: list[Episode] = []
    for i in range(0, len(specs), batch_size):
        eps += run_episodes(policy, pool, specs[i:i + batch_size], max_steps, stochastic=False,
                            generator=torch.Generator(device="cpu").manual_seed(seed + i),
                            record_frames=record_frames).episodes
    per_task = {n: float(np.mean([e.success for e in eps if e.spec.env_name == n])) for n in env_names}
    return EvalResult(float(np.mean([e.success for e in eps])), float(np.mean([e.length for e in eps])), per_task, eps)


def frames_to_video(frames: Sequence[np.ndarray]) -> torch.Tensor:
    """uint8 ``[H, W, 3]`` frames -> float ``[T, 3, H, W]`` in [0, 1] (for MetricsLogger.log_video)."""
    return torch.as_tensor(np.stack(frames), device="cpu").permute(0, 3, 1, 2).float() / 255.0


def tile_videos(videos: Sequence[Sequence[np.ndarray]], ncol: int = 4) -> torch.Tensor:
    """Several episodes side by side in one ``[T, 3, H', W']`` video (shorter ones hold their last frame)."""
    t = max(len(v) for v in videos)
    padded = [list(v) + [v[-1]] * (t - len(v)) for v in videos]
    rows = []
    for r in range(0, len(padded), ncol):
        row = padded[r:r + ncol]
        row += [[np.zeros_like(row[0][0])] * t] * (ncol - len(row))
        rows.append(np.stack([np.concatenate([v[i] for v in row], axis=1) for i in range(t)]))
    return frames_to_video(list(np.concatenate(rows, axis=1)))


def cost_per_iteration(cfg: VLARLConfig) -> dict[str, int]:
    """Upper bounds per RL iteration: env steps, policy calls, NFE (network evaluations), backward passes."""
    episodes = len(cfg.env.tasks) * cfg.rl.groups_per_task * cfg.grpo.group_size
    calls = episodes * math.ceil(cfg.env.max_episode_steps / cfg.policy.n_action_steps)
    per_call = cfg.policy.flow.num_steps if cfg.policy.head == "flow" else 1
    return {"episodes": episodes, "env_steps": episodes * cfg.env.max_episode_steps, "policy_calls": calls,
            "nfe_rollout": calls * per_call, "nfe_update": cfg.rl.inner_epochs * calls * per_call,
            "backward_passes": cfg.rl.inner_epochs * math.ceil(calls / cfg.rl.minibatch_size) * cfg.rl.grad_accum}


def video_name(episodes) -> str:
    """A rollout video's file-name part naming its tasks and outcomes, e.g. ``tabletop-reach_one__3of4_success``."""
    tasks = "+".join(dict.fromkeys(e.spec.env_name.replace("/", "-") for e in episodes))
    return f"{tasks}__{sum(bool(e.success) for e in episodes)}of{len(episodes)}_success"


def probe_envs(pool: EnvPool, tasks: list[str]) -> tuple[dict[str, str], int, int]:
    """Reset one env per task: instructions, state dim, action dim."""
    instructions, dims = {}, set()
    for name in tasks:
        env = pool.get(name, 1)[0]
        obs, _ = env.reset(seed=0, options={"init_seed": 0})
        instructions[name] = obs["instruction"]
        dims.add((int(np.asarray(obs["state"]).shape[-1]), int(env.action_space.shape[0])))
    if len(dims) != 1:
        raise ValueError(f"tasks {tasks} have different (state_dim, action_dim): {sorted(dims)}; train them separately")
    state_dim, action_dim = dims.pop()
    return instructions, state_dim, action_dim


def global_rows(batch: RolloutBatch, first_episode: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Global ids of this rank's decision points and the episode of every global decision point.

    Decision points are numbered over the global batch in episode order, then by index within the episode.
    ``batch``: this rank's rollout, whose episode ``e`` is global episode ``first_episode + e``. Returns
    ``(gid[M_local] long, episode_of_global[M_global] long)``; the same numbering on any world size."""
    if batch.chunk_of is None:
        raise ValueError("the rollout batch has no chunk_of (decision-point indices); build it with run_episodes")
    counts = torch.bincount(batch.episode_of, minlength=len(batch.episodes))  # [local E] decision points each
    all_counts = gather_cpu(counts)  # [E]
    offsets = torch.cumsum(all_counts, 0) - all_counts
    gid = offsets[first_episode + batch.episode_of] + batch.chunk_of
    return gid, torch.repeat_interleave(torch.arange(len(all_counts), device="cpu"), all_counts)


def check_episode_split(cfg: VLARLConfig, world_size: int) -> None:
    """The ``E = tasks x rl.groups_per_task x grpo.group_size`` episodes of an iteration (:func:`episode_specs`) must
    split evenly over the processes (each rolls out a contiguous share)."""
    n_ep = len(cfg.env.tasks) * cfg.rl.groups_per_task * cfg.grpo.group_size
    if n_ep % world_size:
        raise ValueError(f"the {n_ep} episodes per iteration (tasks {len(cfg.env.tasks)} x rl.groups_per_task "
                         f"{cfg.rl.groups_per_task} x grpo.group_size {cfg.grpo.group_size}) do not split evenly "
                         f"over {world_size} processes; change rl.groups_per_task or grpo.group_size, or the number "
                         "of processes")


def episode_specs(cfg: VLARLConfig, it: int) -> list[EpisodeSpec]:
    """Iteration ``it``'s global episode list: per task, ``rl.groups_per_task`` initial states (``rl.train_seeds`` in
    turn, else drawn from ``rl.train_seed_range``), ``grpo.group_size`` episodes each, with keyed seeds."""
    rng = np.random.default_rng([cfg.seed, it, 7])
    specs, gid = [], 0
    for name in cfg.env.tasks:
        fixed, n = cfg.rl.train_seeds, cfg.rl.groups_per_task
        seeds = ([fixed[(it * n + j) % len(fixed)] for j in range(n)] if fixed
                 else rng.choice(cfg.rl.train_seed_range, n, replace=False))
        for s in seeds:
            for _ in range(cfg.grpo.group_size):
                specs.append(EpisodeSpec(name, int(s), gid, int(rng.integers(2**31))))
            gid += 1
    return specs

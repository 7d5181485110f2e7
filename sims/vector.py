"""Vectorized stepping in subprocess workers that survive crashes: ``VectorEnv``.

Each of the ``num_envs`` slots is one worker process holding one env per task it has run (tasks are
assigned per slot and may change at every reset). The class follows the gymnasium vector API
(``reset``/``step``/``close``, batched spaces, ``autoreset_mode = DISABLED``): an episode that ends
stays ended, later steps of that slot are skipped (``info["active"]`` False, reward 0, its final
observation repeated) until the slot is reset, which suits group rollouts that run to the end of the
longest episode.

Batched observation: ``{"images": {camera: uint8[N, H, W, 3]}, "state": float32[N, D],
"instruction": tuple of N str}`` (all slots must share state and image shapes). Batched ``info``: a
dict of arrays, one entry per slot: ``success`` bool, ``progress`` float32, ``failed`` bool,
``active`` bool (stepped by this call), ``step`` int64, ``init_seed`` int64, ``group_id`` int64, and
tuples ``task`` and ``error`` ("" when none).

Resets: ``reset(seed=None, options=None)`` with ``options`` either one dict for all slots (values that
are lists/arrays of length N are per slot) or a list of N dicts (None: leave that slot alone). Keys:
``task`` (switches the slot's task), ``init_seed``, ``instruction_idx``, ``group_id`` (bookkeeping),
``fault`` (test injection, see :mod:`sims.tabletop.env`), and ``reset_mask`` (bool[N], only in the
one-dict form). :func:`group_options` builds the options of GRPO groups (same task and initial state
within a group).

Fault tolerance: a worker that dies (segfault, ``os._exit``), raises inside ``step``, or does not
answer within ``step_timeout_s`` ends its slot's episode as failed (``terminated`` True,
``info["failed"]`` True, ``info["success"]`` False, ``info["error"]`` says why; the previous
observation is returned) and is replaced by a fresh worker at once; the run goes on. A diverging
simulation (MuJoCo's bad qacc/qvel/qpos warnings, NaN state) is reported by the env itself
(``failed``, ``info["diverged"]``, ``error``); its episode ends as failed and its worker is replaced
too (a fresh simulator, not one MuJoCo patched up), counted in ``restarts``. A reset
whose worker dies is retried once on a fresh worker, then raises; a reset that raises (a bad option, a
bug) raises RuntimeError with the worker's traceback at once.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass
from typing import Any, Sequence

import gymnasium as gym
import numpy as np

RESET_KEYS = ("task", "init_seed", "instruction_idx", "group_id", "fault")


@dataclass
class EpisodeRecord:
    """Bookkeeping of one slot's current episode."""

    task: str
    init_seed: int = -1
    group_id: int = -1
    steps: int = 0
    ret: float = 0.0
    success: bool = False
    failed: bool = False
    terminated: bool = False
    truncated: bool = False
    error: str = ""
    instruction: str = ""

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def _worker_main(conn, task: str, env_kwargs: dict, task_kwargs: dict) -> None:
    from .registry import make

    envs: dict[str, Any] = {}

    def get(name: str):
        if name not in envs:
            envs[name] = make(name, **{**env_kwargs, **task_kwargs.get(name, {})})
        return envs[name]

    try:
        env = get(task)
        conn.send(("ok", (env.action_space, env.observation_space)))
    except Exception:  # noqa: BLE001 - reported to the parent
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            cmd, arg = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            break
        try:
            if cmd == "reset":
                seed, options = arg
                task = options.get("task") or task
                env = get(task)
                out = env.reset(seed=seed, options=options)
            elif cmd == "step":
                out = env.step(arg)
            elif cmd == "call":
                name, args, kwargs = arg
                attr = getattr(env, name)
                out = attr(*args, **kwargs) if callable(attr) else attr
            elif cmd == "close":
                for e in envs.values():
                    e.close()
                conn.send(("ok", None))
                break
            else:
                raise ValueError(f"unknown worker command {cmd!r}")
            conn.send(("ok", out))
        except Exception:  # noqa: BLE001 - reported to the parent
            conn.send(("error", traceback.format_exc()))


class _Worker:
    def __init__(self, ctx, task: str, env_kwargs: dict, task_kwargs: dict):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, task, env_kwargs, task_kwargs), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.spaces = None

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        status, payload = self.recv(timeout)
        if status != "ok":
            raise RuntimeError(f"sims worker could not create its env:\n{payload}")
        self.spaces, self.ready = payload, True

    def recv(self, timeout: float):
        """("ok", value) | ("error", traceback) | ("crash", reason)."""
        try:
            if not self.conn.poll(timeout):
                return "crash", f"no answer within {timeout:.0f} s (hung)"
            return self.conn.recv()
        except (EOFError, OSError, ConnectionError) as e:
            code = self.proc.exitcode if not self.proc.is_alive() else None
            return "crash", f"worker process died (exit code {code}, {type(e).__name__})"

    def send(self, msg) -> bool:
        try:
            self.conn.send(msg)
            return True
        except (OSError, BrokenPipeError, ConnectionError):
            return False

    def kill(self) -> None:
        try:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(timeout=5)
        finally:
            self.conn.close()


def group_options(groups: Sequence[tuple[str, int]], group_size: int) -> list[dict]:
    """Per-slot reset options for GRPO groups: ``[(task, init_seed), ...]`` -> ``len(groups) * group_size``
    dicts; slots ``g * group_size .. (g + 1) * group_size - 1`` share task and init_seed, ``group_id = g``."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    return [{"task": t, "init_seed": int(s), "group_id": g} for g, (t, s) in enumerate(groups)
            for _ in range(group_size)]


class VectorEnv(gym.vector.VectorEnv):
    """``VectorEnv("tabletop/reach", num_envs=8, env_kwargs={"image_size": 64})`` or
    ``VectorEnv(["tabletop/push", "tabletop/stack"], env_kwargs=...)`` (one slot per listed task).

    env_kwargs: options for every env (``sims.make(task, **env_kwargs)``); task_kwargs: per-task
    overrides ``{task: {...}}``; context: multiprocessing start method ("forkserver" default: fast
    restarts; "spawn" also works); step_timeout_s: a worker silent this long in ``step`` is killed;
    start_timeout_s: time allowed to import and build an env in a new worker."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED}

    def __init__(self, tasks: str | Sequence[str], num_envs: int | None = None, env_kwargs: dict | None = None,
                 task_kwargs: dict | None = None, context: str = "forkserver", step_timeout_s: float = 60.0,
                 start_timeout_s: float = 300.0):
        tasks = [tasks] if isinstance(tasks, str) else list(tasks)
        if not tasks:
            raise ValueError("tasks must name at least one task")
        if num_envs is None:
            num_envs = len(tasks)
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if len(tasks) not in (1, num_envs):
            raise ValueError(f"give one task or one per env: got {len(tasks)} tasks for num_envs={num_envs}")
        from .registry import list_tasks

        known = set(list_tasks())
        for t in set(tasks):
            if t not in known and not t.startswith("libero/"):
                raise ValueError(f"unknown task {t!r}; known: {sorted(known)}")
        self.num_envs = num_envs
        self.tasks = tasks * num_envs if len(tasks) == 1 else tasks
        self.env_kwargs, self.task_kwargs = dict(env_kwargs or {}), dict(task_kwargs or {})
        self.step_timeout_s, self.start_timeout_s = float(step_timeout_s), float(start_timeout_s)
        self._ctx = mp.get_context(context)
        if context == "forkserver":
            self._ctx.set_forkserver_preload(["sims.tabletop.env", "sims.registry"])
        self.restarts = 0
        self._closed = False
        self._workers = [self._spawn(i) for i in range(num_envs)]
        for w in self._workers:
            w.wait_ready(self.start_timeout_s)
        self.single_action_space, self.single_observation_space = self._workers[0].spaces
        for i, w in enumerate(self._workers[1:], 1):
            if w.spaces[0].shape != self.single_action_space.shape:
                raise ValueError(f"slot {i} ({self.tasks[i]}) has action shape {w.spaces[0].shape}, slot 0 has "
                                 f"{self.single_action_space.shape}; a VectorEnv needs one action shape")
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.episodes = [EpisodeRecord(task=t) for t in self.tasks]
        self._obs: list[dict | None] = [None] * num_envs
        self._infos: list[dict] = [{} for _ in range(num_envs)]

    # ------------------------------------------------------------------------------ workers
    def _spawn(self, i: int) -> _Worker:
        return _Worker(self._ctx, self.tasks[i], self.env_kwargs, self.task_kwargs)

    def _restart(self, i: int) -> None:
        self._workers[i].kill()
        self._workers[i] = self._spawn(i)
        self.restarts += 1

    def _ready(self, i: int) -> bool:
        try:
            self._workers[i].wait_ready(self.start_timeout_s)
            return True
        except RuntimeError:
            return False

    # ------------------------------------------------------------------------------ reset
    def _per_slot_options(self, options) -> list[dict | None]:
        n = self.num_envs
        if options is None:
            return [{} for _ in range(n)]
        if isinstance(options, (list, tuple)):
            if len(options) != n:
                raise ValueError(f"options as a list needs one entry per env ({n}), got {len(options)}")
            return [None if o is None else dict(o) for o in options]
        if not isinstance(options, dict):
            raise TypeError(f"options must be a dict or a list of {n} dicts, got {type(options).__name__}")
        options = dict(options)
        mask = options.pop("reset_mask", None)
        mask = np.ones(n, bool) if mask is None else np.asarray(mask, bool)
        if mask.shape != (n,):
            raise ValueError(f"reset_mask must have shape ({n},), got {mask.shape}")
        out: list[dict | None] = []
        for i in range(n):
            if not mask[i]:
                out.append(None)
                continue
            o = {}
            for k, v in options.items():
                per_slot = isinstance(v, (list, tuple, np.ndarray))
                if per_slot and len(v) != n:
                    raise ValueError(f"options[{k!r}] has {len(v)} values for {n} envs")
                o[k] = v[i] if per_slot else v
                if isinstance(o[k], np.generic):
                    o[k] = o[k].item()
            out.append(o)
        return out

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | Sequence[dict | None] | None = None):
        n = self.num_envs
        opts = self._per_slot_options(options)
        seeds = [None] * n if seed is None else ([seed + i for i in range(n)] if isinstance(seed, int) else list(seed))
        if len(seeds) != n:
            raise ValueError(f"seed must be an int or {n} ints, got {len(seeds)}")
        todo = [i for i in range(n) if opts[i] is not None]
        for i in todo:
            bad = sorted(set(opts[i]) - set(RESET_KEYS))
            if bad:
                raise ValueError(f"unknown reset option(s) {bad} for env {i}; valid: {RESET_KEYS} and reset_mask")
            task = opts[i].get("task") or self.episodes[i].task
            if task != self.tasks[i]:
                self.tasks[i] = task  # a restarted worker starts on the slot's current task
        for attempt in range(2):
            for i in todo:
                if not self._ready(i):
                    self._restart(i)
                    self._workers[i].wait_ready(self.start_timeout_s)
                self._workers[i].send(("reset", (seeds[i], opts[i])))
            failed, raised = [], []
            for i in todo:
                status, payload = self._workers[i].recv(self.start_timeout_s)
                if status == "ok":
                    obs, info = payload
                    self._obs[i] = obs
                    self._infos[i] = info
                    o = opts[i]
                    self.episodes[i] = EpisodeRecord(task=info.get("task", self.tasks[i]),
                                                     init_seed=int(info.get("init_seed", -1)),
                                                     group_id=int(o.get("group_id", -1)),
                                                     instruction=obs["instruction"])
                elif status == "error":  # the env raised: a bad option or a bug, not bad luck
                    raised.append((i, payload))
                else:
                    failed.append((i, status, payload))
                    self._restart(i)
            if raised:  # every answer is in: the pipes hold nothing stale
                i, payload = raised[0]
                raise RuntimeError(f"reset of env {i} ({self.tasks[i]}) raised:\n{payload}")
            if not failed:
                break
            if attempt == 1:
                i, status, payload = failed[0]
                raise RuntimeError(f"reset of env {i} ({self.tasks[i]}) failed twice ({status}):\n{payload}")
            todo = [i for i, _, _ in failed]
        if any(o is None for o in self._obs):
            raise RuntimeError("reset() must reset every env at least once before the first step (use no reset_mask)")
        return self._batch_obs(), self._batch_info(active=np.array([opts[i] is not None for i in range(n)]))

    # ------------------------------------------------------------------------------ step
    def step(self, actions):
        n = self.num_envs
        actions = np.asarray(actions, dtype=np.float32)
        if actions.shape != (n, *self.single_action_space.shape):
            raise ValueError(f"actions must have shape {(n, *self.single_action_space.shape)}, got {actions.shape}")
        if any(o is None for o in self._obs):
            raise RuntimeError("call reset() before step()")
        active = np.array([not ep.done for ep in self.episodes])
        rewards = np.zeros(n, np.float32)
        sent = []
        for i in np.flatnonzero(active):
            if self._workers[i].send(("step", actions[i])):
                sent.append(i)
            else:
                self._fail(i, "worker pipe closed (process died)")
        deadline = time.monotonic() + self.step_timeout_s
        for i in sent:
            status, payload = self._workers[i].recv(max(0.0, deadline - time.monotonic()))
            if status == "ok":
                obs, r, term, trunc, info = payload
                ep = self.episodes[i]
                self._obs[i] = obs
                rewards[i] = r
                ep.steps += 1
                ep.ret += float(r)
                ep.success, ep.failed = bool(info.get("success", False)), bool(info.get("failed", False))
                ep.terminated, ep.truncated = bool(term), bool(trunc)
                ep.error = str(info.get("error", ""))
                self._infos[i] = info
                if info.get("diverged"):
                    ep.failed, ep.success, ep.terminated = True, False, True
                    self._restart(i)  # the next reset of this slot runs on a fresh simulator
            else:
                reason = payload if status == "crash" else payload.strip().splitlines()[-1]
                self._fail(i, f"{status}: {reason}")
        terminated = np.array([ep.terminated for ep in self.episodes])
        truncated = np.array([ep.truncated for ep in self.episodes])
        return self._batch_obs(), rewards, terminated, truncated, self._batch_info(active)

    def _fail(self, i: int, reason: str) -> None:
        ep = self.episodes[i]
        ep.steps += 1
        ep.success, ep.failed, ep.terminated, ep.truncated, ep.error = False, True, True, False, reason
        self._infos[i] = {"success": False, "progress": 0.0, "failed": True, "error": reason}
        self._restart(i)

    # ------------------------------------------------------------------------------ batching
    def _batch_obs(self) -> dict:
        obs = self._obs
        states = [o["state"] for o in obs]
        if len({s.shape for s in states}) > 1:
            raise ValueError(f"envs return different state shapes {sorted({s.shape for s in states})}; use tasks with "
                             "one state size in a VectorEnv (e.g. object_state=False)")
        cams = obs[0]["images"].keys()
        images = {}
        for c in cams:
            try:
                images[c] = np.stack([o["images"][c] for o in obs])
            except (KeyError, ValueError) as e:
                raise ValueError(f"envs disagree on camera {c!r} ({e}); use one image setup for all tasks") from None
        return {"images": images, "state": np.stack(states).astype(np.float32, copy=False),
                "instruction": tuple(o["instruction"] for o in obs)}

    def _batch_info(self, active: np.ndarray) -> dict:
        eps = self.episodes
        infos = self._infos
        return {
            "success": np.array([ep.success for ep in eps]),
            "progress": np.array([float(info.get("progress", 0.0)) for info in infos], np.float32),
            "failed": np.array([ep.failed for ep in eps]),
            "active": np.asarray(active, bool),
            "step": np.array([ep.steps for ep in eps], np.int64),
            "init_seed": np.array([ep.init_seed for ep in eps], np.int64),
            "group_id": np.array([ep.group_id for ep in eps], np.int64),
            "task": tuple(ep.task for ep in eps),
            "error": tuple(ep.error for ep in eps),
        }

    # ------------------------------------------------------------------------------ misc
    def call(self, name: str, *args, **kwargs) -> tuple:
        """``getattr(env, name)(*args, **kwargs)`` (or the attribute) in every slot's current env."""
        for w in self._workers:
            w.wait_ready(self.start_timeout_s)
            w.send(("call", (name, args, kwargs)))
        out = []
        for i, w in enumerate(self._workers):
            status, payload = w.recv(self.step_timeout_s)
            if status != "ok":
                raise RuntimeError(f"call {name!r} failed in env {i}: {payload}")
            out.append(payload)
        return tuple(out)

    def close(self, **kwargs) -> None:
        if self._closed:
            return
        self._closed = True
        for w in self._workers:
            if w.proc.is_alive() and w.send(("close", None)):
                w.recv(5.0)
            w.kill()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


__all__ = ["VectorEnv", "EpisodeRecord", "group_options"]

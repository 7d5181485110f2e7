"""Scripted-expert demonstrations in robomimic-style HDF5, and a loader for training (numpy out).

File layout (T = steps of a demo, one row per action)::

    data/                       attrs: env_args (JSON: {"tasks": [...], "env_kwargs": {...}}),
                                       total (int, rows over all demos)
      demo_<i>/                 attrs: num_samples (T), env_name ("tabletop/push"), instruction (str),
                                       init_seed (int), success (bool), expert (JSON: noise, wrong_object,
                                       drop_prob)
        actions                 float32 [T, A]     action taken at each step
        rewards                 float32 [T]        reward after each action
        dones                   uint8   [T]        1 on the last row
        progress                float32 [T]        info["progress"] after each action
        states                  float64 [T, S]     MuJoCo physics state before each action (mj_getState,
                                                   mjSTATE_PHYSICS; tabletop envs only), for replay
        obs/state               float32 [T, D]     observation "state" before each action
        obs/<camera>_image      uint8   [T, H, W, 3]  camera images before each action (gzip)
    mask/successful, mask/failed   bytes [K]       demo names (robomimic filter keys)

``demo_<i>`` are numbered in recording order. This is the layout ``vla_rl.demos`` reads.

Record: ``record_demos("tabletop/pick_place", 50, "pp.hdf5", env_kwargs={"image_size": 64}, noise=0.1)`` or
``vla-rl record-demos tabletop/pick_place 50 pp.hdf5 --noise 0.1`` (``--wrong-object`` / ``--drop-prob``
for failure data). Load: ``load_demos(path)`` (one dict per demo) or ``load_transitions(path)`` (rows
concatenated for behaviour cloning).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np


def record_episode(env, act, init_seed: int, max_steps: int | None = None, instruction_idx: int | None = None) -> dict:
    """Run one episode of ``act(env) -> action`` from ``init_seed``; returns the arrays of the layout above."""
    opts: dict[str, Any] = {"init_seed": int(init_seed)}
    if instruction_idx is not None:
        opts["instruction_idx"] = int(instruction_idx)
    obs, info = env.reset(seed=int(init_seed), options=opts)
    base = getattr(env, "unwrapped", env)
    cams = sorted(obs["images"])
    rows: dict[str, list] = {"actions": [], "rewards": [], "dones": [], "progress": [], "states": [], "state": []}
    images: dict[str, list] = {c: [] for c in cams}
    limit = max_steps or getattr(base, "max_steps", 200)
    for _ in range(limit):
        a = np.asarray(act(env), dtype=np.float32)
        rows["state"].append(obs["state"])
        for c in cams:
            images[c].append(obs["images"][c])
        if hasattr(base, "physics_state"):
            rows["states"].append(base.physics_state())
        obs, r, term, trunc, info = env.step(a)
        rows["actions"].append(a)
        rows["rewards"].append(r)
        rows["progress"].append(info.get("progress", 0.0))
        rows["dones"].append(term or trunc)
        if term or trunc:
            break
    rows["dones"][-1] = True
    out = {"actions": np.stack(rows["actions"]).astype(np.float32), "rewards": np.asarray(rows["rewards"], np.float32),
           "dones": np.asarray(rows["dones"], np.uint8), "progress": np.asarray(rows["progress"], np.float32),
           "state": np.stack(rows["state"]).astype(np.float32), "images": {c: np.stack(v) for c, v in images.items()},
           "instruction": obs["instruction"], "init_seed": int(init_seed), "success": bool(info.get("success", False)),
           "task": str(info.get("task", ""))}
    if rows["states"]:
        out["states"] = np.stack(rows["states"]).astype(np.float64)
    return out


def write_hdf5(episodes: Sequence[dict], path: str | Path, env_args: dict | None = None) -> Path:
    """Write ``episodes`` (dicts as :func:`record_episode` returns, plus optional ``expert`` dict) to ``path``."""
    import h5py

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")  # written whole, then renamed: a kill leaves no half file
    try:
        _write_hdf5_file(h5py, tmp, episodes, env_args)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _write_hdf5_file(h5py, path: Path, episodes: Sequence[dict], env_args: dict | None) -> None:
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps(env_args or {})
        data.attrs["total"] = int(sum(len(e["actions"]) for e in episodes))
        ok, bad = [], []
        for i, e in enumerate(episodes):
            name = f"demo_{i}"
            g = data.create_group(name)
            g.attrs.update(num_samples=len(e["actions"]), env_name=e["task"], instruction=e["instruction"],
                           init_seed=int(e["init_seed"]), success=bool(e["success"]),
                           expert=json.dumps(e.get("expert", {})))
            for k in ("actions", "rewards", "dones", "progress", "states"):
                if k in e:
                    g.create_dataset(k, data=e[k])
            g.create_dataset("obs/state", data=e["state"])
            for c, im in e["images"].items():
                g.create_dataset(f"obs/{c}_image", data=im, compression="gzip", compression_opts=4,
                                 chunks=(1, *im.shape[1:]))
            (ok if e["success"] else bad).append(name)
        mask = f.create_group("mask")
        mask.create_dataset("successful", data=np.array(ok, dtype="S"))
        mask.create_dataset("failed", data=np.array(bad, dtype="S"))


def record_demos(task: str, n: int, path: str | Path, env_kwargs: dict | None = None, seed_offset: int = 0,
                 noise: float = 0.0, wrong_object: bool = False, drop_prob: float = 0.0, only_success: bool = False,
                 max_tries: int | None = None, max_steps: int | None = None, fmt: str = "hdf5") -> dict:
    """Record ``n`` scripted-expert episodes of ``task`` (init seeds ``seed_offset, seed_offset + 1, ...``)
    to ``path``: robomimic-style HDF5 (``fmt="hdf5"``) or a LeRobotDataset directory (``fmt="lerobot"``,
    :mod:`sims.lerobot_dataset`). ``only_success`` skips failed episodes (up to ``max_tries`` = 3n attempts).
    Returns a summary ``{"path", "episodes", "success_rate", "steps"}``."""
    if fmt not in ("hdf5", "lerobot"):
        raise ValueError(f"demo format {fmt!r}; expected 'hdf5' or 'lerobot'")
    if not task.startswith("tabletop/"):  # (was: an AttributeError traceback from the expert, after the env was built)
        raise ValueError(f"record-demos: {task!r} has no scripted expert here (record-demos drives the tabletop tasks' "
                         "expert, with --noise / --wrong-object / --drop-prob); expected a tabletop/* task (vla-rl "
                         "train records its robosuite / LIBERO SFT demos itself; vla-rl libero-demos converts "
                         "LIBERO's)")
    if wrong_object:  # (was: one object's "wrong" demos recorded as failures; with only_success a RuntimeError
        from .tabletop.tasks import TASKS  # traceback after 3 n episodes)

        spec = TASKS.get(task.split("/", 1)[1])
        if spec is not None and (spec.n_targets or spec.n_blocks) < 2:
            raise ValueError(f"wrong_object (--wrong-object) with {task}: it has one object, so the 'other' object is "
                             "the named one; expected a task with several (tabletop/reach, push, pick_place, stack)")
        if only_success:
            raise ValueError("wrong_object (--wrong-object) with only_success (--only-success): an episode on the "
                             "wrong object never succeeds, so no demo would be kept; expected one of them")
    if drop_prob > 0 and task.split("/", 1)[1] in ("reach", "reach_one"):  # (was: accepted, recorded as if dropped)
        raise ValueError(f"drop_prob (--drop-prob {drop_prob}) with {task}: its expert never closes the gripper, so "
                         "nothing is ever dropped; expected 0, or a task that carries a block (tabletop/pick_place, "
                         "tabletop/stack)")
    from .registry import make
    from .tabletop.experts import ScriptedExpert

    env = make(task, **dict(env_kwargs or {}))
    expert = ScriptedExpert(noise=noise, wrong_object=wrong_object, drop_prob=drop_prob, seed=seed_offset)
    meta = {"noise": noise, "wrong_object": wrong_object, "drop_prob": drop_prob}
    episodes, tries = [], 0
    max_tries = max_tries or 3 * n
    try:
        while len(episodes) < n:
            if tries >= max_tries:  # (nothing written yet; was a RuntimeError traceback)
                raise ValueError(f"only {len(episodes)}/{n} successful {task} demos in {max_tries} tries "
                                 f"(noise={noise}, wrong_object={wrong_object}, drop_prob={drop_prob}); expected a "
                                 "lower noise / drop_prob, or without only_success")
            e = record_episode(env, expert.act, seed_offset + tries, max_steps)
            tries += 1
            if only_success and not e["success"]:
                continue
            e["expert"] = meta
            episodes.append(e)
    finally:
        env.close()
    if fmt == "lerobot":
        from .lerobot_dataset import write_lerobot_dataset

        write_lerobot_dataset(episodes, path, fps=int(getattr(env, "metadata", {}).get("render_fps", 20)),
                              repo_id=f"local/{task.replace('/', '_')}", robot_type=task.split("/")[0])
    else:
        write_hdf5(episodes, path, {"tasks": [task], "env_kwargs": dict(env_kwargs or {})})
    return {"path": str(path), "episodes": len(episodes), "tries": tries,
            "success_rate": float(np.mean([e["success"] for e in episodes])),
            "steps": int(sum(len(e["actions"]) for e in episodes))}



@contextmanager
def demo_data_group(path: str | Path, kind: str = "robomimic-style demo file") -> Iterator[Any]:
    """Open a robomimic-style HDF5 file read-only and yield its ``data`` group; a missing file or a file without
    ``data`` is an error naming the path and what was expected (``kind``)."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{kind} not found: {path}")
    with h5py.File(path, "r") as f:
        if "data" not in f:
            raise ValueError(f"{path} is not a {kind} (no 'data' group)")
        yield f["data"]

def load_demos(path: str | Path, cameras: Sequence[str] | None = None, only_success: bool = False) -> list[dict]:
    """Read every demo as numpy: ``{"actions", "rewards", "dones", "progress", "state", "images": {cam},
    "instruction", "task", "init_seed", "success"}``; ``cameras=None`` loads all stored cameras."""
    out = []
    with demo_data_group(path) as data:
        names = sorted(data, key=lambda k: int(k.rsplit("_", 1)[-1]))
        for name in names:
            g = data[name]
            if only_success and not bool(g.attrs.get("success", False)):
                continue
            stored = sorted(k[: -len("_image")] for k in g["obs"] if k.endswith("_image"))
            cams = stored if cameras is None else list(cameras)
            missing = [c for c in cams if c not in stored]
            if missing:
                raise KeyError(f"{path}:{name} has no camera(s) {missing}; stored: {stored}")
            e = {k: g[k][()] for k in ("actions", "rewards", "dones", "progress", "states") if k in g}
            e.update(state=g["obs/state"][()], images={c: g[f"obs/{c}_image"][()] for c in cams},
                     instruction=str(g.attrs["instruction"]), task=str(g.attrs["env_name"]),
                     init_seed=int(g.attrs["init_seed"]), success=bool(g.attrs["success"]))
            out.append(e)
    return out


def load_transitions(path: str | Path, cameras: Sequence[str] | None = None, only_success: bool = True) -> dict:
    """All demo rows concatenated for behaviour cloning: ``{"actions": float32[N, A], "state": float32[N, D],
    "images": {cam: uint8[N, H, W, 3]}, "episode": int64[N], "instructions": list[str] (per episode)}``."""
    eps = load_demos(path, cameras, only_success)
    if not eps:
        raise ValueError(f"{path} holds no {'successful ' if only_success else ''}demos")
    return {"actions": np.concatenate([e["actions"] for e in eps]), "state": np.concatenate([e["state"] for e in eps]),
            "images": {c: np.concatenate([e["images"][c] for e in eps]) for c in eps[0]["images"]},
            "episode": np.concatenate([np.full(len(e["actions"]), i, np.int64) for i, e in enumerate(eps)]),
            "instructions": [e["instruction"] for e in eps]}

"""Record a few scripted-expert demos per task and read them back (robomimic-style HDF5).

Layout (as robomimic / ``sims`` write it)::

    data/                 attrs: env_args (JSON)
      demo_0/             attrs: num_samples, instruction, env_name, init_seed
        actions           float32 [T, A]
        obs/state         float32 [T, D]
        obs/<camera>_image uint8  [T, H, W, 3]

Only successful expert episodes are kept (``max_tries`` attempts per demo). The expert is the env's
``expert_action()`` when it has one, else ``sims``' scripted expert for the task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from .sft import Demo


def _expert(env, name: str):
    if hasattr(env, "expert_action"):
        return lambda rng: env.expert_action(rng)
    import sims

    for attr in ("make_expert", "get_expert", "expert_for"):
        if hasattr(sims, attr):
            expert = getattr(sims, attr)(name, env)
            return lambda rng: expert(env) if callable(expert) else expert.act(env)
    raise RuntimeError(f"no scripted expert for {name!r}: the env has no expert_action() and sims exposes no expert "
                       "factory")


def record_episode(env, name: str, init_seed: int, cameras: Sequence[str], max_steps: int,
                   rng: np.random.Generator) -> Demo | None:
    obs, _ = env.reset(seed=init_seed, options={"init_seed": init_seed})
    act = _expert(env, name)
    states, actions, imgs = [], [], {c: [] for c in cameras}
    success = False
    for _ in range(max_steps):
        a = np.asarray(act(rng), dtype=np.float32)
        states.append(np.asarray(obs["state"], dtype=np.float32))
        for c in cameras:
            imgs[c].append(np.asarray(obs["images"][c]))
        actions.append(a)
        obs, _, terminated, truncated, info = env.step(a)
        success = bool(info.get("success", False))
        if success or terminated or truncated:
            break
    if not success:
        return None
    return Demo(obs["instruction"], np.stack(states), np.stack(actions), {c: np.stack(v) for c, v in imgs.items()},
                name)


def save_demo_file(demos: Sequence[Demo], path: str | Path, seeds: Sequence[int] | None = None) -> Path:
    import h5py

    from grpo.checkpoint import atomic_output

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as tmp, h5py.File(tmp, "w") as f:  # written whole, then renamed
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"source": "vla_rl.demos"})
        for i, d in enumerate(demos):
            g = data.create_group(f"demo_{i}")
            g.attrs.update(num_samples=len(d.actions), instruction=d.instruction, env_name=d.env_name,
                           init_seed=int(seeds[i]) if seeds is not None else -1)
            g.create_dataset("actions", data=d.actions)
            g.create_dataset("obs/state", data=d.state)
            for c, im in d.images.items():
                g.create_dataset(f"obs/{c}_image", data=im, compression="gzip")
    return path


def load_demo_file(path: str | Path, cameras: Sequence[str], per_task: int | None = None) -> list[Demo]:
    """Read demos (at most ``per_task`` per env name) from a robomimic-style HDF5 file, or from a LeRobotDataset
    directory (:mod:`vla_rl.lerobot_dataset`; ``per_task`` caps its episodes)."""
    from sims.demos import demo_data_group

    if Path(path).is_dir():
        from .lerobot_dataset import load_lerobot_demos

        return load_lerobot_demos(path, cameras, per_task)

    out: list[Demo] = []
    count: dict[str, int] = {}
    with demo_data_group(path) as data:
        keys = sorted(data.keys(), key=lambda k: int(k.split("_")[-1]) if k.split("_")[-1].isdigit() else 0)
        for k in keys:
            g = data[k]
            name = str(g.attrs.get("env_name", ""))
            if per_task is not None and count.get(name, 0) >= per_task:
                continue
            obs = g["obs"]
            state_key = "state" if "state" in obs else next(iter(k for k in obs if "state" in k))
            imgs = {}
            for c in cameras:
                key = f"{c}_image" if f"{c}_image" in obs else c
                if key not in obs:
                    raise KeyError(f"{path}:{k} has no camera {c!r}; obs keys: {sorted(obs)}")
                imgs[c] = obs[key][()]
            out.append(Demo(str(g.attrs.get("instruction", "")), obs[state_key][()].astype(np.float32),
                            g["actions"][()].astype(np.float32), imgs, name))
            count[name] = count.get(name, 0) + 1
    return out


def collect_demos(tasks: Sequence[str], per_task: int, path: str | Path, env_kwargs: dict, cameras: Sequence[str],
                  seed_offset: int, max_steps: int, max_tries: int = 5, reuse: bool = True) -> list[Demo]:
    """Record ``per_task`` successful expert demos of each task (or reuse ``path`` if it holds them)."""
    from .rollout import make_env

    path = Path(path)
    if reuse and path.is_file():
        demos = load_demo_file(path, cameras, per_task)
        if all(sum(d.env_name == t for d in demos) >= per_task for t in tasks):
            return demos
    demos, seeds = [], []
    rng = np.random.default_rng(seed_offset)
    for name in tasks:
        env = make_env(name, env_kwargs)
        got, s = 0, seed_offset
        while got < per_task:
            if s - seed_offset >= per_task * max_tries:
                raise RuntimeError(f"the scripted expert succeeded on only {got}/{per_task} demos of {name!r} "
                                   f"in {per_task * max_tries} tries")
            d = record_episode(env, name, s, cameras, max_steps, rng)
            if d is not None:
                demos.append(d)
                seeds.append(s)
                got += 1
            s += 1
        env.close()
    save_demo_file(demos, path, seeds)
    return demos

"""SFT demos from a local LeRobotDataset (v3.0, lerobot 0.4.4's format), read with LeRobot's own ``LeRobotDataset``.

Each episode becomes one :class:`vla_rl.sft.Demo`: ``observation.state`` -> ``state [T, D]``, ``action`` ->
``actions [T, A]``, ``observation.images.<camera>`` -> ``images[camera]`` uint8 ``[T, H, W, 3]`` (LeRobot returns
float ``[3, H, W]`` in [0, 1]; ``round(255 x)`` restores the stored bytes exactly for ``image`` features), and the
frames' ``task`` string -> ``instruction``. ``Demo.env_name`` is the dataset's ``robot_type`` (``sft.demos_per_task``
then caps the episodes read). ``sft.demo_path`` naming a directory selects this reader
(:func:`vla_rl.demos.load_demo_file`); robomimic-style HDF5 files stay the other format. Writing:
:mod:`sims.lerobot_dataset` (scripted-expert demos) and
:mod:`vla_rl.deploy` (robot episodes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .policy import IMAGE_PREFIX, STATE_KEY
from .sft import Demo


def is_lerobot_dataset(path: str | Path) -> bool:
    return (Path(path) / "meta" / "info.json").is_file()


def load_lerobot_demos(root: str | Path, cameras: Sequence[str], max_episodes: int | None = None,
                       repo_id: str = "local/dataset") -> list[Demo]:
    """The episodes of the LeRobotDataset at ``root`` (at most ``max_episodes``) as demos with ``cameras``."""
    try:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ImportError as e:
        raise ImportError(f"reading the LeRobotDataset {root} needs lerobot (make lerobot; README 'LeRobot'): "
                          f"{e}") from None
    if not is_lerobot_dataset(root):
        raise FileNotFoundError(f"{root} is not a LeRobotDataset (no meta/info.json)")
    ds = LeRobotDataset(repo_id, root=root)
    keys = [IMAGE_PREFIX + c for c in cameras]
    missing = [k for k in keys + [STATE_KEY, "action"] if k not in ds.features]
    if missing:
        raise KeyError(f"the LeRobotDataset at {root} has no {missing}; its features: {sorted(ds.features)}")
    robot = str(ds.meta.robot_type or "")
    episodes: dict[int, dict[str, list]] = {}
    for i in range(len(ds)):
        fr = ds[i]
        ep = int(fr["episode_index"])
        if ep not in episodes:
            if max_episodes is not None and len(episodes) >= max_episodes:
                break
            episodes[ep] = {"state": [], "action": [], "task": fr["task"], **{k: [] for k in keys}}
        e = episodes[ep]
        e["state"].append(fr[STATE_KEY].numpy())
        e["action"].append(fr["action"].numpy())
        for k in keys:
            e[k].append((fr[k].permute(1, 2, 0).numpy() * 255.0).round().clip(0, 255).astype(np.uint8))
    return [Demo(str(e["task"]).rstrip("\n"), np.stack(e["state"]).astype(np.float32),
                 np.stack(e["action"]).astype(np.float32),
                 {c: np.stack(e[IMAGE_PREFIX + c]) for c in cameras}, robot) for e in episodes.values()]

"""Episodes of ``sims`` written as a LeRobotDataset (format v3.0, what lerobot 0.4.4 writes and reads).

Written with LeRobot's own ``LeRobotDataset.create`` / ``add_frame`` / ``save_episode`` / ``finalize`` (so any
LeRobot tool reads it): one frame per env step, the observation *before* the step's action, as LeRobot records::

    observation.state              float32 [D]
    observation.images.<camera>    image   [H, W, 3] uint8 (PNG in the parquet files; ``use_videos=True``: an MP4 per
                                           camera, needs FFmpeg's shared libraries for torchcodec to read back)
    action                         float32 [A]
    next.reward / next.progress    float32 [1]   reward and info["progress"] after the action
    next.done / next.success       bool    [1]   episode end; the episode's success on its last frame
    task                           the instruction (LeRobot's per-frame task string)

The robomimic-style HDF5 of :mod:`sims.demos` stays the other format (``vla-rl record-demos ... --format lerobot``
writes this one). Needs ``lerobot`` (the ``make lerobot`` environment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

IMAGE_PREFIX = "observation.images."


def episode_features(state_dim: int, action_dim: int, cameras: dict[str, tuple[int, int]],
                     use_videos: bool = False) -> dict:
    """LeRobot ``features`` for sims episodes; ``cameras``: name -> (H, W)."""
    feats = {"observation.state": {"dtype": "float32", "shape": (state_dim,),
                                   "names": [f"s{i}" for i in range(state_dim)]},
             "action": {"dtype": "float32", "shape": (action_dim,), "names": [f"a{i}" for i in range(action_dim)]},
             "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
             "next.progress": {"dtype": "float32", "shape": (1,), "names": None},
             "next.done": {"dtype": "bool", "shape": (1,), "names": None},
             "next.success": {"dtype": "bool", "shape": (1,), "names": None}}
    for c, (h, w) in cameras.items():
        feats[IMAGE_PREFIX + c] = {"dtype": "video" if use_videos else "image", "shape": (h, w, 3),
                                   "names": ["height", "width", "channels"]}
    return feats


def write_lerobot_dataset(episodes: Sequence[dict], root: str | Path, fps: int = 20, repo_id: str = "local/sims",
                          robot_type: str = "sims", use_videos: bool = False):
    """Write ``episodes`` (dicts as :func:`sims.demos.record_episode` returns: ``state [T, D]``, ``actions [T, A]``,
    ``images`` camera -> ``[T, H, W, 3]``, ``rewards`` / ``progress`` / ``dones`` ``[T]``, ``instruction``,
    ``success``) to a new LeRobotDataset at ``root`` (which must not exist); returns the dataset (finalized)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    if not episodes:
        raise ValueError("no episodes to write")
    root = Path(root)
    if root.exists():
        raise FileExistsError(f"{root} exists; a LeRobotDataset is written to a new directory")
    e0 = episodes[0]
    cams = {c: tuple(int(x) for x in v.shape[1:3]) for c, v in sorted(e0["images"].items())}
    feats = episode_features(int(e0["state"].shape[1]), int(e0["actions"].shape[1]), cams, use_videos)
    ds = LeRobotDataset.create(repo_id, fps, feats, root=root, robot_type=robot_type, use_videos=use_videos)
    for e in episodes:
        t = len(e["actions"])
        for i in range(t):
            last = i == t - 1
            frame = {"observation.state": np.asarray(e["state"][i], np.float32),
                     "action": np.asarray(e["actions"][i], np.float32),
                     "next.reward": np.asarray([e.get("rewards", np.zeros(t))[i]], np.float32),
                     "next.progress": np.asarray([e.get("progress", np.zeros(t))[i]], np.float32),
                     "next.done": np.asarray([last]),
                     "next.success": np.asarray([bool(e.get("success", False)) and last]),
                     "task": str(e["instruction"])}
            for c in cams:
                frame[IMAGE_PREFIX + c] = np.asarray(e["images"][c][i], np.uint8)
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()
    return ds

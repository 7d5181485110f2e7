"""LIBERO suites (optional: only when the ``libero`` package is importable, e.g. ``pip install hf-libero``).

Names: ``libero/<suite>/<task index>``, e.g. ``libero/libero_spatial/0``; suites ``libero_spatial``,
``libero_object``, ``libero_goal``, ``libero_10``, ``libero_90``. The instruction is the task's own
language string; ``reset(options={"init_seed": s})`` loads the task's fixed initial state number
``s % n_init_states`` (LIBERO's evaluation protocol). Observation / action conventions are those of
:mod:`sims.robosuite_adapter` (LIBERO is built on robosuite): 7-d OSC delta pose + gripper in [-1, 1],
``state`` = eef xyz, eef quaternion, two gripper joints; success is the env's ``_check_success()``.

LIBERO asks for its data paths with ``input()`` the first time it is imported unless its config file
exists; :func:`ensure_config` writes ``$LIBERO_CONFIG_PATH/config.yaml`` (default ``~/.libero``) with
the paths inside the installed package first, so nothing ever prompts. Without ``libero``:
:func:`available` is False, :func:`list_tasks` is empty and :func:`make` raises ImportError saying how
to install it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")


def available() -> bool:
    return importlib.util.find_spec("libero") is not None


def ensure_config() -> Path:
    """Write LIBERO's config file (paths into the installed package) unless it exists; returns its path."""
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("LIBERO is not installed: `pip install hf-libero` (or install LIBERO from source)")
    pkg = Path(list(spec.submodule_search_locations)[0])
    root = pkg / "libero" if (pkg / "libero").is_dir() else pkg
    cfg_dir = Path(os.environ.get("LIBERO_CONFIG_PATH", os.path.expanduser("~/.libero")))
    path = cfg_dir / "config.yaml"
    if not path.exists():
        cfg_dir.mkdir(parents=True, exist_ok=True)
        entries = {"benchmark_root": root, "bddl_files": root / "bddl_files", "init_states": root / "init_files",
                   "datasets": root.parent / "datasets", "assets": root / "assets"}
        path.write_text("".join(f"{k}: {v}\n" for k, v in entries.items()))
    os.environ.setdefault("LIBERO_CONFIG_PATH", str(cfg_dir))
    return path


def _benchmark():
    ensure_config()
    from libero.libero import benchmark  # noqa: PLC0415 - optional dependency

    return benchmark


def list_tasks() -> list[str]:
    if not available():
        return []
    try:
        bm = _benchmark().get_benchmark_dict()
    except Exception:  # noqa: BLE001 - a broken optional install must not break sims.list_tasks
        return []
    out = []
    for suite in SUITES:
        if suite in bm:
            out += [f"libero/{suite}/{i}" for i in range(bm[suite]().n_tasks)]
    return out


class LiberoEnv:
    """A LIBERO task with the sims API (gymnasium-style ``reset``/``step``; see the module docstring)."""

    def __init__(self, suite: str, index: int, image_size: int = 128, cameras: tuple[str, ...] = ("agentview",),
                 max_steps: int = 300, object_state: bool = False):
        import gymnasium as gym

        from . import render as _render
        from .config import _image_hw

        _render.select_backend()
        bm = _benchmark()
        task_suite = bm.get_benchmark_dict()[suite]()
        if not 0 <= index < task_suite.n_tasks:
            raise ValueError(f"{suite} has tasks 0..{task_suite.n_tasks - 1}, got index {index}")
        task = task_suite.get_task(index)
        from libero.libero import get_libero_path  # noqa: PLC0415
        from libero.libero.envs import OffScreenRenderEnv  # noqa: PLC0415

        h, w = _image_hw(image_size)
        bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
        self._env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=h, camera_widths=w)
        self.init_states = task_suite.get_task_init_states(index)
        self.instruction = task.language
        self.cameras = tuple(cameras)
        self.max_steps = int(max_steps)
        self.object_state = object_state
        self.name = f"libero/{suite}/{index}"
        self.t, self.init_seed = 0, -1
        self.action_space = gym.spaces.Box(-1.0, 1.0, (7,), np.float32)

    def _obs(self, o: dict) -> dict:
        names = {"agentview": "agentview_image", "wrist": "robot0_eye_in_hand_image"}
        parts = [o["robot0_eef_pos"], o["robot0_eef_quat"], o["robot0_gripper_qpos"]]
        if self.object_state and "object-state" in o:
            parts.append(o["object-state"])
        return {"images": {c: np.ascontiguousarray(o[names[c]][::-1]) for c in self.cameras},
                "state": np.concatenate(parts).astype(np.float32), "instruction": self.instruction}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        options = dict(options or {})
        self.init_seed = int(options.get("init_seed", seed if seed is not None else 0))
        self._env.seed(self.init_seed)
        self._env.reset()
        o = self._env.set_init_state(self.init_states[self.init_seed % len(self.init_states)])
        self.t = 0
        return self._obs(o), {"success": False, "progress": 0.0, "failed": False, "task": self.name,
                              "init_seed": self.init_seed, "step": 0}

    def step(self, action):
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (7,) or not np.isfinite(a).all():
            raise ValueError(f"action must be 7 finite numbers in [-1, 1], got {action!r}")
        o, _, _, _ = self._env.step(np.clip(a, -1, 1))
        self.t += 1
        success = bool(self._env.env._check_success())
        info = {"success": success, "progress": float(success), "failed": False, "task": self.name,
                "init_seed": self.init_seed, "step": self.t}
        return self._obs(o), float(success), success, self.t >= self.max_steps, info

    def close(self) -> None:
        self._env.close()


def make(name: str, **kw: Any) -> LiberoEnv:
    """``make("libero/libero_spatial/0", image_size=128)``."""
    if not available():
        raise ImportError(f"{name!r} needs LIBERO, which is not installed: `pip install hf-libero` "
                          "(the `libero` extra of branchloop) or install LIBERO from source")
    parts = name.split("/")
    if len(parts) != 3 or parts[1] not in SUITES or not parts[2].isdigit():
        raise ValueError(f"LIBERO task names are 'libero/<suite>/<index>' with suite in {SUITES}, got {name!r}")
    return LiberoEnv(parts[1], int(parts[2]), **kw)

"""Convert LIBERO's demo files (one robomimic-style HDF5 per task) into the one-file layout of
:func:`vla_rl.demos.load_demo_file`, so that ``sft.demo_path`` can point at LIBERO's human demos::

    vla-rl libero-demos data/libero_spatial_demos.hdf5 LIBERO/datasets/libero_spatial/*_demo.hdf5 \\
        --suite libero_spatial [--per-task 10]

LIBERO's layout (``scripts/create_dataset.py`` in LIBERO): ``data`` attrs ``problem_info`` (JSON with
``language_instruction``) and ``macros_image_convention``; ``data/demo_i/actions [T, 7]`` (the same OSC delta pose +
gripper convention as :mod:`sims.libero_adapter`), ``obs/ee_pos [T, 3]``, ``obs/ee_ori [T, 3]`` (robosuite's
``quat2axisangle`` of ``robot0_eef_quat``), ``obs/gripper_states [T, 2]`` (``robot0_gripper_qpos``),
``obs/agentview_rgb`` / ``obs/eye_in_hand_rgb [T, H, W, 3]`` as robosuite rendered them.

Output per demo: ``obs/state [T, 9]`` = ee_pos + quaternion xyzw (the exact inverse of quat2axisangle) + gripper
states -- the adapter's state layout; ``obs/agentview_image`` / ``obs/wrist_image`` flipped upright the way the
adapter flips live frames (``[::-1]`` when the file's image convention is "opengl", robosuite's default, or absent);
attrs ``env_name`` = ``libero/<suite>/<task index>`` and ``instruction`` = the task's language. No-op actions are
kept (OpenVLA's pipeline drops them; this converter does not).

Replay (``replay=True``, :func:`replay_libero_file`): instead of copying the stored frames, load each demo's first
simulator state (``data/demo_i/states[0]``) into ``sims.make("libero/...")``, run its actions, and store what the env
renders and measures at *this* run's image size and cameras, keeping only the demos that still succeed -- OpenVLA's
regeneration step. LIBERO's files do not store the fixtures' sampled positions (model ``body_pos``; they live in
the ``model_file`` XML, which is not loaded here), so the replay places them from ``init_seed`` and a demo whose
fixture moved far enough can fail on replay; the count of kept demos says how many.

Where SFT data comes from: no LIBERO demo can be downloaded on this project's machines, so LIBERO's own human demos
(50 per task, ``libero-download-datasets`` where the network allows) come from the user, converted or replayed here.
For LIBERO-Spatial only, sims has a scripted expert (``LiberoEnv.expert_action``) that ``vla_rl.demos`` records
demos with when ``sft.demo_path`` is unset; the other suites have none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from .sft import Demo


def axisangle_to_quat(aa: np.ndarray) -> np.ndarray:
    """``[..., 3]`` axis-angle (robosuite's ``quat2axisangle``) -> ``[..., 4]`` quaternion xyzw (w >= -1 as stored)."""
    aa = np.asarray(aa, dtype=np.float64)
    angle = np.linalg.norm(aa, axis=-1, keepdims=True)
    safe = np.where(angle > 1e-12, angle, 1.0)
    xyz = aa / safe * np.sin(angle / 2)
    return np.concatenate([xyz, np.cos(angle / 2)], axis=-1)


def read_libero_file(path: str | Path, env_name: str, per_file: int | None = None) -> list[Demo]:
    """The demos of one LIBERO task file as :class:`Demo` (cameras ``agentview`` and ``wrist``)."""
    from sims.demos import demo_data_group

    out = []
    with demo_data_group(path, "LIBERO/robomimic demo file") as data:
        info = json.loads(data.attrs["problem_info"]) if "problem_info" in data.attrs else {}
        instruction = str(info.get("language_instruction", "")).strip()
        if not instruction:
            raise ValueError(f"{path}: data.attrs['problem_info'] has no language_instruction")
        conv = data.attrs.get("macros_image_convention", "opengl")
        conv = conv.decode() if isinstance(conv, bytes) else str(conv)
        flip = conv != "opencv"
        keys = sorted((k for k in data.keys() if k.startswith("demo_")), key=lambda k: int(k.split("_")[-1]))
        for k in keys[:per_file]:
            obs = data[k]["obs"]
            missing = [n for n in ("ee_pos", "ee_ori", "gripper_states", "agentview_rgb", "eye_in_hand_rgb")
                       if n not in obs]
            if missing:
                raise KeyError(f"{path}:{k} lacks obs/{missing} (LIBERO's layout has ee_pos, ee_ori, gripper_states, "
                               f"agentview_rgb, eye_in_hand_rgb); obs keys: {sorted(obs)}")
            state = np.concatenate([obs["ee_pos"][()], axisangle_to_quat(obs["ee_ori"][()]), obs["gripper_states"][()]],
                                   axis=-1)
            imgs = {"agentview": obs["agentview_rgb"][()], "wrist": obs["eye_in_hand_rgb"][()]}
            if flip:
                imgs = {c: np.ascontiguousarray(v[:, ::-1]) for c, v in imgs.items()}
            actions = data[k]["actions"][()].astype(np.float32)
            if actions.ndim != 2 or actions.shape[1] != 7 or len(actions) != len(state):
                raise ValueError(f"{path}:{k}: actions {actions.shape} do not match {len(state)} steps x 7")
            out.append(Demo(instruction, state.astype(np.float32), actions, imgs, env_name))
    return out


def task_index(suite: str, path: str | Path) -> int:
    """The index in LIBERO's benchmark order of the task whose demo file is ``path`` (needs ``libero``)."""
    from sims.libero_adapter import _task_map

    stem = Path(path).name.removesuffix(".hdf5").removesuffix("_demo")
    tm = _task_map()
    if suite not in tm:
        raise ValueError(f"unknown LIBERO suite {suite!r}; installed: {sorted(tm)}")
    names = list(tm[suite])
    if stem not in names:
        raise ValueError(f"{Path(path).name} is not a {suite} task's demo file; its tasks: {names}")
    return names.index(stem)


def replay_libero_file(path: str | Path, env_name: str, env_kwargs: dict | None = None, per_file: int | None = None,
                       init_seed: int = 0) -> tuple[list[Demo], int]:
    """Re-run the demos of one LIBERO task file in ``sims.make(env_name, **env_kwargs)``: each starts from its stored
    ``states[0]`` (fixtures placed from ``init_seed``), runs its stored actions and records the env's own observations
    (the env's cameras and image size). Returns the demos that reached success (cut at the success step) and the
    number replayed."""
    import sims
    from sims.demos import demo_data_group

    env = sims.make(env_name, **dict(env_kwargs or {}))
    cams = tuple(env.cfg.cameras)
    out, tried = [], 0
    try:
        with demo_data_group(path, "LIBERO/robomimic demo file") as data:
            keys = sorted((k for k in data.keys() if k.startswith("demo_")), key=lambda k: int(k.split("_")[-1]))
            for k in keys[:per_file]:
                if "states" not in data[k]:
                    raise KeyError(f"{path}:{k} has no 'states' (LIBERO's flattened MuJoCo states) to replay from")
                states, actions = data[k]["states"][()], data[k]["actions"][()].astype(np.float32)
                tried += 1
                obs, info = env.reset_to_state(states[0], init_seed=init_seed)
                st, acts, imgs = [], [], {c: [] for c in cams}
                for a in actions:
                    st.append(obs["state"])
                    acts.append(a)
                    for c in cams:
                        imgs[c].append(obs["images"][c])
                    obs, _, terminated, _, info = env.step(a)
                    if terminated:
                        break
                if info.get("success"):
                    out.append(Demo(obs["instruction"], np.stack(st), np.stack(acts),
                                    {c: np.stack(v) for c, v in imgs.items()}, env_name))
    finally:
        env.close()
    return out, tried


def convert(out: str | Path, sources: Sequence[tuple[str, str | Path]], per_task: int | None = None,
            replay: bool = False, env_kwargs: dict | None = None) -> Path:
    """Write ``sources`` (``(env_name, LIBERO file)`` pairs) into one :func:`load_demo_file` file at ``out``:
    the stored frames converted (default), or with ``replay=True`` the demos re-run and re-rendered in the env
    (``env_kwargs``: ``sims.make`` options, e.g. ``{"image_size": 128}``; failing replays are dropped)."""
    from .demos import save_demo_file

    demos: list[Demo] = []
    for env_name, path in sources:
        if replay:
            got, tried = replay_libero_file(path, env_name, env_kwargs, per_task)
            print(f"{Path(path).name}: {len(got)}/{tried} demos succeed on replay")
            demos += got
        else:
            demos += read_libero_file(path, env_name, per_task)
    if not demos:
        raise ValueError("no demos found in the given LIBERO files" + (" (none succeeded on replay)" if replay else ""))
    return save_demo_file(demos, out)

"""Convert LIBERO's demo files (one robomimic-style HDF5 per task) into the one-file layout of
:func:`vla_rl.demos.load_demo_file`, so that ``sft.demo_path`` can point at LIBERO's human demos::

    python -m vla_rl.libero_demos data/libero_spatial_demos.hdf5 LIBERO/datasets/libero_spatial/*_demo.hdf5 \\
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
"""

from __future__ import annotations

import argparse
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
            missing = [n for n in ("ee_pos", "ee_ori", "gripper_states", "agentview_rgb", "eye_in_hand_rgb") if n not in obs]
            if missing:
                raise KeyError(f"{path}:{k} lacks obs/{missing} (LIBERO's layout has ee_pos, ee_ori, gripper_states, "
                               f"agentview_rgb, eye_in_hand_rgb); obs keys: {sorted(obs)}")
            state = np.concatenate([obs["ee_pos"][()], axisangle_to_quat(obs["ee_ori"][()]), obs["gripper_states"][()]], axis=-1)
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
    from sims.libero_adapter import _benchmark

    stem = Path(path).name.removesuffix(".hdf5").removesuffix("_demo")
    ts = _benchmark().get_benchmark_dict()[suite]()
    names = [ts.get_task(i).name for i in range(ts.n_tasks)]
    if stem not in names:
        raise ValueError(f"{Path(path).name} is not a {suite} task's demo file; its tasks: {names}")
    return names.index(stem)


def convert(out: str | Path, sources: Sequence[tuple[str, str | Path]], per_task: int | None = None) -> Path:
    """Write ``sources`` (``(env_name, LIBERO file)`` pairs) into one :func:`load_demo_file` file at ``out``."""
    from .demos import save_demo_file

    demos: list[Demo] = []
    for env_name, path in sources:
        demos += read_libero_file(path, env_name, per_task)
    if not demos:
        raise ValueError("no demos found in the given LIBERO files")
    return save_demo_file(demos, out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vla_rl.libero_demos", description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("inputs", nargs="+", help="LIBERO *_demo.hdf5 files")
    p.add_argument("--suite", help="LIBERO suite (e.g. libero_spatial): task indices from LIBERO's benchmark order")
    p.add_argument("--env-names", nargs="+", help="explicit env names (libero/<suite>/<i>), one per input, instead of --suite")
    p.add_argument("--per-task", type=int, default=None)
    a = p.parse_args(argv)
    if bool(a.suite) == bool(a.env_names):
        p.error("give exactly one of --suite or --env-names")
    if a.env_names and len(a.env_names) != len(a.inputs):
        p.error(f"--env-names has {len(a.env_names)} names for {len(a.inputs)} inputs")
    names = a.env_names or [f"libero/{a.suite}/{task_index(a.suite, f)}" for f in a.inputs]
    path = convert(a.out, list(zip(names, a.inputs)), a.per_task)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

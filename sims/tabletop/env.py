"""``TabletopEnv``: one language-conditioned tabletop task on plain MuJoCo behind the gymnasium API.

Action: ``float32[4] = [dx, dy, dz, g]`` in [-1, 1]. ``dx, dy, dz`` ask the gripper to move by
``max_delta * d*`` metres (default 3 cm) from where it is, in world axes (x right, y away from the
camera, z up); the position actuators track the target with a lag, and the target is clipped to the
workspace (x, y in [-0.3, 0.3], z in [0.01, 0.35] m). ``g`` = +1 closes the fingers, -1 opens them
(finger target = (1 - g) / 2 * 4 cm of travel per finger; the fingers stop on contact and squeeze
with at most 12 N). Out-of-range values are clipped or raise ValueError (``action_out_of_bounds``);
NaN/inf or a wrong shape always raise ValueError.

Observation (a dict)::

    images       {camera: uint8[H, W, 3]}   "agentview" (front, above) and/or "wrist" (on the hand); absent
                                            cameras are not rendered; {} with cameras=()
    state        float32[9 (+K)]            proprio: grip point xyz (m), its velocity (m/s), the two finger
                                            openings (m, 0 = closed, 0.04 = open), last gripper command;
                                            with object_state=True also object positions (K values)
    instruction  str                        e.g. "put the red block in the bin"

Reward: sparse 1.0 on the step that succeeds (``reward="dense"``: the progress measure). ``terminated``
on success or failure, ``truncated`` after ``max_steps``. ``info``: ``success`` (bool), ``progress``
(float in [0, 1], diagnostic; 1.0 exactly when ``success``, 0.0 when ``failed``), ``failed`` (bool:
the simulation diverged, a block fell off the table, or an injected fault), ``task``, ``init_seed``,
``step``; on divergence also ``diverged`` (True) and ``error``.

``reset(seed=None, options={"init_seed": int, "instruction_idx": int, "fault": {...}})``: the initial
state depends only on ``init_seed`` (default: ``seed``, else drawn from the env's RNG), so a GRPO group
resets all its envs with one ``init_seed``. ``instruction_idx`` picks the paraphrase (default: drawn
from ``init_seed``). ``fault`` injects a failure for tests: ``{"kind": "nan" | "raise" | "exit" |
"hang", "step": k}`` on the k-th step (1-based) writes NaN into the velocities (MuJoCo detects the
divergence), raises RuntimeError, kills the process (``os._exit``), or sleeps for an hour.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np

from .. import render as _render
from ..config import TabletopConfig, build
from .scene import COLORS, FINGER_OPEN, HAND_RANGE, scene_xml
from .tasks import TASKS, Layout, Task, initial_scales

_render.select_backend()
import mujoco  # noqa: E402  (after the GL backend is chosen)

_render.install_warning_handler()

PROPRIO_DIM = 9
_BAD = (int(mujoco.mjtWarning.mjWARN_BADQACC), int(mujoco.mjtWarning.mjWARN_BADQVEL),
        int(mujoco.mjtWarning.mjWARN_BADQPOS))
(_XLO, _XHI), (_YLO, _YHI), (_ZLO, _ZHI) = HAND_RANGE
_HALF_OPEN = 0.5 * FINGER_OPEN
INSTRUCTION_CHARSET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.'-"


class TabletopEnv(gym.Env):
    """See the module docstring. ``TabletopEnv("pick_place", TabletopConfig(image_size=128))``."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, task: str | Task, config: TabletopConfig | None = None, render_mode: str | None = None,
                 **kw: Any):
        if isinstance(task, str):
            if task not in TASKS:
                raise ValueError(f"unknown tabletop task {task!r}; expected one of {sorted(TASKS)}")
            task = TASKS[task]
        if config is not None and kw:
            raise TypeError(f"pass either config= or keyword options, not both (got {sorted(kw)})")
        self.cfg = config if config is not None else build(TabletopConfig, kw)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.task = task
        self.max_steps = self.cfg.max_steps or task.max_steps
        self.n_substeps = self.cfg.n_substeps
        h, w = self.cfg.hw
        xs = self.cfg.extra_view[2] if self.cfg.extra_view else 0  # the offscreen buffer holds the larger render
        self.model = mujoco.MjModel.from_xml_string(scene_xml(task.n_blocks, task.n_targets, task.goal, task.bin,
                                                              (max(h, xs), max(w, xs)), self.cfg.timestep))
        self.data = mujoco.MjData(self.model)
        m = self.model
        # views into mjData (its buffers live as long as the MjData): cheaper than the property per step
        self._qpos, self._qvel, self._ctrl = self.data.qpos, self.data.qvel, self.data.ctrl
        self._warn = self.data.warning.number
        self._task_id = f"tabletop/{task.name}"
        self._max_delta = float(self.cfg.max_delta)
        self._dense = self.cfg.reward == "dense"
        self._block_qadr = [int(m.jnt_qposadr[m.joint(f"block{i}").id]) for i in range(task.n_blocks)]
        self._block_vadr = [int(m.jnt_dofadr[m.joint(f"block{i}").id]) for i in range(task.n_blocks)]
        self._block_z = [a + 2 for a in self._block_qadr]
        self._block_geom = [m.geom(f"block{i}").id for i in range(task.n_blocks)]
        self._target_geom = [m.geom(f"target{i}").id for i in range(task.n_targets)]
        self._mocap = {n: int(m.body_mocapid[m.body(n).id]) for n in
                       [f"target{i}" for i in range(task.n_targets)] + (["goal"] if task.goal else [])
                       + (["bin"] if task.bin else [])}
        self._target_mocap = [self._mocap[f"target{i}"] for i in range(task.n_targets)]
        self._mocap_pos = self.data.mocap_pos
        self._finger_geoms = (m.geom("finger_l").id, m.geom("finger_r").id)
        self._renderer = None
        self._extra_renderer = None
        self._hw = (h, w)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        obj_dim = 3 * (task.n_blocks + task.n_targets) + 2 * (task.goal + task.bin)
        self.state_dim = PROPRIO_DIM + (obj_dim if self.cfg.object_state else 0)
        self.observation_space = gym.spaces.Dict({
            "images": gym.spaces.Dict({**{c: gym.spaces.Box(0, 255, (h, w, 3), np.uint8) for c in self.cfg.cameras},
                                       **({self.cfg.extra_view[0]: gym.spaces.Box(0, 255, (xs, xs, 3), np.uint8)}
                                          if xs else {})}),
            "state": gym.spaces.Box(-np.inf, np.inf, (self.state_dim,), np.float32),
            "instruction": gym.spaces.Text(max_length=256, charset=INSTRUCTION_CHARSET),
        })
        self.layout: Layout | None = None
        self.instruction = ""
        self.init_seed = -1
        self.t = 0
        self.a0 = self.d0 = 1.0
        self._grip_cmd = -1.0
        self._fault: dict | None = None
        self._done = False
        self._grasp_cache: tuple = (None, False)

    # ------------------------------------------------------------------------------------ accessors
    def grip_pos(self) -> np.ndarray:
        """[3] m, the grip point (between the fingertips)."""
        return self._qpos[0:3]

    def finger_opening(self) -> tuple[float, float]:
        """Opening of each finger in m (0 closed, 0.04 open)."""
        lo, hi = self._qpos[3:5].tolist()
        return lo, hi

    def block_pos(self, i: int) -> np.ndarray:
        a = self._block_qadr[i]
        return self._qpos[a:a + 3]

    def target_pos(self, i: int) -> np.ndarray:
        return self._mocap_pos[self._target_mocap[i]]

    def grasped(self, i: int) -> bool:
        """Both fingers touch block ``i``."""
        d = self.data
        if d.ncon == 0:
            return False
        key = i  # the cache is cleared by every step() and reset()
        if self._grasp_cache[0] == key:
            return self._grasp_cache[1]
        b = self._block_geom[i]
        fl, fr = self._finger_geoms
        left = right = False
        for g1, g2 in d.contact.geom.tolist():
            if g1 == b or g2 == b:
                other = g1 + g2 - b
                left, right = left or other == fl, right or other == fr
        self._grasp_cache = (key, left and right)
        return left and right

    # ----------------------------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        task = options.pop("task", None)
        if task is not None and task not in (self.task.name, f"tabletop/{self.task.name}"):
            raise ValueError(f"this env runs tabletop/{self.task.name}; options['task']={task!r} needs another env "
                             "(sims.make it, or use sims.VectorEnv which switches tasks per worker)")
        init_seed = options.pop("init_seed", None)
        if init_seed is None:
            init_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        if not isinstance(init_seed, (int, np.integer)) or isinstance(init_seed, bool) or init_seed < 0:
            raise ValueError(f"options['init_seed'] must be an int >= 0, got {init_seed!r}")
        idx = options.pop("instruction_idx", None)
        fault = options.pop("fault", None)
        options.pop("group_id", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; valid: task, init_seed, instruction_idx, "
                             "fault, group_id")
        self._fault = _check_fault(fault)
        self.init_seed = int(init_seed)
        lay = self.task.sample(np.random.default_rng(self.init_seed))
        if idx is not None:
            if not isinstance(idx, (int, np.integer)) or not 0 <= idx < len(self.task.templates):
                raise ValueError(f"options['instruction_idx'] must be an int in [0, {len(self.task.templates)}), got "
                                 f"{idx!r}")
            lay.instruction_idx = int(idx)
        self._apply(lay)
        self._grasp_cache = (None, False)
        self.instruction = self.task.instruction(lay)
        self.a0, self.d0 = initial_scales(self)
        self.t, self._done, self._grip_cmd = 0, False, -1.0
        return self._obs(), self._info(False, False)

    def _apply(self, lay: Layout) -> None:
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        d.qpos[0:3] = lay.hand
        d.qpos[3:5] = FINGER_OPEN
        d.ctrl[0:3] = lay.hand
        d.ctrl[3:5] = FINGER_OPEN
        rng = np.random.default_rng(self.init_seed + 7919) if self._block_qadr else None  # block yaws
        for i, a in enumerate(self._block_qadr):
            yaw = rng.uniform(-0.3, 0.3)
            d.qpos[a:a + 3] = lay.objects[i]
            d.qpos[a + 3:a + 7] = [np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
            m.geom_rgba[self._block_geom[i], :3] = COLORS[lay.colors[i]]
        for i, g in enumerate(self._target_geom):
            d.mocap_pos[self._mocap[f"target{i}"]] = lay.objects[i]
            m.geom_rgba[g, :3] = COLORS[lay.colors[i]]
        if lay.goal is not None:
            d.mocap_pos[self._mocap["goal"]] = [lay.goal[0], lay.goal[1], 0.001]
        if lay.bin is not None:
            d.mocap_pos[self._mocap["bin"]] = [lay.bin[0], lay.bin[1], 0.0]
        mujoco.mj_forward(m, d)
        self.layout = lay

    def _check_action(self, action) -> list[float]:
        """The action as 4 Python floats in [-1, 1] (clipped, or ValueError; see the module docstring)."""
        if type(action) is np.ndarray and action.shape == (4,) and action.dtype.kind == "f":
            vals = action.tolist()  # the common case: a float array from a policy
        else:
            try:
                a = np.asarray(action, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"action must be 4 numbers [dx, dy, dz, gripper] in [-1, 1], got {action!r}") from None
            if a.shape != (4,):
                raise ValueError(f"action must have shape (4,) = [dx, dy, dz, gripper], got shape {a.shape}: "
                                 f"{action!r}")
            vals = a.tolist()
        x, y, z, g = vals  # plain floats: cheaper than numpy reductions for 4 values (NaN fails every comparison)
        if -1.0 <= x <= 1.0 and -1.0 <= y <= 1.0 and -1.0 <= z <= 1.0 and -1.0 <= g <= 1.0:
            return vals
        if not all(math.isfinite(v) for v in vals):
            raise ValueError(f"action has non-finite values: {vals}")
        if self.cfg.action_out_of_bounds == "raise":
            bad = [(i, v) for i, v in enumerate(vals) if not -1.0 <= v <= 1.0]
            raise ValueError(f"action components {bad} (index, value) are outside the bounds [-1, 1] of "
                             "[dx, dy, dz, gripper]; scale your policy output, or use action_out_of_bounds='clip'")
        return [min(1.0, max(-1.0, v)) for v in vals]

    def step(self, action):
        if self.layout is None:
            raise RuntimeError("call reset() before step()")
        dx, dy, dz, g = self._check_action(action)
        self.t += 1
        if self._fault is not None and self._fault["step"] == self.t:
            _fire(self._fault["kind"], self.data)
        x, y, z = self._qpos[0:3].tolist()
        md = self._max_delta
        f = (1.0 - g) * _HALF_OPEN
        self._ctrl[:] = (min(max(x + dx * md, _XLO), _XHI), min(max(y + dy * md, _YLO), _YHI),
                         min(max(z + dz * md, _ZLO), _ZHI), f, f)
        self._grip_cmd = g
        mujoco.mj_step(self.model, self.data, self.n_substeps)
        self._grasp_cache = (None, False)
        w = self._warn
        diverged = bool(w[_BAD[0]] or w[_BAD[1]] or w[_BAD[2]])
        if diverged:
            success, failed, progress = False, True, 0.0
        else:
            q = self._qpos
            failed = bool(self._block_z) and any(q[i] < -0.05 for i in self._block_z)  # a block fell off the table
            if failed:
                success, progress = False, 0.0
            else:
                success, progress = self.task.evaluate(self)
        info = {"success": success, "progress": progress, "failed": failed, "task": self._task_id,
                "init_seed": self.init_seed, "step": self.t}
        if diverged:
            info["diverged"] = True
            info["error"] = "simulation diverged (MuJoCo bad qacc/qvel/qpos warning)"
        reward = progress if self._dense else float(success)
        self._done = success or failed
        images = self.render_images() if self.cfg.cameras or self.cfg.extra_view else {}
        return ({"images": images, "state": self.state_vector(), "instruction": self.instruction},
                reward, self._done, self.t >= self.max_steps, info)

    def _info(self, success: bool, failed: bool, diverged: bool = False) -> dict:
        progress = 0.0 if failed else (1.0 if success else float(self.task.progress(self)))
        info = {"success": success, "progress": progress, "failed": failed, "task": self._task_id,
                "init_seed": self.init_seed, "step": self.t}
        if diverged:
            info["error"] = "simulation diverged (MuJoCo bad qacc/qvel/qpos warning)"
        return info

    def state_vector(self) -> np.ndarray:
        q = self._qpos
        if not self.cfg.object_state:  # (from plain floats: ~2x cheaper than np.concatenate for 9 values)
            x, y, z, fl, fr = q[0:5].tolist()
            vx, vy, vz = self._qvel[0:3].tolist()
            return np.array((x, y, z, vx, vy, vz, fl, fr, self._grip_cmd), np.float32)
        s = [q[0:3], self._qvel[0:3], q[3:5], (self._grip_cmd,)]
        if self.cfg.object_state:
            s += [self.block_pos(i) for i in range(self.task.n_blocks)]
            s += [self.target_pos(i) for i in range(self.task.n_targets)]
            if self.layout.goal is not None:
                s.append(self.layout.goal)
            if self.layout.bin is not None:
                s.append(self.layout.bin)
        return np.concatenate(s, dtype=np.float32)

    def physics_state(self) -> np.ndarray:
        """float64[S]: MuJoCo's full physics state (``mj_getState``, mjSTATE_PHYSICS), for replay."""
        out = np.empty(mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_PHYSICS))
        mujoco.mj_getState(self.model, self.data, out, mujoco.mjtState.mjSTATE_PHYSICS)
        return out

    def _obs(self) -> dict:
        return {"images": self.render_images(), "state": self.state_vector(), "instruction": self.instruction}

    def render_images(self) -> dict[str, np.ndarray]:
        out = {}
        if self.cfg.cameras:
            r = self._renderer
            if r is None:
                r = self._renderer = _render.make_renderer(self.model, *self._hw)
            for cam in self.cfg.cameras:
                r.update_scene(self.data, camera=cam)
                out[cam] = r.render()
        if self.cfg.extra_view:  # TabletopConfig.extra_view: its own renderer at its own size
            name, cam, size = self.cfg.extra_view
            if self._extra_renderer is None:
                self._extra_renderer = _render.make_renderer(self.model, size, size)
            self._extra_renderer.update_scene(self.data, camera=cam)
            out[name] = self._extra_renderer.render()
        return out

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        if self._renderer is None:
            self._renderer = _render.make_renderer(self.model, *self._hw)
        self._renderer.update_scene(self.data, camera="agentview")
        return self._renderer.render()

    def expert_action(self, rng: np.random.Generator | None = None, noise: float = 0.0) -> np.ndarray:
        """The scripted expert's action for the current state (see :mod:`sims.tabletop.experts`)."""
        from .experts import expert_action

        return expert_action(self, noise=noise, rng=rng)

    def close(self) -> None:
        for k in ("_renderer", "_extra_renderer"):
            if getattr(self, k) is not None:
                getattr(self, k).close()
                setattr(self, k, None)


FAULTS = ("nan", "raise", "exit", "hang")


def _check_fault(fault) -> dict | None:
    if fault is None:
        return None
    if not isinstance(fault, dict) or fault.get("kind") not in FAULTS or not isinstance(fault.get("step", 1), int):
        raise ValueError(f"options['fault'] must be {{'kind': one of {FAULTS}, 'step': int >= 1}}, got {fault!r}")
    return {"kind": fault["kind"], "step": int(fault.get("step", 1))}


def _fire(kind: str, d) -> None:
    if kind == "nan":
        d.qvel[:] = np.nan  # MuJoCo's check on the next mj_step raises the BADQVEL warning and resets the data
    elif kind == "raise":
        raise RuntimeError("injected fault: env.step raised (options['fault'])")
    elif kind == "exit":
        os._exit(17)
    elif kind == "hang":
        time.sleep(3600)



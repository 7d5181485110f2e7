"""robosuite 1.5 tasks (shipped assets, Panda arm) behind the ``sims`` observation/action conventions.

``sims.make("robosuite/Lift", image_size=64, cameras=("agentview",), max_steps=200)``.

Action: ``float32[7] = [dx, dy, dz, dax, day, daz, g]`` in [-1, 1], robosuite's OSC_POSE controller
(delta end-effector pose): 1.0 is 5 cm of translation / 0.5 rad of rotation per control step (the
controller's ``output_max``); ``g`` = +1 closes the gripper, -1 opens it. Door uses the same.

Observation: ``{"images": {"agentview"|"wrist": uint8[H, W, 3]} (upright; "wrist" is robosuite's
robot0_eye_in_hand), "state": float32[9 (+K)] (eef xyz, eef quaternion xyzw, two gripper finger
joints; + robosuite's ``object-state`` with object_state=True), "instruction": str}``.

Success: the env's own ``_check_success()``; reward sparse 1.0 on success (``reward="dense"``:
robosuite's shaped reward, which is not the same scale as the built-in progress). ``terminated`` on
success, ``truncated`` after ``max_steps``; ``info`` has ``success``, ``progress`` (robosuite's shaped
reward normalised to [0, 1] where the task defines one, else success), ``failed`` (the simulation
diverged: MuJoCo's bad qacc/qvel/qpos warnings or a non-finite state; then also ``diverged`` and ``error``).

``reset(seed, options={"init_seed": s})``: robosuite's placement samplers and joint-noise draws share
the env's generator, which is reseeded from ``s`` in place, so one ``init_seed`` gives one initial state.
Scripted experts (``env.expert_action(rng, noise)``, what ``vla_rl.demos`` records SFT demos with) for Lift and
Stack: stateless feedback controllers on the simulator state (object poses, end-effector site, finger contacts).
Other tasks raise NotImplementedError. Measured (no cameras, init seeds 0..49, 200-step limit): Lift 50/50 (mean
40.1 steps), 50/50 with noise=0.2 (51.0 steps); Stack 50/50 (102.6 steps), 29/50 with noise=0.2.
"""

from __future__ import annotations

import contextlib
import io
import logging
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from . import render as _render
from .config import _image_hw, build, check_common, checked_action
from .robosuite_obs import CAMERA_NAMES, observation, own_gl_context, robot_state

TASKS: dict[str, tuple[str, ...]] = {
    "Lift": ("lift the red cube", "pick up the red block and lift it", "raise the red cube off the table"),
    "Stack": ("stack the red cube on the green cube", "put the red block on top of the green block"),
    "PickPlaceCan": ("pick up the can and place it in its bin", "put the can into the matching bin"),
    "PickPlaceMilk": ("pick up the milk carton and place it in its bin",),
    "PickPlaceBread": ("pick up the bread and place it in its bin",),
    "PickPlaceCereal": ("pick up the cereal box and place it in its bin",),
    "Door": ("open the door", "pull the door open by its handle"),
    "NutAssembly": ("fit the square nut on the square peg and the round nut on the round peg",),
    "NutAssemblySquare": ("fit the square nut on the square peg", "put the square nut onto the square peg"),
    "NutAssemblyRound": ("fit the round nut on the round peg", "put the round nut onto the round peg"),
}


@dataclass(frozen=True)
class RobosuiteConfig:
    """image_size: int or (H, W); cameras: from ("agentview", "wrist"), () for no rendering at all
    (much faster); max_steps: horizon in control steps; control_freq: Hz; robot: robosuite robot name;
    object_state / action_out_of_bounds / reward: as in :class:`sims.config.TabletopConfig`."""

    image_size: Any = 64
    cameras: tuple[str, ...] = ("agentview",)
    max_steps: int = 200
    control_freq: float = 20.0
    robot: str = "Panda"
    object_state: bool = False
    action_out_of_bounds: str = "clip"
    reward: str = "sparse"

    def __post_init__(self) -> None:
        check_common(self)
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be an int >= 1, got {self.max_steps!r}")
        if not (isinstance(self.control_freq, (int, float)) and 0 < self.control_freq <= 500):
            raise ValueError(f"control_freq must be in (0, 500] Hz, got {self.control_freq!r}")
        if self.reward not in ("sparse", "dense"):
            raise ValueError(f"reward must be 'sparse' or 'dense', got {self.reward!r}")


def _import_robosuite():
    _render.select_backend()
    logging.getLogger("robosuite_logs").setLevel(logging.ERROR)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import robosuite
    for name in ("robosuite_logs", "robosuite"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return robosuite


class RobosuiteEnv(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, task: str, config: RobosuiteConfig | None = None, **kw: Any):
        if task not in TASKS:
            raise ValueError(f"unknown robosuite task {task!r}; supported: {sorted(TASKS)}")
        if config is not None and kw:
            raise TypeError(f"pass either config= or keyword options, not both (got {sorted(kw)})")
        self.cfg = config if config is not None else build(RobosuiteConfig, kw)
        suite = _import_robosuite()
        from robosuite.controllers import load_composite_controller_config

        h, w = _image_hw(self.cfg.image_size)
        cams = [CAMERA_NAMES[c] for c in self.cfg.cameras]
        if cams:
            _render.select_backend()
            if _render._status["error"] is not None:
                raise _render.RenderingUnavailable(_render._status["error"])
        self.task_name = task
        self.max_steps = self.cfg.max_steps
        self._env = suite.make(
            task, robots=self.cfg.robot, controller_configs=load_composite_controller_config(controller="BASIC"),
            has_renderer=False, has_offscreen_renderer=bool(cams), use_camera_obs=bool(cams), use_object_obs=True,
            camera_names=cams or "agentview", camera_heights=h, camera_widths=w, control_freq=self.cfg.control_freq,
            horizon=self.cfg.max_steps + 1, ignore_done=True, hard_reset=False, reward_shaping=True, seed=0)
        lo, hi = self._env.action_spec
        self._act_dim = len(lo)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (self._act_dim,), np.float32)
        self._hw = (h, w)
        self.t, self.init_seed, self.instruction = 0, -1, TASKS[task][0]
        self._last: dict | None = None
        own_gl_context(self._env.sim)
        obs = self._env.reset()
        sd = len(self._state(obs))
        self.observation_space = gym.spaces.Dict({
            "images": gym.spaces.Dict({c: gym.spaces.Box(0, 255, (h, w, 3), np.uint8) for c in self.cfg.cameras}),
            "state": gym.spaces.Box(-np.inf, np.inf, (sd,), np.float32),
            "instruction": gym.spaces.Text(max_length=256, charset="abcdefghijklmnopqrstuvwxyz ,.'-"),
        })

    def _state(self, o: dict) -> np.ndarray:
        return robot_state(o, self.cfg.object_state)

    def _obs(self, o: dict) -> dict:
        return observation(o, self.cfg.cameras, self.instruction, self.cfg.object_state)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        task = options.pop("task", None)
        if task is not None and task not in (self.task_name, f"robosuite/{self.task_name}"):
            raise ValueError(f"this env runs robosuite/{self.task_name}; options['task']={task!r} needs another env")
        init_seed = options.pop("init_seed", None)
        if init_seed is None:
            init_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        idx = options.pop("instruction_idx", None)
        options.pop("group_id", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; valid: task, init_seed, instruction_idx, "
                             "group_id")
        self.init_seed = int(init_seed)
        rng = np.random.default_rng(self.init_seed)
        self._env.rng.bit_generator.state = np.random.default_rng(self.init_seed).bit_generator.state
        templates = TASKS[self.task_name]
        self.instruction = templates[(int(idx) if idx is not None else int(rng.integers(1 << 16))) % len(templates)]
        own_gl_context(self._env.sim)  # renders into the current GL context: make it this env's (robosuite_obs)
        o = self._env.reset()
        self._warn0 = self._bad_warnings()
        self.t = 0
        return self._obs(o), {"success": False, "progress": 0.0, "failed": False, "task": f"robosuite/{self.task_name}",
                              "init_seed": self.init_seed, "step": 0}

    def step(self, action):
        a = checked_action(action, self._act_dim, self.cfg.action_out_of_bounds)
        own_gl_context(self._env.sim)
        o, shaped, _, _ = self._env.step(a)
        self.t += 1
        d = self._env.sim.data
        # diverged: MuJoCo flagged bad qacc/qvel/qpos (it then resets the data itself) or non-finite state
        warn = self._bad_warnings()
        failed = warn > self._warn0 or not (np.isfinite(d.qacc).all() and np.isfinite(d.qpos).all())
        self._warn0 = warn
        success = (not failed) and bool(self._env._check_success())
        progress = 1.0 if success else (0.0 if failed else float(np.clip(shaped, 0.0, 1.0)))
        info = {"success": success, "progress": progress, "failed": failed, "task": f"robosuite/{self.task_name}",
                "init_seed": self.init_seed, "step": self.t}
        if failed:
            info["diverged"] = True
            info["error"] = "simulation diverged (MuJoCo bad qacc/qvel/qpos warning or non-finite state)"
        reward = float(shaped) if self.cfg.reward == "dense" else float(success)
        return self._obs(o), reward, success or failed, self.t >= self.max_steps, info

    # ---- scripted expert -------------------------------------------------------------------------
    def _eef(self) -> np.ndarray:
        """The end-effector site's position (what the ``robot0_eef_pos`` observable reads), from the simulator."""
        r = self._env.robots[0]
        return np.array(self._env.sim.data.site_xpos[r.eef_site_id[r.arms[0]]], dtype=np.float64)

    def expert_action(self, rng: np.random.Generator | None = None, noise: float = 0.0) -> np.ndarray:
        """The scripted expert's action for the current state (``float32[7]`` in [-1, 1]); Lift and Stack only.

        Stateless: the phase is read off the simulator each step, so it recovers from a slipped grasp. Pick
        (both tasks): hover 8 cm over the object with the gripper open (rising first when low and off-centre),
        turning the fingers onto its faces and pointing the gripper down; descend; close at grasp height; once
        both finger pads touch it (robosuite's ``_check_grasp``) it holds it. Lift: then lift. Stack: grasp cube
        A with the fingers across the direction of cube B (they would hit it otherwise), carry A 6 cm above B,
        lower it until it rests on B, open and back off. ``noise``: std of Gaussian noise added to the
        translation components (action units, drawn from ``rng``); success rates in the module docstring.
        """
        if self.task_name not in _EXPERTS:
            raise NotImplementedError(f"no scripted expert for robosuite/{self.task_name}; available: "
                                      f"{sorted(_EXPERTS)}")
        a = _EXPERTS[self.task_name](self)
        if noise > 0:
            rng = rng if rng is not None else np.random.default_rng()
            a[:3] += noise * rng.standard_normal(3)
        return np.clip(a, -1.0, 1.0).astype(np.float32)

    def _bad_warnings(self) -> int:
        import mujoco

        w = self._env.sim.data.warning
        return sum(int(w[int(k)].number) for k in (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQVEL,
                                                    mujoco.mjtWarning.mjWARN_BADQPOS))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._env.close()


def _move(eef: np.ndarray, target: np.ndarray, gain: float = 10.0) -> np.ndarray:
    """Translation action towards ``target``: 1.0 asks for 5 cm per step; ``gain`` x the error in m / 5 cm."""
    return np.clip(gain * (target - eef), -1.0, 1.0)


def _orient(env: "RobosuiteEnv", body_xmat: np.ndarray, avoid: np.ndarray | None = None) -> np.ndarray:
    """Rotation action (base frame axis-angle, 1.0 = 0.5 rad) that points the gripper down and turns its
    finger axis onto the nearest face normal of the object whose rotation matrix is ``body_xmat`` (yaw mod 90 deg);
    with ``avoid`` (an xy direction), onto the face normal most across it (the fingers then miss what lies there)."""
    e = env._env
    r = e.robots[0]
    rot = np.asarray(e.sim.data.site_xmat[r.eef_site_id[r.arms[0]]], dtype=np.float64).reshape(3, 3)
    tilt = np.cross(rot[:, 2], np.array([0.0, 0.0, -1.0]))  # axis * sin(angle) taking the approach axis to -z
    obj = np.asarray(body_xmat, dtype=np.float64).reshape(3, 3)
    face = np.arctan2(obj[1, 0], obj[0, 0])
    finger = np.arctan2(rot[1, 0], rot[0, 0])
    if avoid is None:
        yaw_err = (face - finger + np.pi / 4) % (np.pi / 2) - np.pi / 4
    else:
        away = np.arctan2(avoid[1], avoid[0])
        target = min((face, face + np.pi / 2), key=lambda f: abs(np.cos(f - away)))
        yaw_err = (target - finger + np.pi / 2) % np.pi - np.pi / 2
    return np.clip(np.array([tilt[0], tilt[1], yaw_err]) * 4.0, -1.0, 1.0)


def _pick(env: "RobosuiteEnv", body_id: int, geoms, avoid: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """Go for the object ``body_id`` (hover, turn to its faces, descend open, close at grasp height); returns the
    action and whether the gripper holds the object now (then the caller's action decides where it goes)."""
    e = env._env
    eef = env._eef()
    obj = np.array(e.sim.data.body_xpos[body_id], dtype=np.float64)
    a = np.zeros(7)
    a[3:6] = _orient(env, e.sim.data.body_xmat[body_id], avoid)
    off = obj - eef
    dxy = float(np.linalg.norm(off[:2]))
    near = dxy < 0.015 and abs(off[2]) < 0.02
    if near and e._check_grasp(gripper=e.robots[0].gripper, object_geoms=geoms):
        a[6] = 1.0
        return a, True
    if near and abs(off[2]) < 0.012:  # at grasp height: close
        a[:3] = _move(eef, obj) * 0.3
        a[6] = 1.0
    elif dxy < 0.012:  # above it: descend, open
        a[:3] = _move(eef, obj)
        a[6] = -1.0
    else:  # hover above it, open (rise first when low)
        hover = obj + np.array([0.0, 0.0, 0.08])
        if eef[2] < obj[2] + 0.04:
            hover[:2] = eef[:2]
        a[:3] = _move(eef, hover)
        a[6] = -1.0
    return a, False


def _lift_expert(env: "RobosuiteEnv") -> np.ndarray:
    e = env._env
    a, holding = _pick(env, e.cube_body_id, e.cube)
    if holding:  # lift
        eef = env._eef()
        cube = e.sim.data.body_xpos[e.cube_body_id]
        a[:3] = _move(eef, np.array([cube[0], cube[1], eef[2] + 0.05]))
    return a


def _stack_expert(env: "RobosuiteEnv") -> np.ndarray:
    """Pick cube A (red), carry it 5 cm above cube B (green), lower it onto B, open and back off."""
    e = env._env
    d = e.sim.data
    eef = env._eef()
    pa, pb = np.array(d.body_xpos[e.cubeA_body_id]), np.array(d.body_xpos[e.cubeB_body_id])
    ha, hb = float(e.cubeA.size[2]), float(e.cubeB.size[2])
    on_top = (np.linalg.norm(pa[:2] - pb[:2]) < 0.02 and pa[2] > pb[2] + ha + hb - 0.01
              and e.check_contact(e.cubeA, e.cubeB))
    if on_top:  # release and back off upwards
        a = np.zeros(7)
        a[2] = 0.5 if not e._check_grasp(gripper=e.robots[0].gripper, object_geoms=e.cubeA) else 0.0
        a[6] = -1.0
        return a
    a, holding = _pick(env, e.cubeA_body_id, e.cubeA, avoid=(pb - pa)[:2])
    if holding:
        a[3:6] = _orient(env, d.body_xmat[e.cubeB_body_id])
        grip = eef - pa  # keep the cube where it sits in the hand
        place = pb + np.array([0.0, 0.0, hb + ha - 0.01])  # aim 1 cm into B: it stops on contact
        if np.linalg.norm(pa[:2] - pb[:2]) > 0.008:
            carry = np.array([pb[0], pb[1], max(place[2] + 0.06, pa[2])])
            if pa[2] < place[2] + 0.04:  # rise first
                carry[:2] = pa[:2]
            a[:3] = _move(eef, carry + grip)
        else:
            a[:3] = _move(eef, place + grip) * 0.5
    return a


_EXPERTS = {"Lift": _lift_expert, "Stack": _stack_expert}


def make(task: str, **kw: Any) -> RobosuiteEnv:
    return RobosuiteEnv(task, **kw)


def available() -> bool:
    try:
        _import_robosuite()
        return True
    except Exception:  # noqa: BLE001
        return False


__all__ = ["RobosuiteEnv", "RobosuiteConfig", "TASKS", "make", "available"]

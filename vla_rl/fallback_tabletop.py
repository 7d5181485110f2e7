"""A minimal MuJoCo reach task with the ``sims`` API, used only while ``sims`` does not provide ``make``.

``sims`` (another package of this project) owns the real tabletop suite; this module exists so that
``vla_rl`` can be developed and tested against a real MuJoCo env when ``sims`` is absent or incomplete.
:func:`vla_rl.rollout.make_env` prefers ``sims.make`` and falls back here (with a warning).

``"tabletop/reach"``: a free-floating end effector above a table with a red and a blue ball; the
instruction names one ("reach the red ball"). Action ``[dx, dy, dz, gripper]`` in [-1, 1] moves the end
effector by ``0.03 * a[:3]`` m per step (kinematically). Observation: ``{"images": {"agentview": uint8[S,S,3]},
"state": [ee_xyz, gripper, red_xyz, blue_xyz] float32[10], "instruction": str}`` (object state, as
robosuite's ``object-state``; the instruction decides which ball is the goal). ``info``: ``success`` (end effector within 5 cm of the named ball), ``progress`` (1 - distance / initial
distance, clipped to [0, 1]), ``failed`` (touched the other ball). Rendering has shadows and multisampling off
(OSMesa renders a 64x64 frame in ~1 ms instead of ~40 ms).
"""

from __future__ import annotations

import os

import numpy as np

TASKS = ("tabletop/reach",)
COLORS = {"red": "1 0.1 0.1 1", "blue": "0.1 0.2 1 1"}

_XML = """
<mujoco>
  <visual><quality shadowsize="0" offsamples="0"/><global offwidth="256" offheight="256"/></visual>
  <worldbody>
    <light pos="0 0 2" dir="0 0 -1" castshadow="false" diffuse="0.8 0.8 0.8"/>
    <camera name="agentview" pos="0 -0.42 0.55" xyaxes="1 0 0 0 0.8 0.6"/>
    <geom type="plane" size="0.6 0.6 0.05" rgba="0.75 0.7 0.6 1"/>
    <body name="ee" pos="0 0 0.25"><joint name="ex" type="slide" axis="1 0 0"/><joint name="ey" type="slide" axis="0 1 0"/>
      <joint name="ez" type="slide" axis="0 0 1"/><geom type="box" size="0.03 0.03 0.03" rgba="0.15 0.15 0.15 1" contype="0" conaffinity="0"/></body>
    <body name="red" pos="0.1 0.1 0.03" mocap="true"><geom type="sphere" size="0.04" rgba="{red}" contype="0" conaffinity="0"/></body>
    <body name="blue" pos="-0.1 0.1 0.03" mocap="true"><geom type="sphere" size="0.04" rgba="{blue}" contype="0" conaffinity="0"/></body>
  </worldbody>
</mujoco>
"""


class ReachEnv:
    """See the module docstring. ``reset(seed, options={"init_seed": s})``: ``s`` fixes ball positions and target."""

    def __init__(self, image_size: int = 64, max_episode_steps: int = 40, step_size: float = 0.03):
        os.environ.setdefault("MUJOCO_GL", "osmesa")
        import gymnasium as gym
        import mujoco

        self._mj = mujoco
        self.model = mujoco.MjModel.from_xml_string(_XML.replace("{red}", COLORS["red"]).replace("{blue}", COLORS["blue"]))
        self.data = mujoco.MjData(self.model)
        self.renderer = mujoco.Renderer(self.model, image_size, image_size)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.max_episode_steps, self.step_size = max_episode_steps, step_size
        self.lo, self.hi = np.array([-0.25, -0.2, 0.03]), np.array([0.25, 0.25, 0.35])
        self.target, self.other = "red", "blue"
        self.t = 0
        self.gripper = 0.0
        self.d0 = 1.0

    def _pos(self, name: str) -> np.ndarray:
        return self.data.body(name).xpos.copy()

    def _obs(self) -> dict:
        self.renderer.update_scene(self.data, camera="agentview")
        ee = self.data.qpos[:3] + np.array([0, 0, 0.25])
        return {"images": {"agentview": self.renderer.render().copy()},
                "state": np.concatenate([ee, [self.gripper], self._pos("red"), self._pos("blue")]).astype(np.float32),
                "instruction": f"reach the {self.target} ball"}

    def _info(self) -> dict:
        d = float(np.linalg.norm(self._pos("ee") - self._pos(self.target)))
        d_other = float(np.linalg.norm(self._pos("ee") - self._pos(self.other)))
        return {"success": d < 0.05, "progress": float(np.clip(1 - d / self.d0, 0, 1)), "failed": d_other < 0.04, "distance": d}

    def reset(self, seed: int | None = None, options: dict | None = None):
        init_seed = (options or {}).get("init_seed", seed if seed is not None else 0)
        rng = np.random.default_rng(int(init_seed))
        self._mj.mj_resetData(self.model, self.data)
        while True:
            a, b = rng.uniform([-0.2, -0.1], [0.2, 0.2], size=(2, 2))
            if np.linalg.norm(a - b) > 0.12:
                break
        self.target, self.other = ("red", "blue") if rng.random() < 0.5 else ("blue", "red")
        self.data.mocap_pos[0] = [*a, 0.03]
        self.data.mocap_pos[1] = [*b, 0.03]
        self.data.qpos[:3] = rng.uniform([-0.05, -0.15, -0.02], [0.05, -0.1, 0.02])
        self.gripper, self.t = 0.0, 0
        self._mj.mj_forward(self.model, self.data)
        self.d0 = max(float(np.linalg.norm(self._pos("ee") - self._pos(self.target))), 1e-3)
        return self._obs(), self._info()

    def step(self, action):
        a = np.clip(np.asarray(action, dtype=np.float64), -1, 1)
        ee = np.clip(self.data.qpos[:3] + np.array([0, 0, 0.25]) + self.step_size * a[:3], self.lo, self.hi)
        self.data.qpos[:3] = ee - np.array([0, 0, 0.25])
        self.gripper = float(a[3])
        self._mj.mj_forward(self.model, self.data)
        self.t += 1
        info = self._info()
        return self._obs(), float(info["success"]), bool(info["success"] or info["failed"]), self.t >= self.max_episode_steps, info

    def expert_action(self, rng: np.random.Generator | None = None, noise: float = 0.3) -> np.ndarray:
        """Scripted expert: move straight to the named ball (plus a little noise)."""
        delta = (self._pos(self.target) - self._pos("ee")) / self.step_size
        a = np.clip(delta, -1, 1)
        if rng is not None:
            a = np.clip(a + noise * rng.standard_normal(3), -1, 1)
        return np.concatenate([a, [1.0]]).astype(np.float32)

    def close(self) -> None:
        self.renderer.close()


def make(name: str, **kwargs) -> ReachEnv:
    if name not in TASKS:
        raise ValueError(f"fallback tabletop has only {TASKS}, not {name!r}")
    return ReachEnv(**kwargs)

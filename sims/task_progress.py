"""Dense progress measures for robosuite Lift and LIBERO-Spatial, read from the simulator state.

The tabletop suite's ``info["progress"]`` is already a dense measure of the task (``sims/tabletop/tasks.py``).
robosuite's Lift reports its shaped reward (reaching and grasping only, no height term) and LIBERO reports success
only (``float(success)``), which cannot order failures. :class:`TaskProgress` wraps such an env and replaces
``info["progress"]`` with a measure of how far the episode got, from the simulator's own state (object and
end-effector positions, finger contacts); it is meant as a *test* quantity (e.g. ``bench/bench_progress.py``
correlates SRPO's learned progress with it), never as a training label.

**robosuite/Lift** (success: the cube's centre more than 4 cm above the table top, robosuite's ``_check_success``)::

    p = (reach + grasp + lift) / 3,   1 on success
    reach = 1 - tanh(10 d)            d: end-effector site to cube centre, m (robosuite's own reaching term)
    grasp = 1 if both finger pads touch the cube (robosuite's ``_check_grasp``) else 0
    lift  = clip((z - z0) / (z_table + 0.04 - z0), 0, 1)   z, z0: cube height now / at reset

**libero/libero_spatial/*** (every task: pick up a black bowl and place it on the plate; success: LIBERO's BDDL goal)::

    p = (reach + carry) / 2,          1 on success
    reach = 1 - tanh(10 d)            d: end-effector site to the bowl's centre, m
    carry = clip(1 - r / r0, 0, 1)    r, r0: horizontal distance of the bowl's centre to the plate's, now / at reset

Each term lies in [0, 1], so ``p`` does; the measure depends on the current state and the state at reset only.
Other tasks raise ``ValueError`` at construction.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

MEASURED = ("robosuite/Lift", "libero/libero_spatial/*")


def _lift_parts(env) -> dict[str, float]:
    """Cube height, end-effector-to-cube distance and grasp flag of a :class:`sims.robosuite_adapter.RobosuiteEnv`."""
    e = env._env
    cube = np.asarray(e.sim.data.body_xpos[e.cube_body_id], dtype=np.float64)
    grasp = e._check_grasp(gripper=e.robots[0].gripper, object_geoms=e.cube)
    return {"z": float(cube[2]), "d": float(np.linalg.norm(env._eef() - cube)), "grasp": float(bool(grasp)),
            "z_success": float(e.model.mujoco_arena.table_offset[2]) + 0.04}


def _bowl_parts(env) -> dict[str, float]:
    """Bowl-to-plate horizontal distance and end-effector-to-bowl distance of a LIBERO-Spatial env."""
    e = env._env.env
    d = e.sim.data
    robot = e.robots[0]
    eef = np.asarray(d.site_xpos[robot.eef_site_id[robot.arms[0]]], dtype=np.float64)
    bowl, plate = (e.objects_dict[n] for n in e.obj_of_interest)
    bc = np.asarray(d.body_xpos[e.sim.model.body_name2id(bowl.root_body)], dtype=np.float64)
    pc = np.asarray(d.body_xpos[e.sim.model.body_name2id(plate.root_body)], dtype=np.float64)
    return {"r": float(np.linalg.norm((bc - pc)[:2])), "d": float(np.linalg.norm(eef - bc))}


class TaskProgress(gym.Wrapper):
    """``info["progress"]`` := the module docstring's measure (``info["task_progress_terms"]``: its terms)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        from .libero_adapter import LiberoEnv
        from .robosuite_adapter import RobosuiteEnv

        u = env.unwrapped
        name = f"robosuite/{u.task_name}" if isinstance(u, RobosuiteEnv) else u.name if isinstance(u, LiberoEnv) \
            else type(u).__name__
        if name == "robosuite/Lift":
            self.kind = "lift"
        elif name.startswith("libero/libero_spatial/"):
            self.kind = "bowl"
        else:
            raise ValueError(f"no progress measure for {name!r}; measured: {', '.join(MEASURED)}")
        self._start: dict[str, float] = {}

    def _parts(self) -> dict[str, float]:
        return (_lift_parts if self.kind == "lift" else _bowl_parts)(self.env.unwrapped)

    def terms(self) -> dict[str, float]:
        """The measure's terms for the current state (``reach``, ``grasp`` / ``carry``, ``lift``)."""
        now = self._parts()
        reach = 1.0 - float(np.tanh(10.0 * now["d"]))
        if self.kind == "lift":
            span = max(now["z_success"] - self._start["z"], 1e-6)
            return {"reach": reach, "grasp": now["grasp"],
                    "lift": float(np.clip((now["z"] - self._start["z"]) / span, 0.0, 1.0))}
        return {"reach": reach, "carry": float(np.clip(1.0 - now["r"] / max(self._start["r"], 1e-6), 0.0, 1.0))}

    def progress(self, success: bool) -> float:
        """The measure now: 1 on success, else the mean of :meth:`terms`."""
        return 1.0 if success else float(np.mean(list(self.terms().values())))

    def reset(self, **kw: Any):
        obs, info = self.env.reset(**kw)
        self._start = self._parts()
        info = dict(info, progress=self.progress(bool(info.get("success", False))))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        if not info.get("failed", False):  # a diverged simulation keeps the env's 0
            info["task_progress_terms"] = self.terms()
            info["progress"] = self.progress(bool(info.get("success", False)))
        return obs, reward, terminated, truncated, info

    def expert_action(self, *a: Any, **kw: Any) -> np.ndarray:
        return self.env.unwrapped.expert_action(*a, **kw)

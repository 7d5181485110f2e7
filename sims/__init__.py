"""sims: MuJoCo simulators for VLA rollouts behind the gymnasium API (numpy only, no torch).

Quick start::

    import sims
    sims.list_tasks()                                   # tabletop/*, robosuite/*, libero/* (if installed)
    env = sims.make("tabletop/pick_place", image_size=128, cameras=("agentview", "wrist"))
    obs, info = env.reset(options={"init_seed": 3})     # same init_seed -> same initial state
    while True:
        obs, reward, terminated, truncated, info = env.step(sims.expert_action(env))
        if terminated or truncated:
            break
    info["success"], info["progress"]

Modules: :mod:`sims.tabletop` (the built-in suite: scene, tasks, experts, env), :mod:`sims.config`
(typed options), :mod:`sims.render` (headless GL backend choice), :mod:`sims.vector` (fault-tolerant
subprocess vector env, GRPO group options), :mod:`sims.demos` (robomimic-style HDF5 demos),
:mod:`sims.robosuite_adapter`, :mod:`sims.libero_adapter`, :mod:`sims.registry` (``make``).

Observation (every suite): ``{"images": {camera: uint8[H, W, 3]}, "state": float32[D],
"instruction": str}``; ``info``: ``success``, ``progress``, ``failed``. Actions are end-effector
deltas + gripper in [-1, 1] (tabletop: 4-d, robosuite / LIBERO: 7-d).
"""

from .config import TabletopConfig
from .demos import load_demos, load_transitions, record_demos, record_episode, write_hdf5
from .registry import EXPERT_TASKS, check_options, has_scripted_expert, list_tasks, make, register
from .render import RenderingUnavailable
from .robosuite_adapter import RobosuiteConfig
from .tabletop import ScriptedExpert, TabletopEnv, expert_action
from .vector import VectorEnv, group_options

__all__ = ["make", "list_tasks", "register", "check_options", "TabletopConfig", "RobosuiteConfig", "TabletopEnv",
           "ScriptedExpert",
           "expert_action", "VectorEnv", "group_options", "record_demos", "record_episode", "write_hdf5", "load_demos",
           "load_transitions", "RenderingUnavailable", "has_scripted_expert", "EXPERT_TASKS"]

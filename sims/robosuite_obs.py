"""The observation every robosuite-based sim returns (robosuite tasks and LIBERO, which is built on robosuite).

``observation(o, cameras, instruction, object_state)`` maps robosuite's raw observation dict ``o`` to the
``sims`` convention: ``{"images": {name: uint8[H, W, 3]} (upright: robosuite renders bottom-up), "state":
float32[9 (+K)], "instruction": str}``. ``state`` is the end-effector position (3), quaternion xyzw (4) and
the two gripper finger joints (2), plus robosuite's ``object-state`` (K) when ``object_state`` is true and
the task provides one.
"""
from __future__ import annotations

import numpy as np

CAMERA_NAMES = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}
"""``sims`` camera name -> robosuite camera name."""


def robot_state(o: dict, object_state: bool) -> np.ndarray:
    """float32[9 (+K)]: eef xyz, eef quaternion, gripper finger joints (+ ``object-state``)."""
    parts = [o["robot0_eef_pos"], o["robot0_eef_quat"], o["robot0_gripper_qpos"]]
    if object_state and "object-state" in o:
        parts.append(o["object-state"])
    return np.concatenate(parts).astype(np.float32)


def observation(o: dict, cameras, instruction: str, object_state: bool) -> dict:
    """The ``sims`` observation dict from robosuite's raw one (images flipped upright, contiguous)."""
    images = {c: np.ascontiguousarray(o[f"{CAMERA_NAMES[c]}_image"][::-1]) for c in cameras}
    return {"images": images, "state": robot_state(o, object_state), "instruction": instruction}


def own_gl_context(sim) -> None:
    """Make ``sim``'s own offscreen GL context current in this thread (no-op without cameras).

    robosuite (and LIBERO on it) renders its camera observations into whichever GL context is current
    (``MjRenderContext.render`` / ``read_pixels`` never call ``make_current``; only its constructor does). Another
    env's context, a ``mujoco.Renderer`` (the tabletop's), or a context freed since then (the tabletop env closed)
    leaves it rendering into that one: another scene's buffers, or garbage pixels -- different from process to
    process. Called before every reset and step that renders."""
    ctx = getattr(sim, "_render_context_offscreen", None)
    if ctx is not None:
        ctx.gl_ctx.make_current()

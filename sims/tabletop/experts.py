"""Scripted experts for the tabletop tasks: stateless feedback controllers (the action depends only on
the current simulator state, so the expert recovers from perturbations and can label any state).

``expert_action(env, noise=0.0, rng=None, target=None)`` -> ``float32[4]`` in [-1, 1]:

- reach: move the grip point to the named ball.
- push: go above a point 5 cm behind the block (on the goal line), descend with closed fingers, push
  along the line; lift and re-approach when the block drifts off the line.
- pick_place / stack: go above the block with open fingers, descend, close, lift once both fingers
  touch it, carry at 12 cm to above the bin / the other block, lower, open.

Data variety for RL (``noise`` and :class:`ScriptedExpert`):
``noise`` adds N(0, noise^2) to the motion components (0.1-0.3: near-success / slower successes);
``ScriptedExpert(wrong_object=True)`` solves the task for the *other* object (plausible failures);
``drop_prob`` opens the gripper at random while carrying (failures late in the episode).
"""

from __future__ import annotations

import numpy as np

from .scene import BIN_FLOOR, BLOCK_HALF
from .tasks import in_bin, on_top, released

CARRY_Z = 0.12  # m, grip height while carrying
HOVER = 0.06  # m, hover height above the block before descending


def _toward(env, p_des, gain: float = 1.0) -> np.ndarray:
    return np.clip(gain * (np.asarray(p_des, dtype=np.float64) - env.grip_pos()) / env.cfg.max_delta, -1.0, 1.0)


def _act(move: np.ndarray, grip: float) -> np.ndarray:
    return np.array([move[0], move[1], move[2], grip], dtype=np.float64)


def reach(env, target: int) -> np.ndarray:
    return _act(_toward(env, env.target_pos(target)), -1.0)


def push(env, target: int) -> np.ndarray:
    e = env.grip_pos()
    b = env.block_pos(target)
    g = env.layout.goal
    to_goal = g - b[:2]
    dist = float(np.hypot(*to_goal))
    if dist < 0.008:
        return _act(np.zeros(3), 1.0)
    u = to_goal / dist
    c = b[:2] - 0.05 * u  # behind the block
    rel = e[:2] - b[:2]
    along = float(rel @ u)
    lateral = rel - along * u
    lat = float(np.hypot(*lateral))
    if along < -0.03 and lat < 0.012 and e[2] < 0.035:
        # push: advance along the line, correct the lateral offset, slow down near the goal
        speed = min(1.0, 0.3 + dist / 0.05)
        move_xy = speed * u * env.cfg.max_delta - 0.8 * lateral
        return _act(np.clip(np.array([*move_xy, BLOCK_HALF - e[2]]) / env.cfg.max_delta, -1, 1), 1.0)
    if float(np.hypot(*(e[:2] - c))) < 0.012:
        return _act(_toward(env, [c[0], c[1], BLOCK_HALF]), 1.0)  # descend behind the block
    if e[2] < 0.07 and float(np.hypot(*rel)) < 0.09:
        return _act(_toward(env, [e[0], e[1], 0.09]), 1.0)  # lift clear of the block
    return _act(_toward(env, [c[0], c[1], 0.09]), 1.0)  # fly to above the approach point


def carry(env, target: int, goal_xy: np.ndarray, release_z: float, placed: bool) -> np.ndarray:
    """Pick block ``target`` and release it with the grip point at ``release_z`` above ``goal_xy``."""
    e = env.grip_pos()
    b = env.block_pos(target)
    if placed:  # let go and move up
        return _act(_toward(env, [e[0], e[1], min(e[2] + 0.05, CARRY_Z)]), -1.0)
    lo, hi = env.finger_opening()
    held = env.grasped(target)
    if held and (b[2] > BLOCK_HALF + 0.005 or min(lo, hi) < BLOCK_HALF + 0.002):
        off = float(np.hypot(*(b[:2] - goal_xy)))
        # carry: block centre over the goal (the grip point may sit off the block centre)
        grip_goal = goal_xy + (e[:2] - b[:2])
        if off > 0.012:
            if e[2] < CARRY_Z - 0.04 and off > 0.05:
                return _act(_toward(env, [e[0], e[1], CARRY_Z]), 1.0)  # lift first
            return _act(_toward(env, [grip_goal[0], grip_goal[1], CARRY_Z], gain=1.2), 1.0)
        z_goal = release_z + (e[2] - b[2])
        if e[2] - z_goal > 0.004:
            return _act(_toward(env, [grip_goal[0], grip_goal[1], z_goal]), 1.0)  # lower
        return _act(np.zeros(3), -1.0)  # release
    # not holding: go above the block, descend with open fingers, close
    dxy = float(np.hypot(*(e[:2] - b[:2])))
    opened = min(lo, hi) > BLOCK_HALF + 0.006
    if dxy > 0.008:
        if e[2] < b[2] + 0.03 and dxy < 0.06:
            return _act(_toward(env, [e[0], e[1], b[2] + HOVER]), -1.0)
        return _act(_toward(env, [b[0], b[1], max(b[2] + HOVER, 0.08 if dxy > 0.06 else 0.0)], gain=1.2), -1.0)
    if e[2] > b[2] + 0.004:
        if not opened:
            return _act(_toward(env, [b[0], b[1], e[2]]), -1.0)  # open before descending
        return _act(_toward(env, [b[0], b[1], b[2]]), -1.0)
    return _act(_toward(env, [b[0], b[1], b[2]]), 1.0)  # close


def pick_place(env, target: int) -> np.ndarray:
    placed = in_bin(env, target) and not env.grasped(target)
    return carry(env, target, env.layout.bin, BIN_FLOOR + BLOCK_HALF + 0.03, placed)


def stack(env, target: int, other: int | None = None) -> np.ndarray:
    other = env.layout.other if other is None else other
    placed = on_top(env, target, other) and (released(env) or env._grip_cmd < 0)
    bottom = env.block_pos(other)
    return carry(env, target, bottom[:2].copy(), bottom[2] + 2 * BLOCK_HALF + 0.003, placed)


_EXPERTS = {"reach": reach, "reach_one": reach, "push": push, "pick_place": pick_place, "stack": stack}


def expert_action(env, noise: float = 0.0, rng: np.random.Generator | None = None,
                  target: int | None = None) -> np.ndarray:
    """The expert action ``float32[4]`` for ``env`` (a TabletopEnv after reset); ``target`` overrides the
    object slot the expert works on (default: the one the instruction names)."""
    env = getattr(env, "unwrapped", env)
    if env.layout is None:
        raise RuntimeError("the expert needs a reset env")
    t = env.layout.target if target is None else target
    if env.task.name == "stack" and target is not None and target != env.layout.target:
        a = stack(env, t, other=env.layout.target)
    else:
        a = _EXPERTS[env.task.name](env, t)
    if noise > 0:
        rng = rng if rng is not None else np.random.default_rng()
        a[:3] = np.clip(a[:3] + noise * rng.standard_normal(3), -1.0, 1.0)
    return a.astype(np.float32)


class ScriptedExpert:
    """A per-episode expert with failure options; ``act(env)`` -> float32[4].

    noise: std of Gaussian noise on the motion components. wrong_object: work on another object than
    the instruction names. drop_prob: per-step probability of opening the gripper while the fingers
    are closed (carrying). seed: RNG seed of the noise."""

    def __init__(self, noise: float = 0.0, wrong_object: bool = False, drop_prob: float = 0.0, seed: int | None = None):
        if noise < 0 or not 0 <= drop_prob <= 1:
            raise ValueError(f"noise must be >= 0 and drop_prob in [0, 1], got noise={noise!r}, "
                             f"drop_prob={drop_prob!r}")
        self.noise, self.wrong_object, self.drop_prob = float(noise), bool(wrong_object), float(drop_prob)
        self.rng = np.random.default_rng(seed)

    def act(self, env) -> np.ndarray:
        env = getattr(env, "unwrapped", env)
        target = None
        if self.wrong_object:
            n = env.task.n_targets or env.task.n_blocks
            target = (env.layout.target + 1) % n
        a = expert_action(env, self.noise, self.rng, target)
        if self.drop_prob > 0 and a[3] > 0 and self.rng.random() < self.drop_prob:
            a[3] = -1.0
        return a

    __call__ = act

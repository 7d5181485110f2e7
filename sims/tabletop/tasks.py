"""The four tabletop tasks: initial-state sampling, instructions, success tests and progress measures.

Each task is a :class:`Task` of plain functions over a :class:`~sims.tabletop.env.TabletopEnv` (read
through its accessors ``grip_pos()``, ``block_pos(i)``, ``finger_opening()``, ``layout``):

=============  ==========================================================  =============================
task           success (checked after every step)                          progress (diagnostic, [0, 1])
=============  ==========================================================  =============================
reach          grip point within 3 cm of the named ball                    1 - distance / initial distance
reach_one      reach with a single ball (the easiest task: no distractors)  as reach
push           named block centre within 3 cm (xy) of the white disc,      0.2 approach + 0.8 block-to-
               block resting on the table                                  goal distance reduction
pick_place     named block inside the bin (xy within the walls, below     reach, grasp, lift, transport
               the rim) and the gripper open                               stages
stack          named block resting on the other (xy within 2 cm,          reach, grasp, lift, transport
               height 4 +- 0.6 cm above it), other block on the table,    stages
               gripper open
=============  ==========================================================  =============================

Randomization (from the episode's ``init_seed`` only): gripper start, object positions (with minimum
separations), which colours the objects get and which one the instruction names, and the paraphrase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .scene import BIN_FLOOR, BIN_INNER, BIN_WALL_H, BLOCK_HALF, COLORS

COLOR_NAMES = tuple(COLORS)
RELEASED = BLOCK_HALF + 0.004  # finger opening (m) above which the gripper does not hold a block


@dataclass
class Layout:
    """One episode's sampled initial state (everything the instruction and the tests need)."""

    hand: np.ndarray  # [3] m, grip point start
    colors: tuple[str, ...]  # colour name per object slot (blocks, or reach balls)
    target: int  # slot named by the instruction (reach ball or block)
    other: int = -1  # stack: the block to stack on
    objects: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))  # [n, 3] block / ball positions
    goal: np.ndarray | None = None  # [2] push goal xy
    bin: np.ndarray | None = None  # [2] bin centre xy
    instruction_idx: int = 0


@dataclass(frozen=True)
class Task:
    name: str
    n_blocks: int
    n_targets: int
    goal: bool
    bin: bool
    max_steps: int
    templates: tuple[str, ...]
    sample: Callable[[np.random.Generator], Layout]
    success: Callable[..., bool]
    progress: Callable[..., float]
    both: Callable[..., tuple[bool, float]] | None = None  # (success, progress) in one pass (the step path)

    def evaluate(self, env) -> tuple[bool, float]:
        """``(success, progress)`` of the current state; progress is 1.0 exactly when successful."""
        if self.both is not None:
            return self.both(env)
        if self.success(env):
            return True, 1.0
        return False, float(self.progress(env))

    def instruction(self, layout: Layout) -> str:
        t = self.templates[layout.instruction_idx % len(self.templates)]
        other = layout.colors[layout.other] if layout.other >= 0 else ""
        return t.format(c=layout.colors[layout.target], o=other)


def _points(rng: np.random.Generator, n: int, lo, hi, min_dist: float, avoid=(), tries: int = 1000) -> np.ndarray:
    """``n`` xy points uniform in the box [lo, hi] at least ``min_dist`` apart (and from ``avoid``)."""
    # the same draws as ``rng.uniform(lo, hi)`` (numpy computes lo + (hi - lo) * u), in plain floats
    x0, y0 = float(lo[0]), float(lo[1])
    rx, ry = float(hi[0]) - x0, float(hi[1]) - y0
    pts: list[tuple[float, float]] = []
    others = [(float(q[0]), float(q[1])) for q in avoid]
    for _ in range(tries):
        u, v = rng.random(2).tolist()
        x, y = x0 + rx * u, y0 + ry * v
        if all(math.hypot(x - qx, y - qy) >= min_dist for qx, qy in (*pts, *others)):
            pts.append((x, y))
            if len(pts) == n:
                return np.array(pts)
    raise RuntimeError(f"could not place {n} points {min_dist} m apart in {lo}..{hi}")


def _hand_start(rng: np.random.Generator) -> np.ndarray:
    # the same draws as three ``rng.uniform(lo, hi)`` calls (lo + (hi - lo) * u), in one call
    u, v, w = rng.random(3).tolist()
    return np.array([-0.08 + (0.08 - -0.08) * u, -0.16 + (-0.08 - -0.16) * v, 0.14 + (0.2 - 0.14) * w])


def _colors(rng: np.random.Generator, n: int) -> tuple[str, ...]:
    return tuple(COLOR_NAMES[i] for i in rng.permutation(len(COLOR_NAMES))[:n])


def _clip01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else float(x)


def _dist(a, b) -> float:
    return math.dist(a.tolist() if isinstance(a, np.ndarray) else a, b.tolist() if isinstance(b, np.ndarray) else b)


# ---------------------------------------------------------------------------------------------- reach
def _sample_reach(rng):
    hand = _hand_start(rng)
    xy = _points(rng, 3, [-0.2, -0.1], [0.2, 0.18], 0.09, avoid=[hand[:2]])
    z = rng.uniform(0.04, 0.18, size=(3, 1))
    return Layout(hand=hand, colors=_colors(rng, 3), target=int(rng.integers(3)), objects=np.hstack([xy, z]),
                  instruction_idx=int(rng.integers(1 << 16)))


def _sample_reach_one(rng):
    """reach with one ball (same workspace, heights, start and tolerance; no distractor to tell apart)."""
    hand = _hand_start(rng)
    xy = _points(rng, 1, [-0.2, -0.1], [0.2, 0.18], 0.09, avoid=[hand[:2]])
    z = rng.uniform(0.04, 0.18, size=(1, 1))
    return Layout(hand=hand, colors=_colors(rng, 1), target=0, objects=np.hstack([xy, z]),
                  instruction_idx=int(rng.integers(1 << 16)))


def _reach_success(env) -> bool:
    return _reach_both(env)[0]


def _reach_progress(env) -> float:
    return _clip01(1.0 - _dist(env.grip_pos(), env.target_pos(env.layout.target)) / env.d0)


def _reach_both(env) -> tuple[bool, float]:
    d = _dist(env.grip_pos(), env.target_pos(env.layout.target))
    if d < 0.03:
        return True, 1.0
    return False, _clip01(1.0 - d / env.d0)


# ----------------------------------------------------------------------------------------------- push
def _sample_push(rng):
    hand = _hand_start(rng)
    for _ in range(1000):
        blocks = _points(rng, 2, [-0.15, -0.05], [0.15, 0.15], 0.1)
        target = int(rng.integers(2))
        ang = rng.uniform(0, 2 * np.pi)
        dist = rng.uniform(0.1, 0.18)
        goal = blocks[target] + dist * np.array([np.cos(ang), np.sin(ang)])
        if not (-0.2 <= goal[0] <= 0.2 and -0.1 <= goal[1] <= 0.2):
            continue
        # the other block must stay clear of the pushing corridor (block path plus the approach behind it)
        a, b = blocks[target] - 0.07 * (goal - blocks[target]) / dist, goal
        o = blocks[1 - target]
        t = np.clip(np.dot(o - a, b - a) / np.dot(b - a, b - a), 0, 1)
        if np.linalg.norm(o - (a + t * (b - a))) < 0.1:
            continue
        return Layout(hand=hand, colors=_colors(rng, 2), target=target, goal=goal,
                      objects=np.hstack([blocks, np.full((2, 1), BLOCK_HALF)]),
                      instruction_idx=int(rng.integers(1 << 16)))
    raise RuntimeError("could not sample a push layout")


def _push_success(env) -> bool:
    return _push_both(env)[0]


def _push_progress(env) -> float:
    return _push_both(env)[1]


def _push_both(env) -> tuple[bool, float]:
    px, py, pz = env.block_pos(env.layout.target).tolist()
    gx, gy = env.layout.goal.tolist()
    dist = math.hypot(gx - px, gy - py)
    if dist < 0.03 and pz < BLOCK_HALF + 0.01:
        return True, 1.0
    return False, _push_shaping(env, px, py, gx, gy, dist)


def _push_shaping(env, px: float, py: float, gx: float, gy: float, dist: float) -> float:
    inv = 1.0 / max(dist, 1e-6)
    behind = (px - 0.05 * (gx - px) * inv, py - 0.05 * (gy - py) * inv, BLOCK_HALF)
    approach = _clip01(1.0 - math.dist(env.grip_pos().tolist(), behind) / env.a0)
    return 0.2 * approach + 0.8 * _clip01(1.0 - dist / env.d0)


# ----------------------------------------------------------------------------------- pick / place / stack
def _sample_pick_place(rng):
    hand = _hand_start(rng)
    for _ in range(1000):
        bin_xy = rng.uniform([-0.15, 0.05], [0.15, 0.15])
        blocks = _points(rng, 2, [-0.18, -0.1], [0.18, 0.12], 0.08)
        # blocks clear of the bin, with room for the open fingers (4.7 cm either side) outside its walls
        if all(np.max(np.abs(b - bin_xy)) > BIN_INNER + 0.075 for b in blocks):
            return Layout(hand=hand, colors=_colors(rng, 2), target=int(rng.integers(2)), bin=bin_xy,
                          objects=np.hstack([blocks, np.full((2, 1), BLOCK_HALF)]),
                          instruction_idx=int(rng.integers(1 << 16)))
    raise RuntimeError("could not sample a pick_place layout")


def _sample_stack(rng):
    hand = _hand_start(rng)
    blocks = _points(rng, 2, [-0.16, -0.08], [0.16, 0.14], 0.1)
    target = int(rng.integers(2))
    return Layout(hand=hand, colors=_colors(rng, 2), target=target, other=1 - target,
                  objects=np.hstack([blocks, np.full((2, 1), BLOCK_HALF)]), instruction_idx=int(rng.integers(1 << 16)))


def in_bin(env, i: int) -> bool:
    x, y, z = env.block_pos(i).tolist()
    cx, cy = env.layout.bin.tolist()
    return abs(x - cx) < BIN_INNER - 0.005 and abs(y - cy) < BIN_INNER - 0.005 and z < BIN_FLOOR + BIN_WALL_H + 0.005


def released(env) -> bool:
    lo, hi = env.finger_opening()
    return lo > RELEASED and hi > RELEASED


def _pick_place_success(env) -> bool:
    return in_bin(env, env.layout.target) and released(env)


def on_top(env, top: int, bottom: int) -> bool:
    a, b = env.block_pos(top).tolist(), env.block_pos(bottom).tolist()
    return (math.hypot(a[0] - b[0], a[1] - b[1]) < 0.02 and abs(a[2] - b[2] - 2 * BLOCK_HALF) < 0.006
            and b[2] < BLOCK_HALF + 0.005)


def _stack_success(env) -> bool:
    return on_top(env, env.layout.target, env.layout.other) and released(env)


def _carry_progress(env, goal_xy: np.ndarray, placed: bool, done: bool) -> float:
    """Stages: 0.2 reach the block, 0.2 grasp, 0.1 lift, 0.4 carry over the goal, 0.1 release; 1 on success."""
    if done:
        return 1.0
    if placed:
        return 0.9
    i = env.layout.target
    p = env.block_pos(i).tolist()
    reach = _clip01(1.0 - math.dist(env.grip_pos().tolist(), p) / env.a0)
    held = env.grasped(i)
    lift = _clip01((p[2] - BLOCK_HALF) / 0.04) if held else 0.0
    if held and p[2] > BLOCK_HALF + 0.01:
        gx, gy = goal_xy.tolist()
        carry = _clip01(1.0 - math.hypot(p[0] - gx, p[1] - gy) / env.d0)
    else:
        carry = 0.0
    return 0.2 * reach + 0.2 * float(held) + 0.1 * lift + 0.4 * carry


def _pick_place_progress(env) -> float:
    return _pick_place_both(env)[1]


def _pick_place_both(env) -> tuple[bool, float]:
    placed = in_bin(env, env.layout.target)
    done = placed and released(env)
    return done, _carry_progress(env, env.layout.bin, placed, done)


def _stack_progress(env) -> float:
    return _stack_both(env)[1]


def _stack_both(env) -> tuple[bool, float]:
    lay = env.layout
    placed = on_top(env, lay.target, lay.other)
    done = placed and released(env)
    return done, _carry_progress(env, env.block_pos(lay.other)[:2], placed, done)


TASKS: dict[str, Task] = {
    "reach": Task("reach", 0, 3, False, False, 40, (
        "reach the {c} ball", "move the gripper to the {c} sphere", "touch the {c} ball with the gripper",
        "go to the {c} sphere", "put the gripper on the {c} ball"), _sample_reach, _reach_success, _reach_progress,
                  _reach_both),
    "reach_one": Task("reach_one", 0, 1, False, False, 40, (
        "reach the {c} ball", "move the gripper to the {c} sphere", "touch the {c} ball with the gripper",
        "go to the {c} sphere", "put the gripper on the {c} ball"), _sample_reach_one, _reach_success, _reach_progress,
        _reach_both),
    "push": Task("push", 2, 0, True, False, 100, (
        "push the {c} block onto the white disc", "slide the {c} cube to the white target",
        "push the {c} cube to the white circle", "move the {c} block to the white disc by pushing it"),
        _sample_push, _push_success, _push_progress, _push_both),
    "pick_place": Task("pick_place", 2, 0, False, True, 100, (
        "put the {c} block in the bin", "pick up the {c} cube and place it in the bin",
        "place the {c} block into the brown box", "move the {c} cube into the bin"),
        _sample_pick_place, _pick_place_success, _pick_place_progress, _pick_place_both),
    "stack": Task("stack", 2, 0, False, False, 100, (
        "stack the {c} block on the {o} block", "put the {c} cube on top of the {o} cube",
        "place the {c} block onto the {o} one", "pick up the {c} cube and stack it on the {o} cube"),
        _sample_stack, _stack_success, _stack_progress, _stack_both),
}


def initial_scales(env) -> tuple[float, float]:
    """(a0, d0): the initial gripper-to-object distance and object-to-goal distance (m) that normalize progress."""
    lay, name = env.layout, env.task.name
    if name in ("reach", "reach_one"):
        d = _dist(env.grip_pos(), env.target_pos(lay.target))
        return max(d, 1e-3), max(d, 1e-3)
    p = env.block_pos(lay.target)
    a0 = max(_dist(env.grip_pos(), p), 1e-3)
    goal = {"push": lambda: lay.goal, "pick_place": lambda: lay.bin,
            "stack": lambda: env.block_pos(lay.other)[:2]}[name]()
    return a0, max(float(np.hypot(*(p[:2] - goal))), 1e-3)

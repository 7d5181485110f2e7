"""Generated MJCF of the tabletop scene: a table, a two-finger gripper, blocks, targets, a goal, a bin.

Frame: metres, z up, table top at z = 0, the robot looks along +y from the front (agentview camera at
y = -0.62). Workspace of the gripper: x, y in [-0.3, 0.3], z in [0.01, 0.35].

Gripper ("hand" body): three slide joints (x, y, z) driven by position actuators (gravity compensated),
so ``qpos[0:3]`` is the grip point (between the fingertips, 1.5 cm above their bottom) in world
coordinates. Two fingers slide along +-y (joint value = opening of one finger in metres, 0 = closed,
``FINGER_OPEN`` = fully open); their position actuators have a force limit, so a grasp holds the block
by contact friction (no weld). Blocks are 4 cm cubes (``BLOCK_HALF``) on free joints; targets, the goal
disc and the bin are mocap bodies (moved at reset without joints).
"""

from __future__ import annotations

BLOCK_HALF = 0.02  # m, half edge of a block
FINGER_OPEN = 0.04  # m, finger travel (each side)
TARGET_RADIUS = 0.025  # m, reach targets (visual only)
GOAL_RADIUS = 0.04  # m, push goal disc (visual only)
BIN_INNER = 0.065  # m, half inner width of the bin
BIN_WALL_H = 0.035  # m, wall height above the bin floor
BIN_FLOOR = 0.006  # m, floor thickness
HAND_RANGE = ((-0.3, 0.3), (-0.3, 0.3), (0.01, 0.35))

COLORS = {
    "red": (0.85, 0.12, 0.1),
    "green": (0.15, 0.7, 0.2),
    "blue": (0.12, 0.3, 0.9),
    "yellow": (0.92, 0.8, 0.1),
}


def _gripper() -> str:
    (x0, x1), (y0, y1), (z0, z1) = HAND_RANGE
    fo = FINGER_OPEN
    return f"""
    <body name="hand" pos="0 0 0" gravcomp="1">
      <joint name="hand_x" type="slide" axis="1 0 0" range="{x0} {x1}" damping="120" armature="0.1"/>
      <joint name="hand_y" type="slide" axis="0 1 0" range="{y0} {y1}" damping="120" armature="0.1"/>
      <joint name="hand_z" type="slide" axis="0 0 1" range="{z0} {z1}" damping="120" armature="0.1"/>
      <site name="grip" pos="0 0 0" size="0.004" rgba="1 0 1 0"/>
      <geom name="palm" type="box" pos="0 0 0.043" size="0.015 0.055 0.008" mass="0.8" rgba="0.25 0.25 0.28 1"/>
      <geom name="wrist" type="cylinder" pos="0 0 0.08" size="0.012 0.03" mass="0.1" rgba="0.4 0.4 0.45 1" contype="0" conaffinity="0"/>
      <camera name="wrist" pos="0 0 0.032" xyaxes="1 0 0 0 0.966 0.259" fovy="80"/>
      <body name="finger_l" pos="0 0.007 0" gravcomp="1">
        <joint name="finger_l" type="slide" axis="0 1 0" range="0 {fo}" damping="10" armature="0.01" solreflimit="0.004 1"/>
        <geom name="finger_l" type="box" pos="0 0 0.01" size="0.01 0.006 0.025" mass="0.05" friction="1.5 0.02 0.001"
              condim="4" rgba="0.15 0.15 0.15 1"/>
      </body>
      <body name="finger_r" pos="0 -0.007 0" gravcomp="1">
        <joint name="finger_r" type="slide" axis="0 -1 0" range="0 {fo}" damping="10" armature="0.01" solreflimit="0.004 1"/>
        <geom name="finger_r" type="box" pos="0 0 0.01" size="0.01 0.006 0.025" mass="0.05" friction="1.5 0.02 0.001"
              condim="4" rgba="0.15 0.15 0.15 1"/>
      </body>
    </body>"""  # noqa: E501  (MJCF: one element per line)


def _bin() -> str:
    w, h, f = BIN_INNER, BIN_WALL_H, BIN_FLOOR
    t = 0.005  # wall half thickness
    c = "0.45 0.32 0.2 1"
    walls = [(w + t, 0, t, w + 2 * t), (-(w + t), 0, t, w + 2 * t), (0, w + t, w + 2 * t, t),
             (0, -(w + t), w + 2 * t, t)]
    geoms = "\n".join(f'      <geom type="box" pos="{x:g} {y:g} {f + h / 2:g}" size="{sx:g} {sy:g} {h / 2:g}" '
                      f'rgba="{c}"/>'
                      for x, y, sx, sy in walls)
    return f"""
    <body name="bin" mocap="true" pos="0.15 0.1 0">
      <geom name="bin_floor" type="box" pos="0 0 {f / 2:g}" size="{w + 2 * t:g} {w + 2 * t:g} {f / 2:g}" rgba="{c}"/>
{geoms}
    </body>"""


def scene_xml(n_blocks: int = 0, n_targets: int = 0, goal: bool = False, bin: bool = False,
              image_hw: tuple[int, int] = (64, 64), timestep: float = 0.005) -> str:
    """MJCF string of the scene with ``n_blocks`` blocks (``block{i}``), ``n_targets`` reach targets
    (``target{i}``), an optional push goal disc (``goal``) and bin (``bin``). Colours are set at reset."""
    h, w = image_hw
    bh = BLOCK_HALF
    blocks = "\n".join(f"""
    <body name="block{i}" pos="{-0.1 + 0.1 * i:g} 0.05 {bh}">
      <freejoint name="block{i}"/>
      <geom name="block{i}" type="box" size="{bh} {bh} {bh}" mass="0.06" friction="1.0 0.02 0.001" condim="4" rgba="0.5 0.5 0.5 1"/>
    </body>""" for i in range(n_blocks))  # noqa: E501  (MJCF: one element per line)
    targets = "\n".join(f"""
    <body name="target{i}" mocap="true" pos="{-0.1 + 0.1 * i:g} 0.1 0.1">
      <geom name="target{i}" type="sphere" size="{TARGET_RADIUS}" contype="0" conaffinity="0" rgba="0.5 0.5 0.5 1"/>
    </body>""" for i in range(n_targets))
    goal_xml = f"""
    <body name="goal" mocap="true" pos="0 0.1 0">
      <geom name="goal" type="cylinder" size="{GOAL_RADIUS} 0.001" contype="0" conaffinity="0" rgba="0.95 0.95 0.95 1"/>
    </body>""" if goal else ""
    return f"""<mujoco model="branchloop_tabletop">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{timestep}" integrator="implicitfast" cone="elliptic" impratio="5"/>
  <visual>
    <quality shadowsize="0" offsamples="0"/>
    <global offwidth="{max(w, 64)}" offheight="{max(h, 64)}"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.5 0.5 0.5" specular="0 0 0"/>
  </visual>
  <default>
    <geom solref="0.01 1" solimp="0.95 0.99 0.001"/>
  </default>
  <worldbody>
    <light pos="0.2 -0.3 1.2" dir="-0.15 0.25 -1" castshadow="false" diffuse="0.45 0.45 0.45"/>
    <camera name="agentview" pos="0 -0.4 0.42" xyaxes="1 0 0 0 0.686 0.727" fovy="50"/>
    <geom name="floor" type="plane" pos="0 0 -0.3" size="2 2 0.1" rgba="0.3 0.32 0.35 1" contype="0" conaffinity="0"/>
    <geom name="table" type="box" pos="0 0 -0.02" size="0.4 0.35 0.02" rgba="0.72 0.65 0.55 1" friction="0.6 0.005 0.0001"/>
{_gripper()}{blocks}{targets}{goal_xml}{_bin() if bin else ""}
  </worldbody>
  <actuator>
    <position name="act_x" joint="hand_x" kp="3000" forcerange="-60 60" ctrlrange="{HAND_RANGE[0][0]} {HAND_RANGE[0][1]}"/>
    <position name="act_y" joint="hand_y" kp="3000" forcerange="-60 60" ctrlrange="{HAND_RANGE[1][0]} {HAND_RANGE[1][1]}"/>
    <position name="act_z" joint="hand_z" kp="3000" forcerange="-60 60" ctrlrange="{HAND_RANGE[2][0]} {HAND_RANGE[2][1]}"/>
    <position name="act_fl" joint="finger_l" kp="400" forcerange="-12 12" ctrlrange="0 {FINGER_OPEN}"/>
    <position name="act_fr" joint="finger_r" kp="400" forcerange="-12 12" ctrlrange="0 {FINGER_OPEN}"/>
  </actuator>
  <contact>
    <exclude body1="hand" body2="finger_l"/>
    <exclude body1="hand" body2="finger_r"/>
    <exclude body1="finger_l" body2="finger_r"/>
  </contact>
</mujoco>
"""  # noqa: E501  (MJCF: one element per line)

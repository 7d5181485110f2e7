"""``SimRobotConfig``: the LeRobot ``RobotConfig`` choice ``"sims"`` (see :mod:`sims.lerobot_robot`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lerobot.robots.config import RobotConfig


@RobotConfig.register_subclass("sims")
@dataclass(kw_only=True)
class SimRobotConfig(RobotConfig):
    task: str = "tabletop/reach_one"  # the sims environment driven as the robot
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"image_size": 32, "cameras": ("agentview", "wrist")})
    init_seed: int = 0  # the initial state of the first episode (reset_episode picks others)

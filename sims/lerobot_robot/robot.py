"""``SimRobot``: a ``sims`` environment behind LeRobot's ``Robot`` ABC (see :mod:`sims.lerobot_robot`)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
from lerobot.robots.robot import Robot

from .config import SimRobotConfig


class SimRobot(Robot):
    config_class = SimRobotConfig
    name = "sims"

    def __init__(self, config: SimRobotConfig):
        super().__init__(config)
        self.config = config
        self.env = None
        self.last_info: dict[str, Any] = {}
        self.instruction = ""
        self._obs: dict[str, Any] | None = None
        self.actions_sent = 0

    # ---- features (from one probe of the env, without connecting) --------------------------------
    @cached_property
    def _dims(self) -> tuple[int, int, dict[str, tuple[int, int, int]]]:
        import sims

        env = sims.make(self.config.task, **dict(self.config.env_kwargs))
        try:
            obs, _ = env.reset(seed=0, options={"init_seed": 0})
            cams = {c: tuple(int(x) for x in np.asarray(im).shape) for c, im in sorted(obs["images"].items())}
            return int(np.asarray(obs["state"]).shape[-1]), int(env.action_space.shape[0]), cams
        finally:
            env.close()

    @property
    def observation_features(self) -> dict:
        d, _, cams = self._dims
        return {**{f"state_{i}": float for i in range(d)}, **cams}

    @property
    def action_features(self) -> dict:
        return {f"action_{i}": float for i in range(self._dims[1])}

    # ---- connection ------------------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        return self.env is not None

    def connect(self, calibrate: bool = True) -> None:
        import sims

        if self.is_connected:
            raise RuntimeError(f"{self} is already connected")
        self.env = sims.make(self.config.task, **dict(self.config.env_kwargs))
        self.reset_episode(self.config.init_seed)
        if calibrate and not self.is_calibrated:
            self.calibrate()
        self.configure()

    @property
    def is_calibrated(self) -> bool:
        return True  # a simulator needs no calibration

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def reset_episode(self, init_seed: int) -> None:
        """Put the scene in initial state ``init_seed`` (what an operator does between real episodes)."""
        if not self.is_connected:
            raise RuntimeError(f"{self} is not connected")
        self._obs, _ = self.env.reset(seed=int(init_seed), options={"init_seed": int(init_seed)})
        self.instruction = str(self._obs["instruction"])
        self.last_info = {}

    # ---- I/O -------------------------------------------------------------------------------------
    def get_observation(self) -> dict[str, Any]:
        if not self.is_connected:
            raise RuntimeError(f"{self} is not connected")
        state = np.asarray(self._obs["state"], dtype=np.float32)
        out: dict[str, Any] = {f"state_{i}": float(v) for i, v in enumerate(state)}
        out.update({c: np.asarray(im, dtype=np.uint8).copy() for c, im in self._obs["images"].items()})
        return out

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        if not self.is_connected:
            raise RuntimeError(f"{self} is not connected")
        names = list(self.action_features)
        missing = [n for n in names if n not in action]
        if missing:
            raise KeyError(f"action lacks {missing}; the robot's actions are {names}")
        a = np.asarray([float(action[n]) for n in names], dtype=np.float32)
        self._obs, _, terminated, truncated, info = self.env.step(a)
        self.last_info = dict(info, terminated=bool(terminated), truncated=bool(truncated))
        self.actions_sent += 1
        return {n: float(v) for n, v in zip(names, a)}

    def disconnect(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None

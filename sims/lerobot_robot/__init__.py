"""A simulated robot behind LeRobot's ``Robot`` interface, on top of a ``sims`` environment (no hardware needed).

``SimRobot`` implements LeRobot's ``lerobot.robots.Robot`` ABC (``observation_features``, ``action_features``,
``connect(calibrate)``, ``is_connected``, ``is_calibrated``, ``calibrate``, ``configure``, ``get_observation``,
``send_action``, ``disconnect``) and registers its config as ``RobotConfig`` choice ``"sims"``, so LeRobot's
``make_robot_from_config`` builds it like a real arm (it finds ``SimRobot`` in this package, the parent of the
config's module). What a real robot gives, it gives:

* ``get_observation()`` -> ``{"state_0": float, ..., "state_{D-1}": float, "<camera>": uint8 [H, W, 3]}``
  (one float per proprio dimension, as LeRobot robots name their motors ``"<motor>.pos"``);
* ``send_action({"action_0": float, ...})`` steps the simulator once and returns the action actually sent.

Beyond the interface, for unattended tests: ``last_info`` (the env's ``info`` after the last step: ``success``,
``progress``), ``instruction`` (the task's language instruction) and ``reset_episode(init_seed)`` (a real robot is
reset by its operator instead). Needs ``lerobot`` (the ``make lerobot`` environment).
"""

from .config import SimRobotConfig
from .robot import SimRobot

__all__ = ["SimRobot", "SimRobotConfig"]

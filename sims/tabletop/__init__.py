"""The built-in language-conditioned tabletop suite on plain MuJoCo (see :mod:`sims.tabletop.env`)."""

from .env import TabletopEnv
from .experts import ScriptedExpert, expert_action
from .tasks import TASKS

__all__ = ["TabletopEnv", "ScriptedExpert", "expert_action", "TASKS"]

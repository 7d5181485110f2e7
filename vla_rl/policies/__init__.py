"""Trainable VLA policies behind one interface (:mod:`.base`), picked by ``policy.kind`` / ``policy.type``
(:mod:`.factory`)."""

from .base import TrainablePolicy, check_policy
from .factory import POLICY_KINDS, load_policy, make_policy

__all__ = ["POLICY_KINDS", "TrainablePolicy", "check_policy", "load_policy", "make_policy"]

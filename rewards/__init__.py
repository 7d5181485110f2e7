"""rewards: reward functions with one protocol (``rewards.base``): batch in; total + named components out.

``build_reward(name, **kwargs)`` builds a registered reward; ``available_rewards()`` lists the names.
``"module:attr"`` names any importable callable/class (built with ``kwargs``), for rewards of your own.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from .base import Reward, RewardBatch, RewardOutput, check_output


def _jpeg(compressible: bool) -> Callable[..., Any]:
    def make(**kw: Any):
        from .jpeg import JpegReward

        return JpegReward(compressible=compressible, **kw)

    return make


def _shapes(**kw: Any):
    from .shapes import ShapesVerifier

    return ShapesVerifier(**kw)


def _multi(**kw: Any):
    from .multi import MultiReward

    return MultiReward(**kw)


_REGISTRY: dict[str, Callable[..., Any]] = {
    "shapes_verifier": _shapes,
    "jpeg_compressibility": _jpeg(True),
    "jpeg_incompressibility": _jpeg(False),
    "multi": _multi,
}


def register_reward(name: str, factory: Callable[..., Any]) -> None:
    _REGISTRY[name] = factory


def available_rewards() -> list[str]:
    return sorted(_REGISTRY)


def build_reward(name: str, **kwargs: Any):
    """The reward called ``name`` (see :func:`available_rewards`), or ``"package.module:attr"``."""
    if ":" in name:
        mod, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"reward {name!r}: cannot import {attr!r} from {mod!r} ({e})") from e
        return obj(**kwargs) if isinstance(obj, type) or kwargs else obj
    if name not in _REGISTRY:
        raise ValueError(f"unknown reward {name!r}; available: {', '.join(available_rewards())}")
    return _REGISTRY[name](**kwargs)


__all__ = ["Reward", "RewardBatch", "RewardOutput", "build_reward", "available_rewards", "register_reward", "check_output"]

"""rewards: reward functions with one protocol (``rewards.base``): batch in; total + named components out.

``build_reward(name, **kwargs)`` builds a registered reward; ``available_rewards()`` lists the names.
``"module:attr"`` names any importable callable/class (built with ``kwargs``), for rewards of your own.

=========================  =====================================================  ==============================
name                       what                                                   weights (local paths only)
=========================  =====================================================  ==============================
``shapes_verifier``        colors-and-shapes prompt adherence (``shapes.py``)     none
``jpeg_compressibility``   minus JPEG kB (DDPO) (``jpeg.py``)                     none
``jpeg_incompressibility`` plus JPEG kB                                           none
``ocr``                    1 - normalized edit distance to the quoted text        none (rapidocr wheel ships them)
``clip_score``             CLIPScore (``clip_score.py``)                          ``model=``
``pickscore``              PickScore / 26 (``pickscore.py``)                      ``model=``, ``processor=``
``hpsv2``                  HPSv2.1 (``hps.py``, open_clip checkpoint converted)   ``checkpoint=``, ``tokenizer=``
``aesthetic``              LAION aesthetic MLP on CLIP-L (``aesthetic.py``)       ``clip=``, ``mlp=``
``multi``                  weighted sum or GDPO of several (``multi.py``)         those of its members
=========================  =====================================================  ==============================

An unknown name, a missing weight path or a missing optional package fails when the reward is built,
with a ``ValueError`` naming the reward and what it needs.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from grpo.plugins import load_object

from .base import ImageReward, NonFiniteRewardError, Reward, RewardBatch, RewardOutput, check_output


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


def _lazy(module: str, cls: str) -> Callable[..., Any]:
    def make(**kw: Any):
        return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(**kw)

    make.__qualname__ = f"{module}.{cls}"
    return make


_REGISTRY: dict[str, Callable[..., Any]] = {
    "shapes_verifier": _shapes,
    "jpeg_compressibility": _jpeg(True),
    "jpeg_incompressibility": _jpeg(False),
    "multi": _multi,
    "ocr": _lazy("ocr", "OCRReward"),
    "clip_score": _lazy("clip_score", "ClipScoreReward"),
    "pickscore": _lazy("pickscore", "PickScoreReward"),
    "hpsv2": _lazy("hps", "HPSv2Reward"),
    "aesthetic": _lazy("aesthetic", "AestheticReward"),
}


def available_rewards() -> list[str]:
    return sorted(_REGISTRY)


def build_reward(name: str, **kwargs: Any):
    """The reward called ``name`` (see :func:`available_rewards`), or ``"package.module:attr"``."""
    if ":" in name:
        obj = load_object(name, "reward.name")
        if not (isinstance(obj, type) or kwargs):
            return obj
        try:
            return obj(**kwargs)
        except TypeError as e:  # a misspelled kwarg (or kwargs given to a plain function): name the reward
            if "argument" not in str(e):
                raise
            raise ValueError(f"reward {name!r}: bad arguments {sorted(kwargs)}: {e}") from e
    if name not in _REGISTRY:
        raise ValueError(f"unknown reward {name!r}; available: {', '.join(available_rewards())}")
    try:
        return _REGISTRY[name](**kwargs)
    except TypeError as e:  # a misspelled kwarg: name the reward
        if "keyword argument" not in str(e):
            raise
        raise ValueError(f"reward {name!r}: bad arguments {sorted(kwargs)}: {e}") from e


__all__ = ["Reward", "RewardBatch", "RewardOutput", "ImageReward", "NonFiniteRewardError", "build_reward",
           "available_rewards", "check_output"]

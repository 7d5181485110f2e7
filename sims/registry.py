"""Task names -> env factories: ``make(name, **kw)`` and ``list_tasks()``.

Names are ``"<suite>/<task>"``: ``tabletop/{reach,push,pick_place,stack}`` (built in, always
available), ``robosuite/{Lift,Stack,PickPlaceCan,Door,NutAssembly,...}`` (robosuite 1.5),
``libero/<suite>/<task index>`` (only when ``libero`` is importable). Heavy suites are imported
lazily, inside their factory.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

_FACTORIES: dict[str, Callable[..., gym.Env]] = {}


def register(name: str, factory: Callable[..., gym.Env]) -> None:
    """Add ``name`` -> ``factory(**kw)``; re-registering a name replaces it."""
    if "/" not in name:
        raise ValueError(f"task names are '<suite>/<task>', got {name!r}")
    _FACTORIES[name] = factory


def _builtin() -> None:
    from .tabletop.tasks import TASKS

    for t in TASKS:
        register(f"tabletop/{t}", lambda _t=t, **kw: _make_tabletop(_t, **kw))
    from . import robosuite_adapter

    for t in robosuite_adapter.TASKS:
        register(f"robosuite/{t}", lambda _t=t, **kw: robosuite_adapter.make(_t, **kw))


def _make_tabletop(task: str, **kw: Any) -> gym.Env:
    from .tabletop.env import TabletopEnv

    return TabletopEnv(task, **kw)


def list_tasks(suite: str | None = None) -> list[str]:
    """Registered task names (optionally those of one suite: "tabletop", "robosuite", "libero")."""
    names = sorted(_FACTORIES)
    from . import libero_adapter

    names += libero_adapter.list_tasks()
    return [n for n in names if suite is None or n.split("/", 1)[0] == suite]


def make(name: str, **kw: Any) -> gym.Env:
    """Build the env ``name`` with options ``kw`` (e.g. ``make("tabletop/stack", image_size=128)``).

    The env is returned unwrapped (no gymnasium wrappers), so ``env.expert_action`` and friends are
    reachable directly; episodes truncate themselves after ``max_steps``."""
    if not isinstance(name, str):
        raise TypeError(f"task name must be a str like 'tabletop/reach', got {name!r}")
    if name.startswith("libero/"):
        from . import libero_adapter

        return libero_adapter.make(name, **kw)
    if name not in _FACTORIES:
        raise ValueError(f"unknown task {name!r}; known: {list_tasks()}")
    return _FACTORIES[name](**kw)


_builtin()

"""Task names -> env factories: ``make(name, **kw)`` and ``list_tasks()``.

Names are ``"<suite>/<task>"``: ``tabletop/{reach,push,pick_place,stack}`` (built in, always
available), ``robosuite/{Lift,Stack,PickPlaceCan,Door,NutAssembly,...}`` (robosuite 1.5),
``libero/<suite>/<task index>`` (only when ``libero`` is importable). Heavy suites are imported
lazily, inside their factory.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

from .config import TabletopConfig, build

_FACTORIES: dict[str, Callable[..., gym.Env]] = {}
_OPTIONS: dict[str, Callable[[dict[str, Any]], Any]] = {}  # task name -> check of its keyword options


def register(name: str, factory: Callable[..., gym.Env],
             options: Callable[[dict[str, Any]], Any] | None = None) -> None:
    """Add ``name`` -> ``factory(**kw)``; re-registering a name replaces it. ``options(kw)``, when given, checks the
    keyword options without building anything (raising TypeError / ValueError naming the bad one), so a run can
    refuse them before it starts (:func:`check_options`); e.g. ``lambda kw: sims.config.build(TabletopConfig, kw)``."""
    if "/" not in name:
        raise ValueError(f"task names are '<suite>/<task>', got {name!r}")
    _FACTORIES[name] = factory
    _OPTIONS.pop(name, None)
    if options is not None:
        _OPTIONS[name] = options


def check_options(name: str, kw: dict[str, Any], key: str = "env.kwargs") -> None:
    """Check the options ``kw`` that ``make(name, **kw)`` would get, building no env: an unknown option or a bad
    value raises ValueError (one line: ``key``, the suite's option class, the valid names). The built-in suites
    (tabletop, robosuite, LIBERO) and the world-model env are checked; a task registered without ``options`` (a
    user's plugin) is not."""
    if name.startswith("libero/"):
        from .libero_adapter import LiberoConfig

        check = lambda k: build(LiberoConfig, k)  # noqa: E731
    else:
        check = _OPTIONS.get(name)
    if check is None:
        return
    if not isinstance(kw, dict):
        raise ValueError(f"{key}={kw!r}: expected a mapping of simulator options")
    try:
        check(dict(kw))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{key} for {name}: {e}") from None


def _builtin() -> None:
    from .tabletop.tasks import TASKS

    for t in TASKS:
        register(f"tabletop/{t}", lambda _t=t, **kw: _make_tabletop(_t, **kw), lambda kw: build(TabletopConfig, kw))
    from . import robosuite_adapter

    for t in robosuite_adapter.TASKS:
        register(f"robosuite/{t}", lambda _t=t, **kw: robosuite_adapter.make(_t, **kw),
                 lambda kw: build(robosuite_adapter.RobosuiteConfig, kw))


def _make_tabletop(task: str, **kw: Any) -> gym.Env:
    from .tabletop.env import TabletopEnv

    return TabletopEnv(task, **kw)


def list_tasks(suite: str | None = None) -> list[str]:
    """Registered task names (optionally those of one suite: "tabletop", "robosuite", "libero")."""
    names = sorted(_FACTORIES)
    from . import libero_adapter

    names += libero_adapter.list_tasks()
    return [n for n in names if suite is None or n.split("/", 1)[0] == suite]


# the tasks whose env has a scripted expert (env.expert_action)
EXPERT_TASKS = "tabletop/*, robosuite/Lift, robosuite/Stack, libero/libero_spatial/*"


def has_scripted_expert(name: str) -> bool | None:
    """Whether task ``name``'s env has a scripted expert (``env.expert_action``: :data:`EXPERT_TASKS`), read from the
    name alone (no env built, no simulator imported); ``None`` for a task of another family (a plugin's: its env says
    when it is built)."""
    family, _, rest = name.partition("/")
    if family == "tabletop":
        return True
    if family == "robosuite":
        from .robosuite_adapter import _EXPERTS

        return rest in _EXPERTS
    if family == "libero":
        return rest.split("/", 1)[0] == "libero_spatial"
    return None


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

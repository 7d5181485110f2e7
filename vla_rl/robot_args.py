"""A LeRobot robot named on the command line or in a config, built as LeRobot's own ``RobotConfig`` and checked
before any hardware is touched or a policy is loaded.

LeRobot's scripts (``lerobot-record``, ``lerobot-teleoperate``: ``lerobot.configs.parser.wrap`` over
``draccus.parse``) take a robot as ``--robot.type <registered type>`` plus one ``--robot.<field> <value>`` per field
of that type's ``RobotConfig`` subclass; draccus reads every value as YAML and decodes the nested result into the
dataclass (a camera config by its own ``type`` key). ``vla-rl deploy`` and ``vla-rl robot-loop`` take the same
flags::

    --robot.type so100_follower --robot.port /dev/ttyACM0 --robot.id my_arm \\
    --robot.cameras "{front: {type: opencv, index_or_path: 0, width: 640, height: 480, fps: 30}}"

How (:func:`robot_config`): the flags are split off the command line before argparse sees them
(:func:`split_robot_flags`; ``--robot.<k>=<v>`` or ``--robot.<k> <v>``); every ``lerobot.robots.*`` and
``lerobot.cameras.*`` module is imported so their config classes are registered (:func:`register_choices`, what
LeRobot's scripts do with their imports); ``type`` must be a registered choice and every field a field of its
class; then each value goes through draccus's own string parser (``draccus.cfgparsing.parse_string``, YAML) and
the dict through ``draccus.decode(RobotConfig, {"type": ..., ...})``: what ``draccus.parse`` does after argparse.
A missing required field, an unknown one, a value of the wrong type, an unknown camera type: one ``ValueError``
line naming the flag. Building the config opens no port and no camera.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

FLAG = "--robot."  # LeRobot's prefix of a robot's fields on the command line


def split_robot_flags(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """``argv`` without its ``--robot.<field>`` flags, and those flags as ``[(field, raw value)]`` in order.

    ``--robot.port=/dev/ttyACM0`` and ``--robot.port /dev/ttyACM0`` are the same flag (draccus takes both); a flag
    with no value (the last argument, or followed by another ``--option``) has value ``None`` (reported later by
    :func:`robot_fields`, where an error is one line). ``--robot`` itself (the old spelling of ``--robot.type``) is
    left in place for argparse."""
    rest: list[str] = []
    flags: list[tuple[str, str | None]] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith(FLAG):
            key, eq, val = a[len(FLAG):].partition("=")
            if not eq:
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                if nxt is not None and not nxt.startswith("--"):
                    val, i = nxt, i + 1
                else:
                    val = None
            flags.append((key, val))
        else:
            rest.append(a)
        i += 1
    return rest, flags


def register_choices() -> None:
    """Import every ``lerobot.robots.<name>`` and ``lerobot.cameras.<name>`` package (importing one registers its
    config class as a draccus choice) and ``sims.lerobot_robot`` (the ``sims`` robot). One whose optional SDK is
    not installed here does not import and stays unregistered."""
    import importlib
    import pkgutil

    import lerobot.cameras
    import lerobot.robots

    import sims.lerobot_robot  # noqa: F401  (registers the "sims" robot config)

    for pkg in (lerobot.robots, lerobot.cameras):
        for m in pkgutil.iter_modules(pkg.__path__):
            if m.ispkg:
                try:
                    importlib.import_module(f"{pkg.__name__}.{m.name}")
                except Exception:  # noqa: BLE001 - a robot / camera whose SDK is not installed: not available here
                    continue


def registered_robot_types() -> list[str]:
    """Every LeRobot robot type this install can build (:func:`register_choices`), ``sims`` included."""
    from lerobot.robots.config import RobotConfig

    register_choices()
    return sorted(RobotConfig.get_known_choices())


def check_robot_type(kind: str, key: str = "--robot.type") -> None:
    """``kind`` is a robot type :func:`registered_robot_types` knows; else one line listing them."""
    known = registered_robot_types()
    if kind not in known:
        raise ValueError(f"{key}={kind!r} is not a registered LeRobot robot; known here: {', '.join(known)}")


def robot_fields(flags: Sequence[tuple[str, str | None]], kind: str | None = None, old: str = "--robot"
                 ) -> tuple[str | None, dict[str, str]]:
    """``(type, {field: raw value})`` from the flags of :func:`split_robot_flags`; ``kind``: the type given the old
    way (``--robot sims``), which must agree with ``--robot.type``. A flag given twice: the last wins (argparse's
    rule, which draccus follows). A flag without a value, or ``--robot.type`` with a dotted field: ValueError."""
    raw: dict[str, str] = {}
    for k, v in flags:
        if not k:
            raise ValueError(f"{FLAG[:-1]}.: expected {FLAG}<field> <value>, e.g. {FLAG}port /dev/ttyACM0")
        if v is None:
            raise ValueError(f"{FLAG}{k} has no value; expected {FLAG}{k} <value> or {FLAG}{k}=<value>")
        raw[k] = v
    typ = raw.pop("type", None)
    if typ is not None and kind is not None and typ != kind:
        raise ValueError(f"{old} {kind} and {FLAG}type {typ} name two robots; give one ({FLAG}type)")
    return typ or kind, raw


def _field_type(f: dataclasses.Field) -> str:
    t = f.type
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def parse_flag_values(raw: dict[str, str]) -> dict[str, Any]:
    """Each flag's text parsed as YAML by draccus's own parser (``draccus.cfgparsing.parse_string``, what
    ``draccus.parse`` does with every value), so ``--robot.cameras "{front: {...}}"`` is a dict and
    ``--robot.use_degrees false`` a bool; a value that is not YAML: one line naming its flag."""
    import yaml
    from draccus.cfgparsing import parse_string

    out: dict[str, Any] = {}
    for k, v in raw.items():
        try:
            out[k] = parse_string(v)
        except yaml.YAMLError as e:
            raise ValueError(f"{FLAG}{k}={v!r} is not valid YAML ({' '.join(str(e).split())})") from None
    return out


def robot_config(kind: str, values: dict[str, Any], flagged: Sequence[str] = (), where: str = FLAG,
                 type_key: str = "--robot.type"):
    """LeRobot's ``RobotConfig`` of type ``kind`` with fields ``values`` (module docstring), built without hardware.

    ``values``: field -> value, already parsed (:func:`parse_flag_values` for flags; a config file's YAML); a dotted
    field (``cameras.front.fps``) sets a nested key, as draccus does. Errors name a field as ``--robot.<field>`` when
    it is in ``flagged``, else ``<where><field>``; an unknown type as ``type_key``."""
    import draccus
    from draccus.utils import DecodingError, ParsingError, deflatten
    from lerobot.robots.config import RobotConfig

    check_robot_type(kind, type_key)
    cls = RobotConfig.get_choice_class(kind)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}

    def name(key: str) -> str:
        return f"{FLAG}{key}" if key in flagged or key.split(".")[0] in flagged else f"{where}{key}"

    what = f"{kind} (LeRobot's {cls.__name__})"
    for k in values:
        if k.split(".")[0] not in fields:
            raise ValueError(f"{name(k)} is not a field of {what}; its fields: {', '.join(fields)}")
    given = {k.split(".")[0] for k in values}
    missing = [n for n, f in fields.items() if n not in given and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:  # (named as a flag, and as the config key where there is one)
        def need(m: str) -> str:
            return f"{FLAG}{m}" + (f" (or {where}{m})" if where != FLAG else "")

        raise ValueError(f"{need(missing[0])} is required by {what} and was not given"
                         + (f"; also missing: {', '.join(need(m) for m in missing[1:])}" if missing[1:] else ""))
    try:
        return draccus.decode(RobotConfig, {"type": kind, **deflatten(dict(values), sep=".")})
    except DecodingError as e:
        path = [str(p) for p in e.key_path]
        typ = f" ({kind}'s {path[0]} is {_field_type(fields[path[0]])})" if path and path[0] in fields else ""
        msg = " ".join(str(e.message).split())
        if "choice class" in msg:
            from lerobot.cameras.configs import CameraConfig

            msg += f"; camera types known here: {', '.join(sorted(CameraConfig.get_known_choices()))}"
        raise ValueError(f"{name('.'.join(path)) if path else what}: {msg}{typ}") from None
    except ParsingError as e:  # (draccus wraps the config's own __post_init__ error, e.g. a camera without fps)
        raise ValueError(f"{what} refuses {_shown(values, name)}: {' '.join(str(e.__cause__ or e).split())}") from None
    except (ValueError, TypeError) as e:
        raise ValueError(f"{what} refuses {_shown(values, name)}: {' '.join(str(e).split())}") from None


def _shown(values: dict[str, Any], name) -> str:
    """The fields given, as ``--robot.port='x' ...`` (long values shortened) for an error line."""
    return " ".join(f"{name(k)}={r if len(r := repr(v)) <= 60 else r[:57] + '...'}"
                    for k, v in values.items()) or "no fields"

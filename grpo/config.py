"""Typed configs: YAML recipes loaded into (nested) dataclasses, with ``key=value`` overrides.

    cfg = load_config(TrainConfig, "configs/grpo/toy_flow.yaml", ["train.lr=3e-4", "seed=1"])

Every value is checked against the dataclass field's type annotation (int, float, bool, str, Literal,
Optional, list/tuple, dict, nested dataclasses). An unknown key, a wrong type, a missing required key or
a missing file raises :class:`ConfigError` at start, naming the key (dotted path) or file and what was
expected, with a close-match suggestion for misspelled keys.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file or override that does not match the expected schema."""


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if dataclasses.is_dataclass(tp):
        return f"a mapping ({tp.__name__})"
    if origin is not None:
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, key: str, source: str) -> Any:
    """Check/convert ``value`` to type ``tp``; raise ConfigError naming ``key`` otherwise."""
    origin = get_origin(tp)
    err = ConfigError(
        f"{source}: config key '{key}' expects {_type_name(tp)}, got {value!r} ({type(value).__name__})"
    )
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise err
        return _build(tp, value, key, source)
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise err
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(value, a, key, source)
            except ConfigError:
                pass
        raise err
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise err
        args = get_args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise ConfigError(f"{source}: config key '{key}' expects {len(args)} items, got {len(value)}")
            items = [_convert(v, a, f"{key}[{i}]", source) for i, (v, a) in enumerate(zip(value, args))]
        else:
            item_tp = args[0] if args else Any
            items = [_convert(v, item_tp, f"{key}[{i}]", source) for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise err
        kt, vt = get_args(tp) or (Any, Any)
        return {_convert(k, kt, f"{key}.<key>", source): _convert(v, vt, f"{key}.{k}", source) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise err
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise err
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # PyYAML reads "3e-4" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise err
    if tp is str:
        if isinstance(value, str):
            return value
        raise err
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise err


def _build(cls: type[T], data: dict, prefix: str, source: str) -> T:
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for k in data:
        if k not in fields:
            full = f"{prefix}.{k}" if prefix else k
            close = difflib.get_close_matches(str(k), list(fields), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(
                f"{source}: unknown config key '{full}'{hint}; expected one of: {', '.join(sorted(fields))}"
            )
    kwargs = {}
    for name, f in fields.items():
        full = f"{prefix}.{name}" if prefix else name
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], full, source)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{source}: missing required config key '{full}' ({_type_name(hints[name])})")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:  # __post_init__ validation
        raise ConfigError(f"{source}: invalid {prefix or cls.__name__}: {e}") from e


def parse_overrides(overrides: list[str]) -> dict:
    """``["a.b=1", "c=[1,2]"]`` -> ``{"a": {"b": 1}, "c": [1, 2]}`` (values parsed as YAML)."""
    out: dict = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        key, raw = item.split("=", 1)
        if not key:
            raise ConfigError(f"override {item!r} has an empty key")
        value = yaml.safe_load(raw) if raw != "" else ""
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r} conflicts with another override of '{p}'")
        node[parts[-1]] = value
    return out


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None) -> T:
    """Build ``cls`` from a YAML file (optional) and ``key=value`` overrides (applied last)."""
    data: dict = {}
    source = "defaults"
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p} (expected a YAML file for {cls.__name__})")
        try:
            loaded = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: not valid YAML: {e}") from e
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: expected a mapping at the top level, got {type(loaded).__name__}")
        data, source = loaded, str(p)
    if overrides:
        data = _merge(data, parse_overrides(overrides))
        source = f"{source} + overrides"
    return _build(cls, data, "", source)


def config_to_dict(cfg: Any) -> dict:
    """A plain, YAML/JSON-serializable dict of a dataclass config (tuples become lists)."""

    def conv(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    return conv(cfg)


def config_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two config dicts (for refusing incompatible resumes)."""
    out = []
    for k in sorted(set(a) | set(b), key=str):
        full = f"{prefix}.{k}" if prefix else str(k)
        va, vb = a.get(k, "<missing>"), b.get(k, "<missing>")
        if isinstance(va, dict) and isinstance(vb, dict):
            out += config_diff(va, vb, full)
        elif va != vb:
            out.append(f"{full}: {va!r} != {vb!r}")
    return out


def check_resume_config(saved: dict, cfg: Any, source: str, ignore: tuple[str, ...] = ("resume",)) -> None:
    """Refuse to resume a run under a different config: raise ``ValueError`` listing every differing key,
    except those starting with one of ``ignore`` (iteration counts, logging cadence, ...)."""
    diff = [d for d in config_diff(saved, config_to_dict(cfg)) if not d.startswith(ignore)]
    if diff:
        raise ValueError(f"refusing to resume from {source}: config differs in\n  " + "\n  ".join(diff)
                         + "\n(use resume=false or another output_dir)")


def dump_config(cfg: Any) -> str:
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False)


__all__ = ["ConfigError", "load_config", "parse_overrides", "config_to_dict", "config_diff", "check_resume_config",
           "dump_config"]


def resolve_builtin(path: str, assets: Path, key: str) -> Path:
    """``"builtin:<name>"`` names weights shipped in the package folder ``assets/<name>``; anything else is a path.

    ``key`` (e.g. ``"model.path"``) names the config value in the error raised for an unknown built-in name."""
    if path.startswith("builtin:"):
        name = path.split(":", 1)[1]
        p = Path(assets) / name
        if not name or not p.is_dir():
            shipped = sorted(d.name for d in Path(assets).iterdir() if d.is_dir()) if Path(assets).is_dir() else []
            raise FileNotFoundError(f"{key}={path!r}: no built-in weights named {name!r}; shipped: {shipped}")
        return p
    return Path(path).expanduser()

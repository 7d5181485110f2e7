"""Typed configs: YAML recipes loaded into (nested) dataclasses, with ``key=value`` overrides.

    cfg = load_config(TrainConfig, "configs/grpo/toy_flow.yaml", ["train.lr=3e-4", "seed=1"])

Every value is checked against the dataclass field's type annotation (int, float, bool, str, Literal,
Optional, list/tuple, dict, nested dataclasses). An unknown key, a wrong type, a missing required key or
a missing file raises :class:`ConfigError` at start, naming the key (dotted path) or file and what was
expected, with a close-match suggestion for misspelled keys.

Keys the chosen mode ignores are refused too: a config class may define ``inactive_keys(self) -> dict[str, str]``
(dotted key -> why it does nothing, e.g. ``{"grpo.group_size": "branch.enabled=true (the tree's leaves are the
group)"}``); :func:`load_config` raises when a key *given* in the YAML or an override is one of them (defaults are
never refused). Each field's one-line help is ``field(metadata={"help": ...})`` (TRL's convention) or, failing that,
the ``# comment`` on the field's line; :func:`config_help` lists ``(key, type, default, help)`` for ``--help-config``
and the dry runs.

Public API: :func:`load_config`, :func:`build_config` (the same checks from a dict), :func:`merge_dicts`,
:func:`merge_overrides`,
:func:`parse_overrides`, :func:`given_keys`, :func:`check_inactive_keys`, :func:`field_help`, :func:`config_help`,
:func:`format_config_help`, :func:`config_to_dict`, :func:`config_diff`, :func:`check_resume_config`,
:func:`dump_config`, :func:`resolve_builtin`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import io
import math
import tokenize
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
    if tp is type(None):
        return "None"
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, key: str, source: str) -> Any:
    """Check/convert ``value`` to type ``tp``; raise ConfigError naming ``key`` otherwise."""
    origin = get_origin(tp)
    err = ConfigError(
        f"{source}: config key '{key}' expects {_type_name(tp)}, got {value!r} ({type(value).__name__})"
    )
    if isinstance(value, str) and "\x00" in value:  # (was: "embedded null byte", naming no key, from the OS)
        raise ConfigError(f"{source}: config key '{key}' holds a NUL byte ({value!r}); expected text without one (no "
                          "path or name can hold it)")
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise err
        return build_config(tp, value, key, source)
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
        return {_convert(k, kt, f"{key}.<key>", source): _convert(v, vt, f"{key}.{k}", source)
                for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise err
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise err
    if tp is float:
        out = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                out = float(value)
            except OverflowError:  # an int beyond the float range: not finite either
                out = math.inf
        elif isinstance(value, str):  # PyYAML reads "3e-4" (no dot) as a string
            try:
                out = float(value)
            except ValueError:
                pass
        if out is None:
            raise err
        if not math.isfinite(out):  # nan / inf / .inf: no setting of any job means anything with them
            raise ConfigError(f"{source}: config key '{key}' expects a finite number, got {value!r}")
        return out
    if tp is str:
        if isinstance(value, str):
            return value
        raise err
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise err


def build_config(cls: type[T], data: dict, prefix: str = "", source: str = "config") -> T:
    """Build dataclass ``cls`` from a plain dict with the same checks as a YAML file (types, unknown keys with
    a close-match suggestion, required keys, ``__post_init__`` validation), errors naming ``prefix.key`` and
    ``source``. Does not check :func:`inactive keys <check_inactive_keys>` (it cannot know which were given)."""
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


MAX_YAML_VALUES = 1_000_000  # the most values a config document may expand to through its aliases (``*name``)


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping holding the same key twice: PyYAML keeps the last one silently, so a
    second ``train:`` section would drop the whole first one. Merge keys (``<<: *base``) still override. A document
    whose aliases expand to more than :data:`MAX_YAML_VALUES` values is refused too (nine nested lists of nine
    aliases each, 9^9 values, hung the type checks walking them)."""

    def construct_document(self, node):
        sizes: dict[int, int] = {}

        def size(n) -> int:  # values under ``n`` with every alias expanded (each node counted once per use)
            if id(n) not in sizes:
                sizes[id(n)] = 1  # (an alias of an enclosing node: counted once)
                kids = ([c for pair in n.value for c in pair] if isinstance(n, yaml.MappingNode)
                        else n.value if isinstance(n, yaml.SequenceNode) else [])
                sizes[id(n)] = 1 + sum(size(c) for c in kids)
            return sizes[id(n)]

        total = size(node)
        if total > MAX_YAML_VALUES:
            raise yaml.constructor.ConstructorError(
                None, None, f"its aliases expand to {total} values (expected at most {MAX_YAML_VALUES}: a config "
                "that large is an alias bomb)", node.start_mark)
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:  # an unhashable key: the base class says so
                    continue
                if first is not key_node.start_mark:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice (first at line {first.line + 1}); the second would "
                        "silently replace the first: keep one", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _yaml_error(e: yaml.YAMLError) -> str:
    """A PyYAML error as one line: where the parser stopped (1-based line and column) and what it found."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = " ".join(str(getattr(e, "problem", None) or e).split())
    ctx, cm = getattr(e, "context", None), getattr(e, "context_mark", None)
    if ctx and cm is not None and cm is not mark:
        what += f" ({ctx.removeprefix('while ')} at line {cm.line + 1})"
    return f"{where}: {what}"


# What PyYAML's constructors raise, outside yaml.YAMLError, for an explicitly tagged value they cannot build: an empty
# ``!!float`` / ``!!int`` (IndexError), ``!!int abc`` (ValueError), ``!!timestamp 2020-13-45`` (ValueError)
YAML_TAG_ERRORS = (ValueError, TypeError, IndexError, OverflowError)


def _tag_error(e: Exception) -> str:
    """A constructor's failure as the reason of one error line (its own message names no value when it is empty)."""
    why = " ".join(str(e).split()) or type(e).__name__
    return (f"a tagged value (!!int, !!float, !!timestamp, ...) cannot be built ({type(e).__name__}: {why}); "
            "expected a value of the tag's type, or no tag")


def parse_overrides(overrides: list[str]) -> dict:
    """``["a.b=1", "c=[1,2]"]`` -> ``{"a": {"b": 1}, "c": [1, 2]}`` (values parsed as YAML)."""
    out: dict = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        key, raw = item.split("=", 1)
        if not key:
            raise ConfigError(f"override {item!r} has an empty key")
        if "" in key.split("."):
            raise ConfigError(f"override {item!r}: key {key!r} has an empty part (expected dotted names, e.g. "
                              "train.lr=1e-4)")
        try:
            value = yaml.load(raw, Loader=UniqueKeyLoader) if raw != "" else ""
        except yaml.YAMLError as e:  # (a one-line value: its line numbers say nothing)
            what = _yaml_error(e).replace(" at line 1,", " at").replace(" (first at line 1)", "")
            hint = "" if isinstance(e, yaml.constructor.ConstructorError) else " (quote it to pass a string)"
            raise ConfigError(f"override {item!r}: the value is not valid YAML{what}{hint}") from None
        except YAML_TAG_ERRORS as e:
            raise ConfigError(f"override {item!r}: the value is not valid YAML: {_tag_error(e)}") from None
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r} conflicts with another override of '{p}'")
        last = parts[-1]
        # a mapping merges into what earlier overrides set under the same key, as it merges into the file's section
        # (was: ``train.lr=1 'train={iterations: 2}'`` dropped train.lr=1 silently); anything else replaces it
        if isinstance(value, dict) and isinstance(node.get(last), dict):
            node[last] = merge_dicts(node[last], value)
        else:  # ``key={}`` (no earlier override of key): clears a free-form mapping (:func:`merge_overrides`)
            node[last] = Cleared() if isinstance(value, dict) and not value else value
    return out


class Cleared(dict):
    """An override's explicit empty mapping, ``key={}``: it *replaces* a free-form mapping field (``reward.kwargs``,
    ``env.kwargs``, ``prompts.shapes``, ...) instead of merging into it, so ``reward.kwargs={}`` drops the file's
    reward arguments (was: merged, a silent no-op: ``reward.name=jpeg_compressibility 'reward.kwargs={}'`` over
    shapes_flat.yaml still passed its ``shape_width``). Later overrides of keys under it fill it
    (``'reward.kwargs={}' reward.kwargs.quality=50``: exactly ``{quality: 50}``). On a config section (a dataclass,
    ``train={}``) it merges like any mapping: nothing changes."""


def _section_type(tp: Any) -> Any:
    """The dataclass a field of type ``tp`` holds (``X`` or ``X | None``), else ``None`` (a free-form value)."""
    if dataclasses.is_dataclass(tp):
        return tp
    if get_origin(tp) in (Union, types.UnionType):
        return next((a for a in get_args(tp) if dataclasses.is_dataclass(a)), None)
    return None


def _plain(value: Any) -> Any:
    """``value`` with every :class:`Cleared` marker turned into a plain ``dict`` (YAML dumps no dict subclass)."""
    return {k: _plain(v) for k, v in value.items()} if isinstance(value, dict) else value


def merge_overrides(cls: Any, base: dict, over: dict) -> dict:
    """:func:`parse_overrides`' ``over`` merged into the config dict ``base`` of dataclass ``cls`` (``None`` below a
    free-form field): nested mappings merge as in :func:`merge_dicts`, except that a :class:`Cleared` mapping
    replaces a free-form mapping field's value; inputs unchanged."""
    hints = get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}
    out = dict(base)
    for k, v in over.items():
        section = _section_type(hints.get(k))
        if isinstance(v, Cleared) and section is None:
            out[k] = _plain(v)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_overrides(section, out[k], v)
        else:
            out[k] = _plain(v)
    return out


def merge_dicts(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` recursively (nested dicts merge, anything else replaces); inputs unchanged."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge_dicts(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None) -> T:
    """Build ``cls`` from a YAML file (optional) and ``key=value`` overrides (applied last)."""
    data: dict = {}
    source = "defaults"
    if path is not None:
        p = Path(path)
        if not str(path).strip():  # (Path("") is "."; it would be reported as a directory)
            raise ConfigError(f"config file name is empty ({str(path)!r}); expected a YAML file for {cls.__name__}")
        if p.is_dir():
            raise ConfigError(f"config file {p} is a directory (expected a YAML file for {cls.__name__})")
        if p.exists() and not p.is_file():  # a FIFO or a device (/dev/null): reading it would block or say nothing
            raise ConfigError(f"config file {p} is not a regular file (expected a YAML file for {cls.__name__})")
        if not p.is_file():
            raise ConfigError(f"config file not found: {p} (expected a YAML file for {cls.__name__})")
        try:
            text = p.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"config file {p} cannot be read ({type(e).__name__}: {e}); expected a UTF-8 YAML "
                              "file") from e
        try:
            loaded = yaml.load(text, Loader=UniqueKeyLoader)
        except yaml.YAMLError as e:  # one line, with where the parser stopped (1-based line and column)
            raise ConfigError(f"{p}: not valid YAML{_yaml_error(e)}") from e
        except YAML_TAG_ERRORS as e:
            raise ConfigError(f"{p}: not valid YAML: {_tag_error(e)}") from e
        if loaded is None:
            raise ConfigError(f"{p}: the file is empty (expected a YAML mapping of {cls.__name__}'s keys)")
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: expected a mapping at the top level, got {type(loaded).__name__}")
        data, source = loaded, str(p)
    if overrides:
        data = merge_overrides(cls, data, parse_overrides(overrides))
        source = f"{source} + overrides"
    cfg = build_config(cls, data, "", source)
    expand_home(cfg, source)
    check_run_keys(cfg, source)
    check_inactive_keys(cfg, given_keys(cls, data), source)
    return cfg


MAX_SEED = 2**32 - 1  # the largest ``seed`` a job takes (:func:`check_run_keys`)


def check_seed(cfg: Any, source: str = "config") -> None:
    """A config's top-level ``seed`` in [0, 2**32 - 1] (:func:`check_run_keys`; also for a checkpoint's config that
    an override changed, as ``diffusion-rl eval`` takes)."""
    seed = getattr(cfg, "seed", None)
    if isinstance(seed, int) and seed < 0:
        raise ConfigError(f"{source}: config key 'seed' must be >= 0, got {seed}")
    if isinstance(seed, int) and seed > MAX_SEED:
        raise ConfigError(f"{source}: config key 'seed' must be <= 2**32 - 1 = {MAX_SEED}, got {seed}")


def expand_home(cfg: Any, source: str = "config") -> None:
    """Where a job writes (top-level ``output_dir`` / ``output``): ``"~/runs/x"`` becomes the home's path when the
    config is built, so that the checks and the job read the same directory (before, it was checked under the home,
    then written to a directory named ``~`` in the working directory). ``~user`` of no such user is refused."""
    for key in ("output_dir", "output"):
        v = getattr(cfg, key, None)
        if isinstance(v, str) and v.startswith("~"):
            try:
                setattr(cfg, key, str(Path(v).expanduser()))
            except RuntimeError:  # ~user of no such user
                raise ConfigError(f"{source}: config key '{key}'={v!r}: no home directory for "
                                  f"{v.split('/', 1)[0]!r}; expected a path") from None


def check_run_keys(cfg: Any, source: str = "config") -> None:
    """The keys every job's top level shares: ``seed`` must be in [0, 2**32 - 1] (numpy's generators refuse a
    negative one and torch's a seed of 2**64 or more, so a run would fail late; the noise keys use the low 32 bits,
    :func:`grpo.distributed.keyed_generator`, so larger seeds would alias smaller ones) and ``output_dir`` must name a
    directory (an empty one would write into the working directory)."""
    check_seed(cfg, source)
    out = getattr(cfg, "output_dir", None)
    if isinstance(out, str) and not out.strip():
        raise ConfigError(f"{source}: config key 'output_dir' must name a directory, got {out!r}")
    from .trackers import LogConfig, missing_packages

    for key, log in _sections(cfg, LogConfig):  # a tracker whose package is missing: refused before anything is written
        msg = missing_packages(log)
        if msg is not None:
            raise ConfigError(f"{source}: {msg.replace('log.backends', key + '.backends', 1)}")


def _sections(cfg: Any, cls: type, prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, section)`` of every ``cls`` section inside dataclass config ``cfg``."""
    out = []
    for f in dataclasses.fields(cfg) if dataclasses.is_dataclass(cfg) else ():
        v = getattr(cfg, f.name, None)
        key = f"{prefix}.{f.name}" if prefix else f.name
        if isinstance(v, cls):
            out.append((key, v))
        elif dataclasses.is_dataclass(v):
            out += _sections(v, cls, key)
    return out


def require_at_least(section: str, obj: Any, **minimums: float) -> None:
    """Raise ``ValueError("section.name must be >= m, got v")`` for the first attribute ``name`` of ``obj`` below its
    minimum ``m`` (``None`` values are skipped: they mean "off"). For configs' ``__post_init__``, so that every range
    error names the key, the bound and the value given."""
    for name, lo in minimums.items():
        v = getattr(obj, name)
        if v is not None and v < lo:
            raise ValueError(f"{section}.{name} must be >= {lo:g}, got {v}")


MAX_WIDTH = 8192  # the widest layer / embedding / token count a config key may ask for (beyond every supported model's)
MAX_EPISODES = 1_000_000  # the most episodes one command records / runs per task or kind (1e11 would run for ever)
MAX_BATCH = 100_000  # the most prompts / groups one iteration may draw (a typo's 1e9 fills the memory or runs for days)
MAX_EPISODE_STEPS = 100_000  # the most steps one episode may run (a typo's 1e9 ran one episode for days)
MAX_INNER_EPOCHS = 1000  # the most passes over one iteration's rollout (a typo's 1e9 updated on it for ever)
MAX_LR = 1.0  # the largest learning rate a config may ask for (1e300 ran until AdamW's step overflowed float32)


def require_weight_decay(section: str, weight_decay: float, lr: float) -> None:
    """AdamW's decoupled decay multiplies every weight by ``1 - lr * weight_decay`` per step: at ``lr * weight_decay
    >= 1`` the weights flip sign and grow each step, until they are NaN (was: ``sft.weight_decay=5000`` saved a NaN
    policy with exit 0). Raise ``ValueError`` (one line) there."""
    if weight_decay * lr >= 1:
        raise ValueError(f"{section}.weight_decay={weight_decay} with {section}.lr={lr}: expected weight_decay x lr "
                         "< 1 (AdamW multiplies every weight by 1 - lr x weight_decay per step; at >= 1 they flip sign "
                         "and grow to NaN)")


def require_at_most(section: str, obj: Any, **maximums: float) -> None:
    """Raise ``ValueError("section.name=v: expected at most m")`` for the first attribute ``name`` of ``obj`` above its
    maximum ``m`` (``None`` skipped; a list's largest item counts): a size whose tensors would not fit in any memory
    (a width of 1e9 asked 548 GB when the model was built, a traceback), checked when the config loads."""
    for name, hi in maximums.items():
        v = getattr(obj, name)
        big = max(v, default=0) if isinstance(v, (list, tuple)) else v
        if big is not None and big > hi:
            raise ValueError(f"{section}.{name}={v}: expected at most {hi}")


def require_positive(section: str, obj: Any, *names: str) -> None:
    """Raise ``ValueError("section.name must be > 0, got v")`` for the first of ``names`` that is <= 0 (``None``
    skipped)."""
    for name in names:
        v = getattr(obj, name)
        if v is not None and v <= 0:
            raise ValueError(f"{section}.{name} must be > 0, got {v}")


def given_keys(cls: type, data: dict, prefix: str = "") -> set[str]:
    """The dotted keys set explicitly in ``data`` for dataclass ``cls``: leaves, and every section named on the way
    (``{"grpo": {"group_size": 4}}`` -> ``{"grpo", "grpo.group_size"}``). A dict-typed field (e.g. ``kwargs``) is one
    leaf."""
    out: set[str] = set()
    hints = get_type_hints(cls)
    for k, v in data.items():
        full = f"{prefix}.{k}" if prefix else str(k)
        out.add(full)
        tp = hints.get(k)
        if isinstance(v, dict) and tp is not None and dataclasses.is_dataclass(tp):
            out |= given_keys(tp, v, full)
    return out


def foreign_keys(cls: type, data: dict, prefix: str = "") -> list[str]:
    """The dotted keys of ``data`` (a saved config dict) that dataclass ``cls`` does not have, nested sections
    included: a config of another job (``env`` in a diffusion config, ``model.hidden`` of the toy's model)."""
    if not isinstance(data, dict):
        return []
    hints, out = get_type_hints(cls), []
    for k, v in data.items():
        full = f"{prefix}.{k}" if prefix else str(k)
        tp = hints.get(k) if isinstance(k, str) else None
        if tp is None:
            out.append(full)
        elif dataclasses.is_dataclass(tp) and isinstance(v, dict):
            out += foreign_keys(tp, v, full)
    return out


def check_same_job(saved: dict, cls: type, head: str, what: str) -> None:
    """Refuse a saved config (a checkpoint's, a run directory's ``run_info.json``) of another job than ``cls``:
    ``ValueError("<head>: ... not a <cls> run ... <what>")``, one line naming the first foreign keys."""
    foreign = foreign_keys(cls, saved)
    if foreign:
        raise ValueError(f"{head}: not a {cls.__name__} run: its config has {', '.join(foreign[:3])}"
                         f"{' ...' if len(foreign) > 3 else ''}, which {cls.__name__} does not (the run of another "
                         f"command, or of another version); {what}")


def _keyed_sections(cfg: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, section)`` of every section inside dataclass config ``cfg`` whose ``inactive_keys`` takes its
    own dotted key (``inactive_keys(prefix)``: the ``log:`` sections, :class:`grpo.trackers.LogConfig`, and the
    ``grpo:`` sections, :class:`grpo.train_step.GRPOConfig`), found by that signature, not by importing them (they
    import this module)."""
    out = []
    for f in dataclasses.fields(cfg) if dataclasses.is_dataclass(cfg) else ():
        v = getattr(cfg, f.name, None)
        if not dataclasses.is_dataclass(v):
            continue
        key = f"{prefix}.{f.name}" if prefix else f.name
        fn = getattr(type(v), "inactive_keys", None)
        if fn is not None and "prefix" in inspect.signature(fn).parameters:
            out.append((key, v))
        else:
            out += _keyed_sections(v, key)
    return out


def check_inactive_keys(cfg: Any, given: set[str], source: str = "config") -> None:
    """Refuse keys that the chosen mode ignores: ``cfg.inactive_keys()`` maps a dotted key (a leaf, or a section
    meaning everything under it) to the reason; raise :class:`ConfigError` naming the first given one. The tracker
    settings of every ``log:`` section (:meth:`grpo.trackers.LogConfig.inactive_keys`: a tracker's setting while
    ``backends`` does not start it) and the advantage settings of every ``grpo:`` section
    (:meth:`grpo.train_step.GRPOConfig.inactive_keys`) are refused the same way, in any job's config
    (:func:`_keyed_sections`); the job's own reason for a key comes first."""
    inactive = dict(getattr(cfg, "inactive_keys", dict)())
    for prefix, section in _keyed_sections(cfg):  # (was: the grpo: sections only where the job's own inactive_keys
        # added them: the toy took grpo.std_mode under grpo.advantage=median)
        for key, why in section.inactive_keys(prefix).items():
            inactive.setdefault(key, why)
    for key, why in inactive.items():
        hits = sorted(g for g in given if g == key or g.startswith(key + "."))
        if hits:
            raise ConfigError(f"{source}: config key '{hits[-1]}' does nothing with {why}; remove it "
                              f"(or choose the mode that uses it)")


# aliases of the public names, for code written against the earlier private helpers
_build = build_config
_merge = merge_dicts


@functools.lru_cache(maxsize=None)
def _line_comments(cls: type) -> dict[str, str]:
    """``{field: comment}`` from ``name: type = value  # comment`` lines in the class body of ``cls``; comment-only
    lines right below such a line, indented deeper than the field, continue its comment."""
    try:
        src = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    names = {f.name for f in dataclasses.fields(cls)}
    lines = src.splitlines()
    body_indent = None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError):
        return {}
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        line = lines[row - 1]
        code = line[:col].rstrip()
        if not code:  # a comment on its own line
            continue
        stripped = code.lstrip()
        indent = len(code) - len(stripped)
        name = stripped.split(":", 1)[0].strip()
        if name in names and ":" in stripped and (body_indent is None or indent == body_indent):
            body_indent = indent
            text = tok.string.lstrip("#").strip()
            # a long help goes on in comment-only lines right below, indented deeper than the field
            while row < len(lines) and lines[row].lstrip().startswith("#") \
                    and len(lines[row]) - len(lines[row].lstrip()) > indent:
                text += " " + lines[row].strip().lstrip("#").strip()
                row += 1
            out.setdefault(name, text)
    return out


def field_help(cls: type) -> dict[str, str]:
    """``{field: one-line help}`` of dataclass ``cls``: ``metadata["help"]``, else the ``# comment`` on the field's
    line (searched through the base classes), else ``""``."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        text = f.metadata.get("help", "") if f.metadata else ""
        if not text:
            for klass in cls.__mro__:
                if dataclasses.is_dataclass(klass) and f.name in _line_comments(klass):
                    text = _line_comments(klass)[f.name]
                    break
        out[f.name] = " ".join(text.split())
    return out


def fields_without_help(cls: type) -> list[str]:
    """``Class.field`` of every field of config ``cls`` (nested sections included) that has no help line
    (:func:`field_help`): what ``--help-config`` would print without a description. Empty for every shipped config."""
    missing: list[str] = []
    helps, hints = field_help(cls), get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            missing += fields_without_help(hints[f.name])
        if f.init and not helps[f.name]:
            missing.append(f"{cls.__name__}.{f.name}")
    return missing


def config_help(cls: type, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """Every leaf key of config ``cls`` (nested sections flattened): ``(dotted key, type, default, help)``."""
    rows: list[tuple[str, str, str, str]] = []
    hints = get_type_hints(cls)
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        full = f"{prefix}.{f.name}" if prefix else f.name
        tp = hints[f.name]
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        if dataclasses.is_dataclass(tp):
            rows += config_help(tp, full)
            continue
        shown = "(required)" if default is dataclasses.MISSING else repr(
            config_to_dict(default) if dataclasses.is_dataclass(default) else default)
        rows.append((full, _type_name(tp), shown, helps[f.name]))
    return rows


def format_config_help(cls: type) -> str:
    """:func:`config_help` as aligned text, one key per line: ``key  type = default  # help``."""
    rows = config_help(cls)
    width = max((len(k) for k, *_ in rows), default=0)
    return "\n".join(f"{k:<{width}}  {t} = {d}" + (f"  # {h}" if h else "") for k, t, d, h in rows)


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


RESUME_FREE = {"resume": "free"}  # field metadata: a key that may change on resume (length, cadence, placement)


def free_on_resume(help: str, **kwargs: Any) -> Any:
    """``dataclasses.field(**kwargs)`` of a config key that may change when a run resumes (:data:`RESUME_FREE`), with
    its one-line ``help``."""
    return dataclasses.field(metadata={**RESUME_FREE, "help": help}, **kwargs)


def resume_free_keys(cls: type, prefix: str = "") -> tuple[str, ...]:
    """The dotted keys of config ``cls`` (nested sections included) whose field metadata marks them free on resume
    (:data:`RESUME_FREE`: iterations, evaluation / checkpoint cadence, the device, the process layout, ...)."""
    out: list[str] = []
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        full = f"{prefix}.{f.name}" if prefix else f.name
        if f.metadata.get("resume") == "free":
            out.append(full)
        elif dataclasses.is_dataclass(hints[f.name]):
            out += resume_free_keys(hints[f.name], full)
    return tuple(out)


def _defaults(cls: type) -> dict:
    """The defaults of config ``cls`` as :func:`config_to_dict` writes them (fields without a default left out)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = config_to_dict(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = config_to_dict(f.default_factory())
    return out


def check_resume_config(saved: dict, cfg: Any, source: str, ignore: tuple[str, ...] = ("resume",)) -> None:
    """Refuse to resume a run under a different config: raise ``ValueError`` (one line) listing every differing key,
    except those starting with one of ``ignore`` or marked free on resume in the config's field metadata
    (:func:`resume_free_keys`: iteration counts, cadence, ...), ``output_dir`` (a run directory that was moved or
    copied resumes where it is), ``log`` (the trackers: a tracker added on resume) and those that
    ``cfg.inactive_keys()`` names (a run saved before such a key was refused may still hold it). A key the saved
    config lacks (added to the code since) counts as its default."""
    check_same_job(saved, type(cfg), f"refusing to resume from {source}", "use another output_dir")
    inactive = tuple(getattr(cfg, "inactive_keys", dict)())  # keys the mode ignores cannot change the run
    skip = (*ignore, *resume_free_keys(type(cfg)), "output_dir:", "log:", "log.")  # where metrics go never changes it
    saved = merge_dicts(_defaults(type(cfg)), saved)
    diff = [d for d in config_diff(saved, config_to_dict(cfg))
            if not d.startswith(skip) and not any(d.startswith((k + ":", k + ".")) for k in inactive)]
    if diff:
        raise ValueError(f"refusing to resume from {source}: config differs in " + "; ".join(diff)
                         + " (use resume=false or another output_dir)")


def dump_config(cfg: Any) -> str:
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False)


__all__ = ["ConfigError", "load_config", "build_config", "merge_dicts", "merge_overrides", "parse_overrides",
           "given_keys", "check_inactive_keys", "require_at_most", "foreign_keys", "check_same_job", "field_help",
           "fields_without_help", "config_help", "format_config_help", "config_to_dict", "config_diff",
           "check_resume_config", "dump_config", "resolve_builtin", "RESUME_FREE", "free_on_resume",
           "resume_free_keys"]


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

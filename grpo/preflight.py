"""Checks every command runs before its first expensive step, so that bad input is one line and nothing is written.

    quiet_third_party_warnings()                          # at a CLI's entry point
    check_writable_dir(cfg.output_dir, "output_dir")      # before anything is created under it
    check_sizes(("grpo.group_size", g, 2), ("rl.iterations", n, 1))   # value >= minimum, else one line naming it
    check_choice("env.tasks", task, known)                # one of ``known``, with a "did you mean"

Each check raises ``ValueError`` with one line that names the key, the value and what was expected
(:func:`grpo.cli.run_command` prints it as ``error: ...`` and exits 2).
"""

from __future__ import annotations

import difflib
import os
import re
import warnings
from pathlib import Path
from typing import Any, Iterable

# third-party warnings that mean nothing to a user of these commands (message regexes)
NOISE = (
    r"CUDA is not available or torch_xla is imported\. Disabling autocast",  # diffusers' Kandinsky, at import, on CPU
)


def quiet_third_party_warnings() -> None:
    """Drop the warnings in :data:`NOISE` (printed by third-party imports on every start)."""
    for msg in NOISE:
        warnings.filterwarnings("ignore", message=msg)


VIRTUAL_FS = ("/proc", "/sys")  # where no command writes its outputs (os.access cannot tell, as root)


def refuse_empty(path: str | os.PathLike, key: str, expected: str) -> None:
    """``ValueError`` naming ``key`` when ``path`` is empty or blank (``Path("")`` means the working directory)."""
    if not str(path).strip():
        raise ValueError(f"{key} is empty ({str(path)!r}); expected {expected}")


def check_writable_dir(path: str | os.PathLike, key: str, shown: str | os.PathLike | None = None) -> Path:
    """``path`` can be created (or exists) as a writable directory: its nearest existing ancestor is a directory
    we may write into. Nothing is created. Returns the path (``shown``: the path the message names instead)."""
    refuse_empty(path, key, "a directory path")  # (Path("") is ".": it would write into the working directory)
    p = Path(path).expanduser()
    probe = p
    shown = Path(shown) if shown is not None else p
    while not probe.exists() and not probe.is_symlink():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise ValueError(f"{key}={str(shown)!r}: cannot create it ({probe} is a file, not a directory)")
    if probe.is_symlink() and not probe.exists():  # (was: pathlib's "Symlink loop" traceback from resolve())
        raise ValueError(f"{key}={str(shown)!r}: cannot create it ({probe} is a symlink that leads nowhere: a loop or "
                         "a missing target); expected a directory path")
    virtual = next((v for v in VIRTUAL_FS if probe.resolve() == Path(v) or Path(v) in probe.resolve().parents), None)
    if virtual is not None:  # the kernel's own files: os.access says yes to root, mkdir / open then fail late
        raise ValueError(f"{key}={str(shown)!r}: {virtual} is the kernel's virtual filesystem (expected a directory on "
                         "a disk)")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{key}={str(shown)!r}: {probe} is not writable (expected a directory this user may write "
                         "into)")
    return p


def check_new_output(path: str | os.PathLike, key: str, force: bool | None) -> Path:
    """``path`` (a file or a directory a command writes) does not exist yet, or is an empty directory, unless
    ``force`` (the command's ``--force``; ``None``: the command has no such option): a job never replaces what is
    there by default."""
    p = Path(path).expanduser()
    if p.is_dir() and not any(p.iterdir()):
        return p
    if (p.exists() or p.is_symlink()) and not force:
        kind = "a non-empty directory" if p.is_dir() else "a file"
        hint = " (pass --force to replace it)" if force is not None else ""
        raise ValueError(f"{key}={str(p)!r} already exists ({kind}); expected a new path{hint}")
    return p


def check_writable_file(path: str | os.PathLike, key: str) -> Path:
    """The file ``path`` can be written: its directory passes :func:`check_writable_dir` and it is not a directory."""
    refuse_empty(path, key, "a file path")  # (Path("") is ".": it would be reported as a directory)
    p = Path(path).expanduser()
    if p.is_dir():
        raise ValueError(f"{key}={str(p)!r}: is a directory (expected a file path)")
    check_writable_dir(p.parent, key, shown=p)
    return p


def check_sizes(*items: tuple[str, float, float]) -> None:
    """Each ``(key, value, minimum)``: ``value >= minimum`` (an int), else one line naming the key."""
    for key, value, minimum in items:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"{key}={value!r}: expected an integer >= {minimum}")


def check_flags(*items: tuple[str, Any, bool, str]) -> None:
    """Each ``(flag, value, ok, expected)``: ``ok`` (the caller's comparison; a nan fails every one), else one line
    ``flag=value: expected <expected>``. For command-line options, checked before the command does anything."""
    for name, value, ok, expected in items:
        if not ok:
            raise ValueError(f"{name}={value}: expected {expected}")


PLAN_FLAGS = {"gpus": "1,8", "gpu_mem": 80.0, "mfu": 0.4}  # --plan's options shared by both CLIs, with defaults
MAX_PLAN_GPUS = 100_000  # the largest --gpus count planned for (a typo beyond it would print a table of noise)


def check_plan_flags(gpus: str, gpu_mem: float, peak_tflops: float | None, mfu: float) -> tuple[int, ...]:
    """``--plan``'s options: ``--gpus`` positive integers (comma-separated; returned as a tuple), ``--gpu-mem`` and
    ``--peak-tflops`` finite and > 0 (``None``: the planner's default), ``0 < --mfu <= 1``; else one line naming the
    flag (a nan or inf fails each)."""
    import math

    try:
        counts = tuple(int(g) for g in str(gpus).split(","))
    except ValueError:
        counts = ()
    check_flags(("--gpus", repr(gpus), bool(counts) and 1 <= min(counts) <= max(counts) <= MAX_PLAN_GPUS
                 and len(set(counts)) == len(counts),  # (a count twice: was its table row printed twice)
                 f"positive integers up to {MAX_PLAN_GPUS}, each once, e.g. 1,8"),
                ("--gpu-mem", gpu_mem, math.isfinite(gpu_mem) and gpu_mem > 0, "a finite number of GB > 0"),
                ("--mfu", mfu, 0 < mfu <= 1, "a fraction in (0, 1]"))
    if peak_tflops is not None:
        check_flags(("--peak-tflops", peak_tflops, math.isfinite(peak_tflops) and peak_tflops > 0,
                     "a finite TFLOP/s > 0"))
    return counts


def check_plan_only(args: Any, flags: dict[str, Any]) -> None:
    """Without ``--plan``, none of its options (``flags``: attribute -> default) may be given: they would be ignored."""
    if getattr(args, "plan", False):
        return
    given = [f"--{k.replace('_', '-')}" for k, d in flags.items() if getattr(args, k, d) != d]
    if given:
        raise ValueError(f"{', '.join(given)} given without --plan, which alone reads them (expected --plan, or "
                         "leave them out)")


def check_kwargs(key: str, fn: Any, kwargs: dict, passed: Iterable[str] = ()) -> None:
    """The keyword arguments ``kwargs`` (a config's ``key``) are parameters of ``fn`` (``passed``: those the caller
    sets itself, not the user's), else one line naming the unknown ones and the accepted ones; each value is of the
    type of its parameter's default (a bool, int, float or str default; a float takes an int, never a nan), else one
    line naming ``key.name``. A ``fn`` taking ``**kwargs`` accepts anything."""
    import inspect

    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    ok = [n for n, p in params.items() if n not in set(passed)
          and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    bad = sorted(str(k) for k in kwargs if k not in ok)
    if bad:
        raise ValueError(f"{key} has unknown option(s) {bad} (expected keyword arguments of "
                         f"{getattr(fn, '__name__', fn)}: {', '.join(ok)})")
    for name, value in kwargs.items():  # of the type of the parameter's default (was: a TypeError deep in the builder)
        default = params[name].default
        tp = type(default) if isinstance(default, (bool, int, float, str)) else None
        if tp is None:
            continue
        from .config import ConfigError, _convert  # noqa: PLC2701 - the config loader's own type check

        try:
            _convert(value, tp, f"{key}.{name}", key)
        except ConfigError as e:
            raise ValueError(str(e).split(": ", 1)[1]) from None


def check_choice(key: str, value: str, known: Iterable[str], hint: str = "") -> None:
    """``value`` is one of ``known``, else one line with the closest names ("did you mean")."""
    known = list(known)
    if value in known:
        return
    close = difflib.get_close_matches(value, known, n=3)
    shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
    raise ValueError(f"{key}={value!r} is not known"
                     + (f"; did you mean {', '.join(map(repr, close))}?" if close else "")
                     + f" (expected one of: {shown}{hint})")


def check_path_exists(key: str, value: str | None, what: str) -> None:
    """A local path given for ``key`` exists (hub ids and ``builtin:`` names are left to their loaders)."""
    if not value or value.startswith("builtin:"):
        return
    looks_local = value.startswith(("/", "./", "../",
                                    "~")) or os.sep in value and Path(value).expanduser().parent.exists()
    if looks_local and not Path(value).expanduser().exists():
        raise ValueError(f"{key}={value!r}: no such path (expected {what})")


def check_hdf5_demo_file(key: str, path: str | os.PathLike, expected: str) -> None:
    """``path`` opens as an HDF5 file with a ``data`` group (the robomimic / LIBERO demo layout), else one line naming
    ``key``, the file and ``expected`` (what it should be). Reads the file's superblock and root only."""
    import h5py

    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO / device: h5py's open blocks on it (was: a hang)
        kind = "a directory" if os.path.isdir(path) else "not a regular file"
        raise ValueError(f"{key}={str(path)!r}: {kind}; expected {expected}")
    try:
        with h5py.File(path, "r") as h:
            ok = "data" in h
    except OSError as e:  # h5py's errors carry no errno: name the file here, not in a traceback
        raise ValueError(f"{key}={str(path)!r}: not a readable HDF5 demo file ({' '.join(str(e).split())}); expected "
                         f"{expected}") from None
    if not ok:
        raise ValueError(f"{key}={str(path)!r}: no 'data' group; expected {expected}")


def check_regular_file(path: str | os.PathLike, expected: str) -> None:
    """``path`` (when it exists) is a regular file: a FIFO or a device where a run keeps a file (``state.json``,
    ``run_info.json``, weights, the ``latest`` pointer) blocks the open that reads it (was: a hang); one line."""
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
        raise ValueError(f"{os.fsdecode(path)}: not a regular file (a FIFO or a device); expected {expected}")


SAFETENSORS_DTYPES = frozenset(("BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
                                "I64", "U64", "C64"))  # the dtypes a safetensors header may name


def check_safetensors_file(path: Path) -> None:
    """``path`` is a complete safetensors file: its 8-byte header length, JSON header and data size agree (reads the
    header only). A truncated or corrupt file: one line naming it."""
    import json
    import struct

    check_regular_file(path, "a safetensors file")
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8:
                raise ValueError
            header = json.loads(f.read(n))
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (ValueError, KeyError, TypeError, AttributeError, struct.error, UnicodeDecodeError):  # (AttributeError: a
        # header that is JSON but not an object; was its traceback)
        raise ValueError(f"{path}: corrupt safetensors file ({size} bytes; its header cannot be read)") from None
    bad = next((k for k, v in header.items() if k != "__metadata__" and v.get("dtype") not in SAFETENSORS_DTYPES), None)
    if bad is not None:  # (was: safetensors' "unknown variant" traceback when the weights were loaded)
        raise ValueError(f"{path}: corrupt safetensors file (tensor {bad!r} has dtype {header[bad].get('dtype')!r}, "
                         "not a safetensors dtype)")
    if size != 8 + n + end:
        raise ValueError(f"{path}: truncated or corrupt safetensors file ({size} bytes, its header says {8 + n + end})")


def check_checkpoint_dir(path: str | os.PathLike, keys: tuple[str, ...] = ()) -> None:
    """A checkpoint directory (grpo.checkpoint layout) is complete: ``state.json`` parses, its ``step`` is an integer
    >= 0 (the number of a ``step_<n>`` directory), its state holds ``keys`` (e.g. the trainers' ``config``), every
    safetensors file is whole. Nothing is read beyond headers."""
    import json

    p = Path(path)
    state = p / "state.json"
    if not state.exists():
        raise ValueError(f"{p}: no state.json (an incomplete or corrupt checkpoint; expected a step_* directory "
                         "written by the trainer)")
    check_regular_file(state, "the checkpoint's JSON state, as the trainer writes it")
    try:
        meta = json.loads(state.read_text())
    except ValueError as e:  # (a UnicodeDecodeError too)
        raise ValueError(f"{state}: corrupt checkpoint state ({' '.join(str(e).split())})") from None
    if not (isinstance(meta, dict) and isinstance(meta.get("step"), int) and isinstance(meta.get("state"), dict)):
        got = f"keys {sorted(map(str, meta))[:8]}" if isinstance(meta, dict) else f"a JSON {type(meta).__name__}"
        if isinstance(meta, dict) and {"step", "state"} <= set(meta):  # both there, of the wrong type: say which
            got = (f"'step' {meta['step']!r}" if not isinstance(meta["step"], int)
                   else f"'state' of type {type(meta['state']).__name__}")
        raise ValueError(f"{state}: corrupt checkpoint state (expected a JSON object with 'step' and 'state', as the "
                         f"trainer writes; got {got})")
    step, named = meta["step"], re.fullmatch(r"step_(\d+)", p.name)
    if isinstance(step, bool) or step < 0 or (named and int(named.group(1)) != step):  # (was: accepted, resumed and
        # evaluated as the directory's step whatever it said)
        raise ValueError(f"{state}: corrupt checkpoint state ('step' is {step!r}; expected "
                         + (f"{int(named.group(1))}, the number of {p.name})" if named else "an integer >= 0)"))
    skeleton = meta["state"].get("__dict__")
    missing = [k for k in keys if not (isinstance(skeleton, dict) and k in skeleton)]
    if missing:  # (was: the trainers' KeyError: "error: config")
        raise ValueError(f"{state}: corrupt checkpoint state (it holds no {missing[0]!r}, which every checkpoint of "
                         "this command saves)")
    for f in sorted(p.glob("*.safetensors")):
        check_safetensors_file(f)


def read_pointer(pointer: Path) -> str:
    """The checkpoint name a ``latest`` pointer file holds (one line, e.g. ``step_000010``); a pointer that is not
    text, is empty or names a path outside its folder: one line naming it."""
    check_regular_file(pointer, "one line naming a step_* directory beside it")
    try:
        name = pointer.read_text().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{pointer}: unreadable checkpoint pointer ({type(e).__name__}); expected one line naming a "
                         "step_* directory beside it") from None
    if not name or Path(name).name != name or name in (".", "..") or not re.fullmatch(r"step_\d+", name):
        # (a pointer naming best/ or another folder: was resumed from there, its later steps overwritten)
        raise ValueError(f"{pointer} holds {name!r}; expected the name of a step_* directory beside it")
    return name


def check_latest_pointer(root: str | os.PathLike,
                         advice: str = " (expected the latest checkpoint the run wrote; name a step_* directory "
                                       "instead)") -> None:
    """``root/latest`` (when there) names a complete checkpoint: a pointer to a missing or incomplete one is refused
    (one line, ending in ``advice``: what to do instead), never silently replaced by an older checkpoint."""
    from .checkpoint import LATEST

    pointer = Path(root) / LATEST
    if pointer.exists():  # (a FIFO too: read_pointer refuses it, latest_checkpoint's read would block)
        named = Path(root) / read_pointer(pointer)
        if not (named / "state.json").exists():
            raise ValueError(f"{named} (named by {pointer}) has no state.json, an incomplete or corrupt checkpoint"
                             f"{advice}")


def resolve_checkpoint(path: str | os.PathLike, missing: str = "checkpoint not found",
                       keys: tuple[str, ...] = ("config",)) -> Path:
    """The checkpoint directory that ``path`` (a run directory, its ``checkpoints/`` folder, a ``step_*`` or ``best``
    directory) names, checked complete (:func:`check_latest_pointer`, :func:`check_checkpoint_dir`) before anything
    loads it: what ``eval`` and ``export`` read. A missing path (``missing: <path>``), or one holding no checkpoint:
    one line."""
    from .checkpoint import latest_checkpoint

    p = Path(path)
    if not str(path):
        raise ValueError("the checkpoint path is empty (expected a run directory, its checkpoints/ folder or a step_* "
                         "directory)")
    if not p.exists():
        raise FileNotFoundError(f"{missing}: {p}")
    if (p / "state.json").exists():
        check_checkpoint_dir(p, keys)
        return p
    for root in (p, p / "checkpoints"):
        if root.is_dir():
            check_latest_pointer(root)
            found = latest_checkpoint(root)
            if found is not None:
                check_checkpoint_dir(found, keys)
                return found
    raise FileNotFoundError(f"{p} holds no checkpoint (expected a run directory with checkpoints/step_*, its "
                            "checkpoints/ folder or a step_* directory)")


RESUME_ADVICE = "move it away to resume from an older checkpoint, or set resume=false"


def check_resumable(ckpt_root: str | os.PathLike, cfg: Any = None, advice: str = RESUME_ADVICE,
                    keys: tuple[str, ...] | None = None) -> None:
    """Before resuming from ``ckpt_root``: the checkpoint the run would resume from is complete. A corrupt one is
    reported (one line) and left as it is, never deleted or overwritten; the user moves it away or starts afresh.
    With ``cfg`` (the run's config), its saved config must match too (:func:`grpo.config.check_resume_config`, as
    the trainer's resume checks it; read from ``state.json`` alone), so that a refused resume stops before a model is
    built (the trainers load the checkpoint before they open their logs, so a refusal there writes nothing either)."""
    from .checkpoint import latest_checkpoint, read_saved_config

    root = Path(ckpt_root)
    if not root.is_dir():
        return
    try:
        check_latest_pointer(root, advice="")
        latest = latest_checkpoint(root)
        if latest is not None:  # (``keys``: the state entries the resume reads; default: a config, when given one)
            check_checkpoint_dir(latest, ("config",) if keys is None and cfg is not None else keys or ())
    except ValueError as e:
        raise ValueError(f"resume: {e}; it was left untouched: {advice}") from None
    if latest is not None and cfg is not None:
        from .config import check_resume_config

        saved = read_saved_config(latest)
        if saved is not None:
            check_resume_config(saved, cfg, str(latest))


SAVED_NOT_RUN = ("state.json", "config.json", "model_index.json")  # a checkpoint / a saved policy / a saved pipeline


def check_not_inside_a_run(out: str | os.PathLike, key: str = "output_dir") -> None:
    """``out`` is not inside another run's directory (an ancestor holding ``run_info.json``: its ``checkpoints/``, a
    ``step_*`` checkpoint, its ``policy/``) and is not itself a checkpoint or a saved model (:data:`SAVED_NOT_RUN`
    without ``run_info.json``): a run there mixed its files with the other one's (was: written into it)."""
    p = Path(out).expanduser()
    try:
        resolved = p.resolve()
    except (OSError, RuntimeError):  # a symlink loop: check_writable_dir's to report
        return
    run = next((a for a in resolved.parents if (a / "run_info.json").is_file()), None)
    if run is not None:
        raise ValueError(f"{key}={str(out)!r} is inside the run directory {str(run)!r} (this run's files would mix "
                         "with that run's); expected a directory outside any run")
    if p.is_dir() and not (p / "run_info.json").exists():
        saved = next((n for n in SAVED_NOT_RUN if (p / n).is_file()), None)
        if saved is not None:
            raise ValueError(f"{key}={str(out)!r} holds {saved}: a checkpoint or a saved model, not a run directory; "
                             "expected a new directory, or a run of this command to resume")


def check_bench_out(out: str | os.PathLike, key: str = "--out") -> None:
    """A bench's output folder (it writes its own runs and files there): writable (:func:`check_writable_dir`), not
    inside another run (:func:`check_not_inside_a_run`) and not a run directory itself (was: a bench's encoder files
    and runs written among a run's files)."""
    check_writable_dir(out, key)
    check_not_inside_a_run(out, key)
    if (Path(out).expanduser() / "run_info.json").is_file():
        raise ValueError(f"{key}={str(out)!r} is a run directory (it holds run_info.json); expected a folder for the "
                         "bench's own runs and files")


def check_not_in_a_checkpoint(path: str | os.PathLike, key: str) -> None:
    """The file ``path`` a command writes is not inside a run's checkpoint (a directory holding ``state.json``) or its
    ``checkpoints/`` folder: with ``--force`` it replaced a checkpoint's weights (was: ``vla-rl fit-encoder
    output=<run>/checkpoints/step_N/model.safetensors --force`` overwrote the run's policy)."""
    try:
        parent = Path(path).expanduser().resolve().parent
    except (OSError, RuntimeError):  # a symlink loop: check_writable_file's to report
        return
    for a in (parent, *parent.parents):
        if (a / "state.json").is_file() or a.name == "checkpoints" and (a.parent / "run_info.json").is_file():
            raise ValueError(f"{key}={str(path)!r} is inside the checkpoint directory {str(a)!r} of a run (it would "
                             "replace or mix with the checkpoint's files); expected a path outside any checkpoint")


RUN_LAYOUT = {"checkpoints": "dir", "metrics.jsonl": "file", "run_info.json": "file"}  # every job's


def check_run_layout(out: str | os.PathLike, key: str = "output_dir") -> None:
    """The paths a run keeps in ``out`` (:data:`RUN_LAYOUT`), where they exist, are of their kind: a file where the
    run keeps a folder, or the reverse, stopped the run only when it reached it (was: ``checkpoints`` a file, the
    metrics and the run record written first; ``metrics.jsonl`` a folder, TensorBoard's events first); one line."""
    for name, kind in RUN_LAYOUT.items():
        p = Path(out).expanduser() / name
        if kind == "dir" and (p.is_file() or (p.exists() and not p.is_dir())):
            raise ValueError(f"{key}={str(out)!r}: {name} is a file, not a folder (the run keeps its {name}/ folder "
                             "there); expected a run directory of this command, or a new one")
        if kind == "file" and p.is_dir():
            raise ValueError(f"{key}={str(out)!r}: {name} is a folder, not a file (the run writes its {name} there); "
                             "expected a run directory of this command, or a new one")


def check_run_kind(out: str | os.PathLike, cls: type, key: str = "output_dir") -> None:
    """``out`` holds no run of another job: a ``run_info.json`` there (:mod:`grpo.runinfo`, written by every job's
    logger) whose config has keys that config class ``cls`` has not (:func:`grpo.config.foreign_keys`) belongs to
    another command's run, which this one would write into (``vla-rl loop`` into a ``vla-rl train`` run emptied its
    metrics.jsonl): refused, one line, before anything is written. An unreadable ``run_info.json`` is left to the
    resume checks."""
    import json

    from .config import check_same_job

    check_not_inside_a_run(out, key)
    info = Path(out) / "run_info.json"
    check_regular_file(info, "the run's JSON record, as every job writes it")
    check_run_layout(out, key)
    try:
        saved = json.loads(info.read_text()).get("config") if info.is_file() else None
    except (OSError, ValueError, AttributeError):
        return
    if isinstance(saved, dict):
        check_same_job(saved, cls, f"{key}={str(out)!r} holds a run of another job ({info.name})",
                       "expected a new directory, or a run of this command to resume")


def check_custom_reward(name: str, kwargs: dict, build, batch, check_output) -> None:
    """A user's ``module:attr`` reward, called once on ``batch`` (e.g. random images, the config's prompts) before
    the run: it must not raise and must return a finite ``total`` of one value per sample (``check_output``, the
    caller's ``rewards.check_output``: grpo does not import rewards). Built-in rewards are not probed (they are
    tested, and some load large models)."""
    if ":" not in name:
        return
    fn = build(name, **kwargs)
    try:
        out = fn(batch)
    except Exception as e:  # noqa: BLE001 - any failure of user code is reported as one line
        raise ValueError(f"reward.name={name!r} raised on a probe batch of {len(batch)} samples before the run: "
                         f"{type(e).__name__}: {' '.join(str(e).split())}") from None
    try:
        check_output(out, len(batch), name, nonfinite="raise")
    except (TypeError, ValueError) as e:
        raise ValueError(f"reward.name={name!r} on a probe batch before the run: {' '.join(str(e).split())} "
                         "(expected finite values, one per sample)") from None



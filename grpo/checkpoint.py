"""Atomic checkpoints: safetensors for tensors, JSON for everything else, RNG states included.

Layout of ``<root>/step_000120/``::

    model.safetensors        each top-level entry that is a flat {name: Tensor} dict (weights, LoRA,
    ema.safetensors          EMA, ...) is written under its own name, readable by any safetensors tool
    state.safetensors        the tensors of every other entry (optimizer state, RNG states, ...)
    state.json               the rest: structure, numbers, strings; tensors appear as {"__tensor__": key}
    <other files>            written by the caller's ``files`` writers (e.g. the LoRA in diffusers' format, so that
                             ``pipe.load_lora_weights(<checkpoint dir>)`` loads it); listed in state.json and not
                             read back by :func:`load_checkpoint`
    <root>/latest            a text file naming the newest complete checkpoint directory

A checkpoint is written into ``step_000120.tmp-<pid>`` and renamed into place only when complete, then
``latest`` is replaced by an atomic rename; a crash or a full disk mid-save leaves the previous checkpoint
and pointer untouched. Loading never unpickles: safetensors and JSON only.

Best and last: beside the rolling ``step_*`` checkpoints, :func:`save_best` keeps the checkpoint that scored best
on the run's evaluation metric as ``<root>/best``, a symlink to ``best-step_000125/`` (same layout, its state
holding ``"best": {"metric", "value", "iteration", "mode"}``). The new directory is written completely, then the
link is swapped by an atomic rename, then the previous best directory is removed: at every instant
``<root>/best`` is a complete checkpoint (or absent). ``keep_last`` never removes it; :func:`load_checkpoint`
reads ``<root>/best`` like any checkpoint directory.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import torch
from safetensors.torch import load_file, save_file

LATEST = "latest"
BEST = "best"


# ---- RNG -------------------------------------------------------------------------------------
def capture_rng_state() -> dict[str, Any]:
    """States of python ``random``, numpy's global RNG, torch CPU and every CUDA device."""
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "python": random_state_to_json(random.getstate()),
        "numpy": {"kind": np_state[0], "keys": np_state[1].astype(np.int64).tolist(), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = [s for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    random.setstate(random_state_from_json(state["python"]))
    n = state["numpy"]
    np.random.set_state((n["kind"], np.asarray(n["keys"], dtype=np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    torch.set_rng_state(state["torch"].to(torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.to(torch.uint8) for s in state["cuda"]])


def random_state_to_json(st: tuple) -> list:
    """A ``random.Random().getstate()`` tuple as JSON-able ``[version, [625 ints], gauss]``."""
    return [st[0], list(st[1]), st[2]]


def random_state_from_json(js: list) -> tuple:
    """Inverse of :func:`random_state_to_json`, for ``random.setstate`` / ``Random.setstate``."""
    return (js[0], tuple(js[1]), js[2])


# ---- (de)serialization of nested state --------------------------------------------------------
def _flatten(obj: Any, tensors: dict[str, torch.Tensor], path: str) -> Any:
    if isinstance(obj, torch.Tensor):
        key = path or "root"
        tensors[key] = obj
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype)}
    if isinstance(obj, Mapping):
        if all(isinstance(k, str) for k in obj):
            return {"__dict__": {k: _flatten(v, tensors, f"{path}.{k}" if path else k) for k, v in obj.items()}}
        return {"__items__": [[k, _flatten(v, tensors, f"{path}.{k}")] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_flatten(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_flatten(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot checkpoint value of type {type(obj).__name__} at {path!r}")


def _unflatten(obj: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_unflatten(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__ndarray__" in obj:
            return np.asarray(obj["__ndarray__"], dtype=obj["dtype"])
        if "__dict__" in obj:
            return {k: _unflatten(v, tensors) for k, v in obj["__dict__"].items()}
        if "__items__" in obj:
            return {k: _unflatten(v, tensors) for k, v in obj["__items__"]}
        if "__tuple__" in obj:
            return tuple(_unflatten(v, tensors) for v in obj["__tuple__"])
    return obj


def _is_tensor_dict(obj: Any) -> bool:
    return isinstance(obj, Mapping) and bool(obj) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()
    )


def _save_tensors(tensors: Mapping[str, torch.Tensor], path: Path) -> None:
    seen: set[int] = set()
    out = {}
    for k, v in tensors.items():
        v = v.detach().to("cpu")
        ptr = v.untyped_storage().data_ptr() if v.numel() else -1
        out[k] = v.clone().contiguous() if ptr in seen or not v.is_contiguous() else v  # tied/strided -> own copy
        if ptr != -1:
            seen.add(ptr)
    save_file(out, str(path))


# ---- public API ----------------------------------------------------------------------------
Writers = Mapping[str, Callable[[Path], None]]  # file name -> writes that file into the given (temporary) directory


def save_checkpoint(root: str | os.PathLike, step: int, state: Mapping[str, Any], keep_last: int | None = 3,
                    files: Writers | None = None) -> Path:
    """Write ``state`` as checkpoint ``<root>/step_{step:06d}`` atomically; return its path.

    ``state`` maps names to: flat ``{str: Tensor}`` dicts (own safetensors file), or any nesting of
    dicts/lists/tuples of tensors, numpy arrays, numbers, strings and None.
    ``keep_last`` older checkpoints are kept (``None`` keeps all). ``files``: extra files for other readers, each
    written by its function into the directory before the rename (so they are part of the atomic checkpoint).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    _write_dir(final, step, state, files)
    _write_atomic(root / LATEST, final.name)
    if keep_last is not None:
        for old in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _write_dir(final: Path, step: int, state: Mapping[str, Any], files: Writers | None = None) -> None:
    """Write ``state`` (and the ``files``) into ``final`` through ``final.tmp-<pid>`` and one rename (the old
    ``final`` is replaced)."""
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tmp.mkdir()
        rest: dict[str, Any] = {}
        for name, value in state.items():
            if _is_tensor_dict(value):
                _save_tensors(value, tmp / f"{name}.safetensors")
            else:
                rest[name] = value
        tensors: dict[str, torch.Tensor] = {}
        skeleton = _flatten(rest, tensors, "")
        if tensors:
            _save_tensors(tensors, tmp / "state.safetensors")
        for name, write in (files or {}).items():
            if (tmp / name).exists():
                raise ValueError(f"checkpoint file {name!r} is written twice (a state entry of that name exists)")
            write(tmp)
        with open(tmp / "state.json", "w") as f:
            json.dump({"step": step, "state": skeleton, **({"files": sorted(files)} if files else {})}, f)
            f.flush()
            os.fsync(f.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ---- best checkpoint -------------------------------------------------------------------------
def improves(best: Mapping[str, Any] | None, value: float, mode: str = "max") -> bool:
    """Whether ``value`` beats the record ``best`` (``{"value": ...}``; None: no best yet). A NaN never improves;
    ties keep the earlier one. ``mode``: ``"max"`` (success rate, reward) or ``"min"`` (a loss)."""
    if value != value:  # NaN
        return False
    if best is None:
        return True
    return value > best["value"] if mode == "max" else value < best["value"]


def best_record(metric: str, value: float, iteration: int, mode: str = "max") -> dict[str, Any]:
    """The ``"best"`` entry a best checkpoint's state holds."""
    return {"metric": metric, "value": float(value), "iteration": int(iteration), "mode": mode}


def publish_best(root: str | os.PathLike, name: str, write: Any) -> Path:
    """Make ``<root>/best`` point at a new directory ``<root>/<name>`` that ``write(path)`` fills completely first.

    The link is replaced by an atomic rename; older ``best-*`` directories are removed afterwards. Returns the new
    directory. Used for training checkpoints (:func:`save_best`) and for any other artefact a job keeps as its best
    (e.g. the World-VLA-Loop's best policy directory)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    link = root / BEST
    if link.is_symlink() and os.readlink(link) == name:  # the same iteration again: re-point before rewriting
        os.unlink(link)
    write(final)
    tmp_link = root / f".{BEST}.tmp-{os.getpid()}"
    if tmp_link.is_symlink() or tmp_link.exists():
        os.unlink(tmp_link)
    os.symlink(name, tmp_link)
    os.replace(tmp_link, link)
    for old in root.iterdir():
        if old.name.startswith(f"{BEST}-") and old.name != name and ".tmp" not in old.name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def save_best(root: str | os.PathLike, step: int, state: Mapping[str, Any], record: Mapping[str, Any],
              files: Writers | None = None) -> Path:
    """Write ``state`` (plus ``"best": record``, and the ``files`` as :func:`save_checkpoint` does) as ``<root>/best``
    (see the module docstring); returns its path."""
    full = {**state, "best": dict(record)}
    return publish_best(root, f"{BEST}-step_{step:06d}", lambda d: _write_dir(d, step, full, files))


def best_checkpoint(root: str | os.PathLike) -> Path | None:
    """``<root>/best`` when it holds a complete checkpoint, else None."""
    p = Path(root) / BEST
    return p if (p / "state.json").exists() else None


def read_best_record(root: str | os.PathLike) -> dict[str, Any] | None:
    """The ``"best"`` record of ``<root>/best`` (JSON only, no tensors read), or None."""
    p = best_checkpoint(root)
    if p is None:
        return None
    skeleton = _read_meta(p)["state"].get("__dict__", {}).get("best")
    return None if skeleton is None else _unflatten(skeleton, {})


def nonfinite_tensors(state: Mapping[str, Any]) -> list[str]:
    """Names of the floating-point tensors of a weight ``state`` (``{name: tensor}``) that hold NaN or inf: a damaged
    checkpoint, which the loaders refuse rather than train or evaluate from (non-tensor values are skipped)."""
    return [k for k, v in state.items() if torch.is_tensor(v) and v.is_floating_point() and not torch.isfinite(v).all()]


def read_saved_config(path: str | os.PathLike) -> dict[str, Any] | None:
    """The run config that checkpoint directory ``path`` saved (its state's ``"config"`` entry, the trainer's
    :func:`grpo.config.config_to_dict`), read from ``state.json`` alone: no tensors are loaded. None when the
    checkpoint holds no config.

    ``state.json`` is ``{"step": int, "state": skeleton, "files"?: [names]}``; the skeleton of a state mapping is
    ``{"__dict__": {name: value}}``, a config value nests only dicts, lists, numbers, strings and None (decoded as
    :func:`load_checkpoint` decodes them). A skeleton that is not a mapping (a damaged file) reads as no config; a
    file that is not JSON raises ``ValueError`` (:func:`grpo.preflight.check_checkpoint_dir` reports it first)."""
    state = _read_meta(Path(path)).get("state")
    saved = state.get("__dict__", {}).get("config") if isinstance(state, dict) else None
    return None if saved is None else _unflatten(saved, {})


def _read_meta(path: Path) -> dict[str, Any]:
    """The parsed ``state.json`` of checkpoint directory ``path`` (layout: :func:`read_saved_config`)."""
    with open(path / "state.json") as f:
        return json.load(f)


def _write_atomic(path: Path, text: str) -> None:
    with atomic_output(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


@contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` (``.<name>.tmp-<pid>``) to write a file into; when the block ends without
    an error it is renamed onto ``path`` in one step, so neither a reader nor a killed writer ever leaves half a file
    there; on an error (or a signal's exception) it is removed and ``path`` is as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def list_checkpoints(root: str | os.PathLike) -> list[Path]:
    """Complete checkpoint directories under ``root``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step_") and ".tmp" not in p.name
                  and (p / "state.json").exists())


def latest_checkpoint(root: str | os.PathLike) -> Path | None:
    """The checkpoint named by ``<root>/latest`` (or the newest complete one), or None."""
    root = Path(root)
    pointer = root / LATEST
    if pointer.exists():
        cand = root / pointer.read_text().strip()
        if (cand / "state.json").exists():
            return cand
    ckpts = list_checkpoints(root)
    return ckpts[-1] if ckpts else None


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint directory (or a run root, meaning its latest) back into the ``state`` mapping."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if not (path / "state.json").exists():
        latest = latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"{path} holds no checkpoint (expected state.json or step_* directories)")
        path = latest
    meta = _read_meta(path)
    tensors = load_file(str(path / "state.safetensors"),
                        device=str(map_location)) if (path / "state.safetensors").exists() else {}
    state = _unflatten(meta["state"], tensors)
    others = set(meta.get("files", ()))  # files for other readers (save_checkpoint's ``files``)
    for f in sorted(path.glob("*.safetensors")):
        if f.name != "state.safetensors" and f.name not in others:
            state[f.stem] = load_file(str(f), device=str(map_location))
    state["__step__"] = meta["step"]
    state["__path__"] = str(path)
    return state

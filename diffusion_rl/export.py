"""Trained LoRA out of a run, in the format diffusers reads; and a diffusers LoRA into a run (``model.lora_init``).

``diffusion-rl export RUN_DIR OUT [--merge]`` writes::

    OUT/pytorch_lora_weights.safetensors   keys "transformer.<module>.lora_A.weight" / "...lora_B.weight" (the
                                           diffusers/peft names, i.e. the run's names minus peft's ".default" adapter
                                           segment), the peft LoraConfig (r, lora_alpha, target_modules) in the
                                           safetensors header under "lora_adapter_metadata", as
                                           ``<Pipeline>.save_lora_weights`` writes it, so
                                           ``pipe.load_lora_weights(OUT)`` rebuilds the same adapter with the same
                                           scale alpha / r
    OUT/export.json                        provenance: run, checkpoint, iteration, which weights (EMA or live), pipeline
    OUT/merged/ (--merge)                  the whole pipeline with ``W <- W + (alpha / r) B A`` folded into the
                                           denoiser (diffusers' fuse_lora), via ``save_pretrained``: loads with
                                           ``<Pipeline>.from_pretrained(OUT/merged)`` and no peft at all

The weights exported are the EMA weights when the run kept an EMA (they are what the run's evaluation scores),
else the live ones; ``weights="live"`` forces the latter. The LoRA-only export loads no base weights; ``--merge``
loads the base pipeline named by the run's ``model`` config (before anything is written).

Before OUT is written the LoRA is checked (:func:`check_lora_tensors`): finite, A/B in pairs of rank
``model.lora.rank`` and, where the base model's structure is cheap to get (:func:`denoiser_modules`: the tiny
in-code models, a local diffusers directory built from its ``config.json`` on the meta device, the pipeline
``--merge`` loads), of the in/out sizes of the modules they name. A hub id or a single-file checkpoint without
``--merge`` gets the first checks alone (its config would need the network or parsing the whole file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import torch

from .families import pipeline_class
from .lora_files import EXPERT_FILES, lora_metadata, write_diffusers_lora


def load_run(run_dir: str | Path, merge: bool = False):
    """``(config, state)`` of a run directory, its ``checkpoints/`` folder, or one ``step_*`` checkpoint.

    Only what the export uses is validated: the run's reward (which may live in a package this shell cannot
    import) is not built into the config (its section is left at the defaults; the checkpoint keeps the real one),
    nor is a user's ``model.adapter`` class unless ``merge`` loads the base pipeline."""
    from grpo.checkpoint import load_checkpoint
    from grpo.config import build_config as build_cfg
    from grpo.preflight import resolve_checkpoint

    from .config import DiffusionRLConfig

    # a missing / truncated / corrupt checkpoint, a stale latest: one line naming it
    p = resolve_checkpoint(run_dir, "run directory not found")
    state = load_checkpoint(p)
    if "trainable" not in state:  # e.g. a vla-rl checkpoint, or one whose LoRA file is gone
        other = (" (a vla-rl checkpoint)" if "policy_config" in state
                 else " (expected trainable.safetensors beside state.json)")
        raise ValueError(f"{p} holds no LoRA weights to export: it is not a complete diffusion-rl checkpoint{other}")
    used = {k: v for k, v in state["config"].items() if k != "reward"}
    if not merge and isinstance(used.get("model"), dict):
        used["model"] = {k: v for k, v in used["model"].items() if k != "adapter"}
    return build_cfg(DiffusionRLConfig, used, "", str(p)), state


def export_run(run_dir: str | Path, out: str | Path, merge: bool = False,
               weights: Literal["auto", "ema", "live"] = "auto") -> dict:
    """Write the run's LoRA (and with ``merge`` the fused pipeline) under ``out``; returns the provenance dict."""
    cfg, state = load_run(run_dir, merge)
    if weights == "ema" and "ema" not in state:
        raise ValueError(f"--weights ema: the run kept no EMA (train.ema_decay={cfg.train.ema_decay})")
    use_ema = weights in ("auto", "ema") and "ema" in state
    src = state["ema"] if use_ema else state["trainable"]
    pipe = None
    if merge:  # the base pipeline first: a model that cannot load leaves OUT unwritten
        from .adapters import load_pipeline

        pipe = load_pipeline(cfg.model)
    denoisers = denoiser_modules(cfg.model, pipe)
    try:
        check_lora_tensors(src, cfg.model.lora.rank, denoisers)
    except ValueError as e:
        raise ValueError(f"export: {state['__path__']} ({'EMA' if use_ema else 'live'} weights): {e}; nothing "
                         "written") from None
    cls = pipeline_class(cfg.model.kind)
    out = Path(out)
    meta = lora_metadata(cfg.model.lora, cfg.model.kind)
    experts = write_diffusers_lora(out, src, cfg.model.lora, cfg.model.kind)  # Wan 2.2 A14B: one file per expert
    info = {"run": str(Path(run_dir).resolve()), "checkpoint": state["__path__"], "iteration": int(state["iteration"]),
            "weights": "ema" if use_ema else "live", "pipeline": cls.__name__, "base_model": cfg.model.path,
            "lora": {"rank": cfg.model.lora.rank, "alpha": cfg.model.lora.alpha, "targets": meta["target_modules"],
                     "tensors": sum(experts.values())},
            "files": {c: EXPERT_FILES[c] for c in experts}, "merged": None}
    if merge:
        info["merged"] = str(out / "merged")
        merge_into_pipeline(cfg.model, out, out / "merged", pipe)
    (out / "export.json").write_text(json.dumps(info, indent=2))
    return info


def merge_into_pipeline(model_cfg, lora_dir: str | Path, dest: str | Path, pipe=None) -> None:
    """Load the base pipeline of ``model_cfg`` (tiny, directory or single file; or take ``pipe``, loaded from it),
    load the exported LoRA the stock way (``load_lora_weights``), fold it into the weights (``fuse_lora``), drop the
    adapter and ``save_pretrained``."""
    from .adapters import load_pipeline

    pipe = pipe if pipe is not None else load_pipeline(model_cfg)
    comps = [c for c, f in EXPERT_FILES.items() if (Path(lora_dir) / f).is_file()]
    for c in comps:  # the second expert's file (Wan 2.2 A14B) loads into transformer_2
        pipe.load_lora_weights(str(lora_dir), weight_name=EXPERT_FILES[c], adapter_name="grpo",
                               **({"load_into_transformer_2": True} if c == "transformer_2" else {}))
    pipe.fuse_lora(components=comps, lora_scale=1.0, adapter_names=["grpo"])
    pipe.unload_lora_weights()
    pipe.save_pretrained(str(dest))


def denoiser_modules(model_cfg, pipe=None) -> dict[str, torch.nn.Module]:
    """The run's denoiser(s) by pipeline component (``transformer``, Wan 2.2 A14B's ``transformer_2``), for the
    export's shape check, where that is cheap: ``pipe``'s (``--merge`` loads the base pipeline anyway); the tiny
    in-code models (built, a fraction of a second); a local diffusers directory's, built from its ``config.json`` on
    the meta device (no weights read). ``{}`` for a hub id or a single-file checkpoint (reading their config means
    the network or the whole file's parsing): the export then checks the LoRA's own shapes alone."""
    if pipe is None and model_cfg.path is None:
        from .adapters import load_pipeline

        pipe = load_pipeline(model_cfg)
    if pipe is not None:
        return {c: m for c in EXPERT_FILES if isinstance(m := getattr(pipe, c, None), torch.nn.Module)}
    from .adapters import resolve_model_path
    from .checkpoints import is_single_file

    if is_single_file(model_cfg.path):
        return {}
    root = resolve_model_path(model_cfg.path)
    try:
        index = json.loads((root / "model_index.json").read_text())
    except (OSError, ValueError):
        return {}  # a hub id (or no pipeline there): nothing local to read
    import diffusers

    out = {}
    for comp in EXPERT_FILES:
        entry = index.get(comp) if isinstance(index, dict) else None
        cls = getattr(diffusers, entry[1], None) if isinstance(entry, list) and len(entry) == 2 and entry[1] else None
        if cls is None or not (root / comp / "config.json").is_file():
            continue
        try:
            with torch.device("meta"):  # the module tree and its parameter shapes, no memory, no weights read
                out[comp] = cls.from_config(cls.load_config(str(root / comp)))
        except Exception:  # noqa: BLE001 - a model that cannot be built on the meta device: its LoRA's own checks
            continue
    return out


def check_lora_tensors(trainable: dict[str, torch.Tensor], rank: int,
                       denoisers: dict[str, torch.nn.Module] | None = None) -> None:
    """Refuse (``ValueError``, one line) a run's LoRA weights that no model of the run's config can load: a module
    with ``lora_A`` but no ``lora_B`` (or the reverse); ``A`` not ``[rank, in, ...]`` or ``B`` not ``[out, rank, ...]``
    (``rank`` = ``model.lora.rank``); tensors that are not floating point; NaN/inf values; and, for each component
    of ``denoisers`` (:func:`denoiser_modules`), a module it does not have, or ``in`` / ``out`` other than its weight's
    ``[out, in, ...]``."""
    from grpo.checkpoint import nonfinite_tensors

    from .lora_files import split_experts, to_diffusers_keys

    ints = [k for k, v in trainable.items() if not v.is_floating_point()]
    if ints:
        raise ValueError(f"LoRA tensor {ints[0]!r} is {str(trainable[ints[0]].dtype).removeprefix('torch.')} "
                         f"({len(ints)} of {len(trainable)} tensors), expected floating-point weights: a damaged "
                         "checkpoint")
    bad = nonfinite_tensors(trainable)
    if bad:
        raise ValueError(f"LoRA tensor {bad[0]!r} holds NaN/inf ({len(bad)} of {len(trainable)} tensors): a damaged "
                         "checkpoint, left as it is; export an older one")
    for comp, part in split_experts(trainable).items():
        layers = to_diffusers_keys(part)
        model = (denoisers or {}).get(comp)
        pairs: dict[str, dict[str, torch.Tensor]] = {}
        for k, v in layers.items():
            module, ab = k.rsplit(".lora_", 1)
            pairs.setdefault(module, {})[ab.split(".", 1)[0]] = v
        for module, ab in sorted(pairs.items()):
            if set(ab) != {"A", "B"}:
                has, lacks = ("A", "B") if "A" in ab else ("B", "A")
                raise ValueError(f"{comp}.{module} has lora_{has} but no lora_{lacks}: a damaged checkpoint")
            a, b = ab["A"], ab["B"]
            if a.dim() < 2 or a.shape[0] != rank or b.dim() < 2 or b.shape[1] != rank:
                key, t, want = ((f"{module}.lora_A", a, f"[{rank}, in_features]") if a.dim() < 2 or a.shape[0] != rank
                                else (f"{module}.lora_B", b, f"[out_features, {rank}]"))
                raise ValueError(f"LoRA tensor {comp}.{key} has shape {list(t.shape)}, expected {want} "
                                 f"(model.lora.rank={rank}): a damaged checkpoint, or one of another model.lora")
            if model is None:
                continue
            try:
                weight = model.get_submodule(module).weight
            except AttributeError:
                raise ValueError(f"LoRA module {comp}.{module} is not in this run's {type(model).__name__} (model."
                                 "path / model.tiny): a checkpoint of another model") from None
            if a.shape[1] != weight.shape[1] or b.shape[0] != weight.shape[0]:
                raise ValueError(f"LoRA tensors {comp}.{module}.lora_A / lora_B have shapes {list(a.shape)} / "
                                 f"{list(b.shape)}, but the model's {module} weight is {list(weight.shape)} (expected "
                                 f"[{rank}, {weight.shape[1]}] / [{weight.shape[0]}, {rank}]): a checkpoint of another "
                                 "model size")

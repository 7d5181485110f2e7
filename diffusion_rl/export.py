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
else the live ones; ``weights="live"`` forces the latter. The LoRA-only export reads the checkpoint alone (no base
model is loaded); ``--merge`` loads the base pipeline named by the run's ``model`` config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

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
        merge_into_pipeline(cfg.model, out, out / "merged")
    (out / "export.json").write_text(json.dumps(info, indent=2))
    return info


def merge_into_pipeline(model_cfg, lora_dir: str | Path, dest: str | Path) -> None:
    """Load the base pipeline of ``model_cfg`` (tiny, directory or single file), load the exported LoRA the stock way
    (``load_lora_weights``), fold it into the weights (``fuse_lora``), drop the adapter and ``save_pretrained``."""
    from .adapters import load_pipeline

    pipe = load_pipeline(model_cfg)
    comps = [c for c, f in EXPERT_FILES.items() if (Path(lora_dir) / f).is_file()]
    for c in comps:  # the second expert's file (Wan 2.2 A14B) loads into transformer_2
        pipe.load_lora_weights(str(lora_dir), weight_name=EXPERT_FILES[c], adapter_name="grpo",
                               **({"load_into_transformer_2": True} if c == "transformer_2" else {}))
    pipe.fuse_lora(components=comps, lora_scale=1.0, adapter_names=["grpo"])
    pipe.unload_lora_weights()
    pipe.save_pretrained(str(dest))



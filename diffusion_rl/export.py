"""Trained LoRA out of a run, in the format diffusers reads; and a diffusers LoRA into a run (``model.lora_init``).

``diffusion-rl export RUN_DIR OUT [--merge]`` writes::

    OUT/pytorch_lora_weights.safetensors   keys "transformer.<module>.lora_A.weight" / "...lora_B.weight" (the
                                           diffusers/peft names, i.e. the run's names minus peft's ".default" adapter
                                           segment), the peft LoraConfig (r, lora_alpha, target_modules) in the
                                           safetensors header under "lora_adapter_metadata", as
                                           ``<Pipeline>.save_lora_weights`` writes it, so ``pipe.load_lora_weights(OUT)``
                                           rebuilds the same adapter with the same scale alpha / r
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
import re
from pathlib import Path
from typing import Literal

import torch

LORA_FILE = "pytorch_lora_weights.safetensors"
_ADAPTER_SEGMENT = re.compile(r"\.lora_(A|B)\.default\.")


def pipeline_class(kind: str):
    """The diffusers pipeline class of a model kind (its ``save_lora_weights`` / ``lora_state_dict``)."""
    import diffusers

    from .adapters import PIPELINES

    if kind not in PIPELINES:
        raise ValueError(f"unknown model kind {kind!r}; expected one of {sorted(PIPELINES)}")
    return getattr(diffusers, PIPELINES[kind])


def to_diffusers_keys(trainable: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The run's peft parameter names (``blocks.0.attn.to_q.lora_A.default.weight``) -> the adapter-free names
    diffusers stores without the component prefix (``blocks.0.attn.to_q.lora_A.weight``). Anything that is not a
    LoRA A/B matrix (e.g. a fully fine-tuned parameter) has no place in a LoRA file and is refused."""
    out, other = {}, []
    for k, v in trainable.items():
        if _ADAPTER_SEGMENT.search(k):
            out[_ADAPTER_SEGMENT.sub(r".lora_\1.", k)] = v
        else:
            other.append(k)
    if other:
        raise ValueError(f"the run trains parameters that are not LoRA A/B matrices ({other[:3]}...): a LoRA export "
                         "cannot hold them")
    if not out:
        raise ValueError("the checkpoint holds no LoRA weights (model.lora.enabled was false?)")
    return out


def lora_metadata(lora, kind: str) -> dict:
    """The peft ``LoraConfig`` of the run's adapter as a dict (what diffusers keeps in the safetensors header)."""
    from peft import LoraConfig

    from .adapters import DEFAULT_LORA_TARGETS

    targets = list(lora.targets) or DEFAULT_LORA_TARGETS[kind]
    d = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets).to_dict()
    return {k: (sorted(v) if isinstance(v, set) else v) for k, v in d.items()}


def load_run(run_dir: str | Path):
    """``(config, state)`` of a run directory, its ``checkpoints/`` folder, or one ``step_*`` checkpoint."""
    from grpo.checkpoint import latest_checkpoint, load_checkpoint
    from grpo.config import _build as build_cfg  # noqa: PLC2701 - the typed loader, from a dict

    from .trainer import DiffusionRLConfig

    p = Path(run_dir)
    if not p.exists():
        raise FileNotFoundError(f"run directory not found: {p}")
    if not (p / "state.json").exists():
        found = latest_checkpoint(p) or latest_checkpoint(p / "checkpoints")
        if found is None:
            raise FileNotFoundError(f"{p} holds no checkpoint (expected a run directory with checkpoints/step_*, "
                                    "or a step_* directory)")
        p = found
    state = load_checkpoint(p)
    return build_cfg(DiffusionRLConfig, state["config"], "", str(p)), state


def export_run(run_dir: str | Path, out: str | Path, merge: bool = False,
               weights: Literal["auto", "ema", "live"] = "auto") -> dict:
    """Write the run's LoRA (and with ``merge`` the fused pipeline) under ``out``; returns the provenance dict."""
    cfg, state = load_run(run_dir)
    if weights == "ema" and "ema" not in state:
        raise ValueError(f"--weights ema: the run kept no EMA (train.ema_decay={cfg.train.ema_decay})")
    use_ema = weights in ("auto", "ema") and "ema" in state
    src = state["ema"] if use_ema else state["trainable"]
    layers = {k: v.detach().to(torch.float32).contiguous() for k, v in to_diffusers_keys(src).items()}
    cls = pipeline_class(cfg.model.kind)
    out = Path(out)
    meta = lora_metadata(cfg.model.lora, cfg.model.kind)
    out.mkdir(parents=True, exist_ok=True)
    cls.save_lora_weights(str(out), transformer_lora_layers=layers, transformer_lora_adapter_metadata=meta,
                          weight_name=LORA_FILE)
    info = {"run": str(Path(run_dir).resolve()), "checkpoint": state["__path__"], "iteration": int(state["iteration"]),
            "weights": "ema" if use_ema else "live", "pipeline": cls.__name__, "base_model": cfg.model.path,
            "lora": {"rank": cfg.model.lora.rank, "alpha": cfg.model.lora.alpha, "targets": meta["target_modules"],
                     "tensors": len(layers)}, "merged": None}
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
    pipe.load_lora_weights(str(lora_dir), weight_name=LORA_FILE, adapter_name="grpo")
    pipe.fuse_lora(components=["transformer"], lora_scale=1.0, adapter_names=["grpo"])
    pipe.unload_lora_weights()
    pipe.save_pretrained(str(dest))


def read_lora_file(path: str | Path, kind: str) -> tuple[dict[str, torch.Tensor], dict | None]:
    """A diffusers LoRA (a directory holding one ``*.safetensors`` LoRA file, or the file) -> ``({module.lora_A.weight:
    tensor} of the denoiser, the adapter metadata or None)``. Read with the pipeline's own ``lora_state_dict``, so
    the formats it converts (e.g. kohya / XLabs FLUX LoRAs) are accepted as well."""
    cls = pipeline_class(kind)
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"model.lora_init={str(path)!r} does not exist (expected a diffusers LoRA directory "
                                f"with {LORA_FILE}, or a .safetensors file)")
    kw = {}
    if p.is_dir():
        files = sorted(p.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"model.lora_init={str(path)!r}: no .safetensors file in the directory")
        name = LORA_FILE if (p / LORA_FILE).exists() else files[0].name
        kw = {"weight_name": name}
    res = cls.lora_state_dict(str(p), return_lora_metadata=True, **kw)  # (state, metadata); FLUX may add alphas
    sd, meta = res[0], res[-1]
    prefix = "transformer."
    other = sorted({k.split(".", 1)[0] for k in sd if not k.startswith(prefix)})
    if other:
        raise ValueError(f"model.lora_init={str(path)!r} also holds LoRA weights of {other}; only the denoiser "
                         "(transformer) LoRA is trained here")
    sd = {k[len(prefix):]: v for k, v in sd.items()}
    if meta:
        meta = {k[len(prefix):]: v for k, v in meta.items() if k.startswith(prefix)} or None
    return sd, meta


def load_lora_init(adapter, path: str | Path) -> int:
    """Copy a diffusers-saved LoRA into the adapter's (just injected) peft LoRA; returns the tensors loaded.

    The file's rank (from the A matrices' shapes) and alpha (from its metadata; absent metadata means alpha = rank,
    diffusers' own convention) must equal ``model.lora.rank`` / ``model.lora.alpha``, and each of its modules must be
    one the run targets; otherwise one error says which values to set."""
    cfg = adapter.cfg.lora
    sd, meta = read_lora_file(path, adapter.kind)
    ranks = sorted({int(v.shape[0]) for k, v in sd.items() if ".lora_A." in k})
    alpha = float(meta["lora_alpha"]) if meta and "lora_alpha" in meta else (float(ranks[0]) if ranks else None)
    if ranks != [cfg.rank] or alpha != float(cfg.alpha):
        raise ValueError(f"model.lora_init={str(path)!r} has rank {ranks} and alpha {alpha}, the run has "
                         f"model.lora.rank={cfg.rank} and model.lora.alpha={cfg.alpha}: set them to the file's values")
    params = dict(adapter.transformer.named_parameters())
    want = {_ADAPTER_SEGMENT.sub(r".lora_\1.", n): n for n in params if _ADAPTER_SEGMENT.search(n)}
    unknown = sorted(k for k in sd if k not in want)
    if unknown:
        raise ValueError(f"model.lora_init={str(path)!r} has LoRA weights for modules the run does not target, e.g. "
                         f"{unknown[:3]}; set model.lora.targets to cover them")
    with torch.no_grad():
        for k, v in sd.items():
            p = params[want[k]]
            if p.shape != v.shape:
                raise ValueError(f"model.lora_init={str(path)!r}: {k} has shape {tuple(v.shape)}, the model expects "
                                 f"{tuple(p.shape)}")
            p.copy_(v.to(p.dtype))
    return len(sd)

"""Real checkpoints as users keep them: a diffusers directory, or a single ``.safetensors`` file plus the parts it
lacks.

``model.path`` is one of

* a diffusers pipeline directory (``model_index.json`` and one folder per component, e.g. a hub snapshot
  ``~/.cache/huggingface/hub/models--stabilityai--stable-diffusion-3.5-medium/snapshots/<rev>``): every component
  ``model_index.json`` lists must have its folder with weights, else one error names the missing component(s);
  ``model.drop_t5`` (SD3 only) loads the pipeline with ``text_encoder_3=None`` (T5-XXL, 4.7 B parameters, ~9.5 GB in
  bf16, never loaded; diffusers then feeds zeros for the T5 tokens, as SD3 was trained to accept, Esser et al. 2024
  Sec. 5.3.2);
* a single ``.safetensors`` file (``sd3.5_medium.safetensors``, ``flux1-dev.safetensors``, a Wan transformer file):
  the denoiser (and, for SD3's all-in-one files, the VAE) are read with diffusers' ``from_single_file``, which
  converts the original (SAI / BFL / Wan) key layout to diffusers' and also accepts a file already in diffusers'
  layout; everything else -- text encoders, tokenizers, scheduler, the VAE when the file has none -- comes from
  ``model.components``, a diffusers directory of the same model (its transformer folder needs only ``config.json``).

Nothing is fetched from the hub here: a missing part is an error naming it and what to set.
"""

from __future__ import annotations

import json
from pathlib import Path

SINGLE_FILE_SUFFIXES = (".safetensors", ".ckpt", ".pt", ".pth", ".bin")
TRANSFORMER_CLASSES = {"sd3": "SD3Transformer2DModel", "flux": "FluxTransformer2DModel", "wan": "WanTransformer3DModel",
                       "qwenimage": "QwenImageTransformer2DModel", "wan22": "WanTransformer3DModel",
                       "flux_kontext": "FluxTransformer2DModel"}
# what each family's text side is, for the error messages
TEXT_PARTS = {"sd3": "CLIP-L (text_encoder), OpenCLIP-G (text_encoder_2), T5-XXL (text_encoder_3) and their tokenizers",
              "flux": "CLIP-L (text_encoder), T5-XXL (text_encoder_2) and their tokenizers",
              "wan": "UMT5-XXL (text_encoder) and its tokenizer",
              "qwenimage": "Qwen2.5-VL-7B (text_encoder) and its tokenizer",
              "wan22": "UMT5-XXL (text_encoder) and its tokenizer",
              "flux_kontext": "CLIP-L (text_encoder), T5-XXL (text_encoder_2) and their tokenizers"}
T5_HINT = {"sd3": "; SD3 runs without T5: set model.drop_t5=true (saves ~9.5 GB of bf16 weights; prompts then use "
                  "CLIP only)", "flux": "", "wan": "", "qwenimage": "", "wan22": "", "flux_kontext": ""}
_WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json", "*.pt", "*.pth")


def is_single_file(path: str | Path) -> bool:
    return str(path).endswith(SINGLE_FILE_SUFFIXES)


def _has_weights(folder: Path) -> bool:
    return folder.is_dir() and any(any(folder.glob(g)) for g in _WEIGHT_GLOBS)


def dropped_components(kind: str, drop_t5: bool) -> dict[str, None]:
    if drop_t5 and kind != "sd3":
        raise ValueError(f"model.drop_t5=true is for SD3 (kind sd3) only; a {kind} pipeline needs its T5 text encoder")
    return {"text_encoder_3": None, "tokenizer_3": None} if drop_t5 else {}


def none_components(cls, index: dict, kind: str, drop_t5: bool) -> dict[str, None]:
    """Components to pass as ``None``: saved as ``[null, null]`` (e.g. a pixel-space model's VAE), absent from
    ``model_index.json``, or dropped (T5)."""
    import inspect

    out = {k: None for k in inspect.signature(cls.__init__).parameters
           if k != "self" and (k not in index or index[k] == [None, None])}
    out.update(dropped_components(kind, drop_t5))
    return out


def check_pipeline_dir(p: Path, cls, kind: str, drop_t5: bool, provided: tuple[str, ...] = (),
                       key: str = "model.path") -> dict[str, None]:
    """Every component listed in ``p/model_index.json`` (not dropped, not ``provided`` by the caller) has a folder, and
    each model among them has weights; returns the ``None`` components. One error lists all that is missing."""
    index = json.loads((p / "model_index.json").read_text())
    nones = none_components(cls, index, kind, drop_t5)
    missing = []
    for name, spec in index.items():
        if name.startswith("_") or not isinstance(spec, list) or spec == [None,
                                                                          None] or name in nones or name in provided:
            continue
        lib, cname = spec
        folder = p / name
        if not folder.is_dir():
            missing.append(f"{name} ({cname}): no {name}/ folder")
        elif (name.startswith(("text_encoder", "transformer", "vae", "unet", "image_encoder"))
              and not _has_weights(folder)):
            missing.append(f"{name} ({cname}): {name}/ holds no weights")
    if missing:
        t5 = T5_HINT[kind] if any(m.startswith("text_encoder_3") for m in missing) else ""
        raise FileNotFoundError(f"{key}={str(p)!r} is incomplete: {'; '.join(missing)}. Download the missing "
                                f"component(s) into that directory{t5}")
    return nones


def load_single_file(cfg, dtype):
    """``cfg.path`` is one checkpoint file: the denoiser (and SD3's VAE when present) from it, the rest from
    ``cfg.components``. Returns the pipeline."""
    import diffusers
    from safetensors import safe_open

    from .families import PIPELINES

    f = Path(cfg.path).expanduser()
    if not f.is_file():
        raise FileNotFoundError(f"model.path={cfg.path!r}: no such file")
    has_vae = False
    if f.suffix == ".safetensors":
        with safe_open(str(f), "pt") as h:
            keys = list(h.keys())
        has_vae = any(k.startswith("first_stage_model.") for k in keys)  # SAI all-in-one layout
    parts = "the transformer" + (" and the VAE" if has_vae else "")
    if not cfg.components:
        raise FileNotFoundError(
            f"model.path={cfg.path!r} is a single-file checkpoint holding {parts} only; the "
            f"{TEXT_PARTS[cfg.kind]}{'' if has_vae else ', the VAE'} and the scheduler are not in it: set "
            "model.components to a diffusers directory of the same model (model_index.json + those folders; "
            f"transformer/ needs only its config.json){T5_HINT[cfg.kind]}")
    comp = Path(cfg.components).expanduser()
    if not (comp / "model_index.json").is_file():
        raise FileNotFoundError(f"model.components={cfg.components!r}: no diffusers pipeline there (expected "
                                "model_index.json and one folder per component)")
    if not (comp / "transformer" / "config.json").is_file():
        raise FileNotFoundError(f"model.components={cfg.components!r} has no transformer/config.json: the single "
                                f"file's {TRANSFORMER_CLASSES[cfg.kind]} needs that config to be built")
    cls = getattr(diffusers, PIPELINES[cfg.kind])
    provided = ("transformer", "vae") if has_vae else ("transformer",)
    nones = check_pipeline_dir(comp, cls, cfg.kind, cfg.drop_t5, provided, key="model.components")
    kw = {"torch_dtype": dtype} if dtype is not None else {}
    tcls = getattr(diffusers, TRANSFORMER_CLASSES[cfg.kind])
    try:
        parts_kw = {"transformer": tcls.from_single_file(str(f), config=str(comp), subfolder="transformer",
                                                         local_files_only=True, **kw)}
        if has_vae:
            parts_kw["vae"] = diffusers.AutoencoderKL.from_single_file(str(f), config=str(comp), subfolder="vae",
                                                                       local_files_only=True, **kw)
        return cls.from_pretrained(str(comp), local_files_only=True, **kw, **nones, **parts_kw)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise FileNotFoundError(f"could not load {PIPELINES[cfg.kind]} from model.path={cfg.path!r} with "
                                f"model.components={cfg.components!r}: {str(e).splitlines()[0]}") from e

"""LoRA files in diffusers' format: the run's peft names <-> diffusers' keys, the adapter metadata, and reading a
diffusers-saved LoRA into a run's adapter (``model.lora_init``). Used by the adapters (loading) and the export."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from .families import DEFAULT_LORA_TARGETS, pipeline_class

LORA_FILE = "pytorch_lora_weights.safetensors"
# Wan 2.2 T2V-A14B: one LoRA file per expert; the second loads with
# ``pipe.load_lora_weights(dir, weight_name=LORA_FILE_2, load_into_transformer_2=True)`` (diffusers' WanLoraLoaderMixin)
LORA_FILE_2 = "pytorch_lora_weights_transformer_2.safetensors"
EXPERT_FILES = {"transformer": LORA_FILE, "transformer_2": LORA_FILE_2}


def split_experts(trainable: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """A run's trainable state by pipeline component: a two-expert run (Wan 2.2, names ``transformer.*`` and
    ``transformer_2.*``, diffusion_rl.wan22.Experts) -> one dict per expert without the prefix; any other run ->
    ``{"transformer": trainable}``."""
    if trainable and all(k.startswith(("transformer.", "transformer_2.")) for k in trainable):
        out: dict[str, dict[str, torch.Tensor]] = {}
        for k, v in trainable.items():
            comp, rest = k.split(".", 1)
            out.setdefault(comp, {})[rest] = v
        return out
    return {"transformer": trainable}
_ADAPTER_SEGMENT = re.compile(r"\.lora_(A|B)\.default\.")


def is_lora_state(trainable: dict[str, torch.Tensor]) -> bool:
    """Whether every trainable weight is a peft LoRA A/B matrix (what a diffusers LoRA file can hold)."""
    return bool(trainable) and all(_ADAPTER_SEGMENT.search(k) for k in trainable)


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


    targets = list(lora.targets) or DEFAULT_LORA_TARGETS[kind]
    d = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets).to_dict()
    return {k: (sorted(v) if isinstance(v, set) else v) for k, v in d.items()}


def write_diffusers_lora(out: str | Path, trainable: dict[str, torch.Tensor], lora, kind: str) -> dict[str, int]:
    """The run's LoRA weights (peft names, as the trainer holds them) as diffusers' LoRA file(s) in ``out``: keys
    ``transformer.<module>.lora_A.weight`` / ``lora_B``, fp32, the peft ``LoraConfig`` in the header, written by the
    pipeline's own ``save_lora_weights`` (one file per expert for Wan 2.2 A14B). Returns ``{component: tensors}``.
    The export writes these, and so does every checkpoint, so ``pipe.load_lora_weights(<checkpoint dir>)`` loads the
    trained LoRA rather than nothing."""
    experts = {c: {k: v.detach().to(torch.float32).contiguous() for k, v in to_diffusers_keys(d).items()}
               for c, d in split_experts(trainable).items()}
    cls = pipeline_class(kind)
    meta = lora_metadata(lora, kind)
    Path(out).mkdir(parents=True, exist_ok=True)
    for comp, layers in experts.items():
        cls.save_lora_weights(str(out), transformer_lora_layers=layers, transformer_lora_adapter_metadata=meta,
                              weight_name=EXPERT_FILES[comp])
        canonical_header(Path(out) / EXPERT_FILES[comp])
    return {c: len(d) for c, d in experts.items()}


def checkpoint_lora_files(weights: dict[str, torch.Tensor], model, pipe) -> dict:
    """A checkpoint's LoRA in diffusers' format (what ``diffusion-rl export`` writes: the EMA weights when the run keeps
    them, else the live ones), as ``{file name: writer(directory)}`` for :func:`grpo.checkpoint.save_checkpoint`'s
    ``files``, so ``pipe.load_lora_weights(<checkpoint dir>)`` loads the trained adapter (Wan 2.2 A14B: one file per
    expert). ``model``: the run's ``model:`` config. Empty for a run whose trainable weights are not all LoRA matrices
    (no LoRA file can hold them) or whose ``pipe`` is not a diffusers pipeline (e.g. EVA's world model,
    diffusion_rl.align_world_model)."""
    if not (model.lora.enabled and is_lora_state(weights) and callable(getattr(pipe, "load_lora_weights", None))):
        return {}
    parts = split_experts(weights)

    def writer(comp: str):
        sub = weights if len(parts) == 1 else {f"{comp}.{k}": v for k, v in parts[comp].items()}
        return lambda d: write_diffusers_lora(d, sub, model.lora, model.kind)

    return {EXPERT_FILES[c]: writer(c) for c in parts}


def canonical_header(path: Path) -> None:
    """Rewrite a safetensors file's JSON header with sorted keys (space-padded to 8 bytes, as the format asks), so the
    same weights give the same bytes: safetensors writes its ``__metadata__`` entries in hash order, which differs
    from call to call. Tensor offsets are relative to the data section, so the data is copied unchanged."""
    import json
    import os
    import struct

    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.dumps(json.loads(raw[8:8 + n]), sort_keys=True, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(struct.pack("<Q", len(header)) + header + raw[8 + n:])
    os.replace(tmp, path)


def read_lora_file(path: str | Path, kind: str) -> tuple[dict[str, torch.Tensor], dict | None]:
    """A diffusers LoRA (a directory holding one ``*.safetensors`` LoRA file, or the file) -> ``({module.lora_A.weight:
    tensor} of the denoiser, the adapter metadata or None)``. Read with the pipeline's own ``lora_state_dict``, so
    the formats it converts (e.g. kohya / XLabs FLUX LoRAs) are accepted as well."""
    cls = pipeline_class(kind)
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"model.lora_init={str(path)!r} does not exist (expected a diffusers LoRA directory "
                                f"with {LORA_FILE}, or a .safetensors file)")
    kw = {"weight_name": p.name}  # a file: diffusers guesses no name offline (HF_HUB_OFFLINE), so it is given
    if p.is_dir():
        files = sorted(p.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"model.lora_init={str(path)!r}: no .safetensors file in the directory")
        name = LORA_FILE if (p / LORA_FILE).exists() else files[0].name
        kw = {"weight_name": name}
    elif p.suffix != ".safetensors":
        raise ValueError(f"model.lora_init={str(path)!r}: expected a .safetensors LoRA file or a directory holding one")
    try:  # (state, metadata); FLUX may add alphas
        res = cls.lora_state_dict(str(p if p.is_dir() else p.parent), return_lora_metadata=True, **kw)
    except (OSError, ValueError, RuntimeError, KeyError) as e:  # a truncated / corrupt file: one line, the file named
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"model.lora_init={str(path)!r}: cannot read {kw['weight_name']} as a LoRA safetensors file "
                         f"({reason})") from None
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
    experts = getattr(adapter, "experts", None)
    if experts:  # Wan 2.2 T2V-A14B: a directory with one diffusers LoRA file per expert
        p = Path(path)
        missing = [EXPERT_FILES[e] for e in experts if not (p / EXPERT_FILES[e]).is_file()]
        if not p.is_dir() or missing:
            raise FileNotFoundError(f"model.lora_init={str(path)!r}: a two-expert model starts from a directory "
                                    f"holding {' and '.join(EXPERT_FILES[e] for e in experts)} (as diffusion-rl export "
                                    f"writes it); missing {missing or 'the directory'}")
        return sum(_load_into(adapter, p / EXPERT_FILES[e], e + ".") for e in experts)
    return _load_into(adapter, path, "")


def _load_into(adapter, path: str | Path, prefix: str) -> int:
    """One diffusers LoRA file into the adapter's parameters named ``prefix + module``."""
    cfg = adapter.cfg.lora
    sd, meta = read_lora_file(path, adapter.kind)
    sd = {prefix + k: v for k, v in sd.items()}
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

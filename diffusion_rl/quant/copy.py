"""The rollout copy: a frozen, quantized deep copy of the denoiser, refreshed from the trained weights.

    model_q = make_rollout_copy(model, QuantConfig(format="nvfp4"))    # once
    ...optimizer.step()...
    refresh_rollout_copy(model_q, model)                                 # after every update: in place

:func:`make_rollout_copy` deep-copies ``model`` (any ``nn.Module``: a diffusers ``SD3Transformer2DModel``,
``FluxTransformer2DModel``, ``WanTransformer3DModel``, possibly with a peft LoRA injected), casts it to the config's
compute dtype, and replaces

* every peft LoRA layer (``lora.Linear`` wrapping ``base_layer``) by one layer holding the **merged** weight
  ``W' = W + (alpha / r) B A`` (peft's ``get_delta_weight``, summed over the active adapters; nothing is merged into,
  or otherwise mutated in, the trained model), and
* every ``nn.Linear`` (and merged LoRA layer) that the skip rules (:class:`~diffusion_rl.quant.config.SkipRules`)
  let through by a :class:`~diffusion_rl.quant.linear.QuantLinear`; skipped layers stay ``nn.Linear`` in the compute
  dtype.

The copy is ``eval()`` and has no trainable parameters. The report of what was quantized and why the rest was
skipped is ``model_q.rollout_quant_report`` (name -> ``"nvfp4/emulated"`` or the skip reason).

:func:`refresh_rollout_copy` re-derives the copy from the trained model *in place*: quantized layers re-quantize
into their existing buffers, other tensors ``copy_``. By default only what can have changed is refreshed: layers
whose source has trainable parameters (LoRA factors, or a fully trained weight) and trainable non-linear
parameters; ``full=True`` refreshes everything (e.g. after loading a new base checkpoint).
"""

from __future__ import annotations

import copy as _copy

import torch
from torch import nn

from .backends import resolve_backend
from .config import QuantConfig
from .linear import QuantLinear


def _is_lora_layer(m: nn.Module) -> bool:
    return hasattr(m, "base_layer") and hasattr(m, "lora_A") and hasattr(m, "get_delta_weight")


def effective_linear_weight(m: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(W [out, in] float32, bias [out] or None)`` that ``m`` applies: for a peft LoRA layer ``W + sum_a delta_a``
    over the active adapters (none when the adapters are disabled or already merged into ``W``)."""
    if _is_lora_layer(m):
        base = m.get_base_layer()
        w = base.weight.detach().float()
        if not getattr(m, "merged", False) and not getattr(m, "disable_adapters", False):
            for a in m.active_adapters:
                if a not in m.lora_A:
                    continue
                if getattr(m, "use_dora", {}).get(a, False):
                    raise NotImplementedError(f"DoRA adapter {a!r}: merging DoRA into the rollout copy is not "
                                              "supported")
                w = w + m.get_delta_weight(a).detach().float()
        b = base.bias.detach() if base.bias is not None else None
        return w, b
    if isinstance(m, (nn.Linear, QuantLinear)):
        w = m.weight.detach().float()
        return w, (m.bias.detach() if m.bias is not None else None)
    raise TypeError(f"{type(m).__name__} is neither nn.Linear nor a peft LoRA linear layer")


def _model_device(model: nn.Module) -> torch.device:
    for t in model.parameters():
        return t.device
    return torch.device("cpu")


def _set_submodule(root: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, new)


def make_rollout_copy(model: nn.Module, cfg: QuantConfig) -> nn.Module:
    """A frozen copy of ``model`` with LoRA merged and linears quantized per ``cfg`` (see module docstring)."""
    dtype = cfg.torch_dtype
    device = _model_device(model)
    backend = resolve_backend(cfg, device)
    model_q = _copy.deepcopy(model)
    model_q.requires_grad_(False)
    model_q.eval()
    model_q.to(dtype)  # before any QuantLinear exists: only high-precision tensors are cast

    report: dict[str, str] = {}
    targets: list[tuple[str, nn.Module]] = []
    inside_lora: list[str] = []
    for name, m in model_q.named_modules():
        if any(name.startswith(p + ".") for p in inside_lora):
            continue  # base_layer / lora_A / lora_B of a LoRA layer: handled with their wrapper
        if _is_lora_layer(m):
            inside_lora.append(name)
            if not isinstance(m.get_base_layer(), nn.Linear):
                raise NotImplementedError(f"LoRA layer {name!r} wraps a {type(m.get_base_layer()).__name__}; only "
                                          "nn.Linear bases can be merged into the rollout copy")
            targets.append((name, m))
        elif isinstance(m, nn.Linear):
            targets.append((name, m))

    for name, m in targets:
        src = model.get_submodule(name)
        w, b = effective_linear_weight(src)
        reason = None if cfg.format != "bf16" else "format bf16"
        if reason is None:
            reason = cfg.skip.reason(name, w.shape[1], cfg.format)
        if reason is None:
            new = QuantLinear.from_weight(w.to(device), None if b is None else b.to(device, dtype), cfg, backend)
            report[name] = f"{cfg.format}/{backend}"
        else:
            new = nn.Linear(w.shape[1], w.shape[0], bias=b is not None, device=device, dtype=dtype)
            with torch.no_grad():
                new.weight.copy_(w)
                if b is not None:
                    new.bias.copy_(b)
            new.requires_grad_(False)
            report[name] = f"skipped: {reason}"
        if new is not m or _is_lora_layer(m):
            _set_submodule(model_q, name, new)
    model_q.rollout_quant_report = report  # type: ignore[attr-defined]
    model_q.rollout_quant_config = cfg  # type: ignore[attr-defined]
    model_q.rollout_quant_backend = backend  # type: ignore[attr-defined]
    # diffusers' peft bookkeeping: the copy carries no adapter any more
    if hasattr(model_q, "_hf_peft_config_loaded"):
        model_q._hf_peft_config_loaded = False
    if hasattr(model_q, "peft_config"):
        try:
            del model_q.peft_config
        except AttributeError:
            pass
    return model_q


def _source_trainable(m: nn.Module) -> bool:
    return any(p.requires_grad for p in m.parameters())


@torch.no_grad()
def refresh_rollout_copy(model_q: nn.Module, model: nn.Module, full: bool = False) -> int:
    """Re-derive ``model_q`` (from :func:`make_rollout_copy`) from ``model``'s current weights, in place.

    Returns the number of tensors refreshed. Only what can have changed (sources with trainable parameters) unless
    ``full``. Raises ``KeyError`` naming the first module/parameter of the copy that ``model`` lacks.
    """
    report = getattr(model_q, "rollout_quant_report", None)
    if report is None:
        raise ValueError("model_q was not made by make_rollout_copy (no rollout_quant_report)")
    n = 0
    for name in report:
        try:
            src = model.get_submodule(name)
        except AttributeError as e:
            raise KeyError(f"the trained model has no module {name!r} to refresh the rollout copy from") from e
        if not full and not _source_trainable(src):
            continue
        w, b = effective_linear_weight(src)
        dst = model_q.get_submodule(name)
        if isinstance(dst, QuantLinear):
            dst.set_weight(w, b)
        else:
            dst.weight.copy_(w)
            if b is not None:
                dst.bias.copy_(b)
        n += 1
    src_params = dict(model.named_parameters())
    src_buffers = dict(model.named_buffers())
    for kind, items, source in (("parameter", model_q.named_parameters(), src_params),
                                ("buffer", model_q.named_buffers(), src_buffers)):
        for pname, t in items:
            owner = pname.rpartition(".")[0]
            if owner in report or t is None:
                continue
            s = source.get(pname)
            if s is None:
                raise KeyError(f"the trained model has no {kind} {pname!r} to refresh the rollout copy from")
            if full or (kind == "parameter" and s.requires_grad):
                t.copy_(s.detach())
                n += 1
    return n

"""Which kernels can run a format on a device: real (hardware) or emulated (fake-quant, any device).

* FP8 E4M3: ``torch._scaled_mm`` on CUDA devices of compute capability >= 9.0 (Hopper; Ada 8.9 has FP8 tensor
  cores too but is not a target here). Real FP8 needs quantized activations (both GEMM operands FP8).
* NVFP4: compute capability >= 10.0 (Blackwell) and torchao's NVFP4 inference workflow
  (``torchao.prototype.mx_formats``) importable. Transformer Engine's ``NVFP4BlockScaling`` recipe is the other
  real implementation; it replaces whole modules (``te.Linear`` under ``fp8_autocast``) and is detected and
  reported, but this layer drives torchao's tensor subclass, which plugs into an existing ``nn.Linear``.

:func:`resolve_backend` turns ``QuantConfig.backend`` into ``"emulated"`` or ``"real"``: ``"auto"`` silently
picks the real kernels where present; ``"real"`` where they are missing warns once per (format, reason) and
emulates, or raises :class:`~diffusion_rl.quant.config.QuantBackendError` when ``strict``.
"""

from __future__ import annotations

import importlib.util
import warnings

import torch

from .config import QuantBackendError, QuantConfig

FP8_MIN_CC = (9, 0)
NVFP4_MIN_CC = (10, 0)
_WARNED: set[tuple[str, str]] = set()


def device_capability(device: torch.device | str | None) -> tuple[int, int] | None:
    """CUDA compute capability of ``device``; ``None`` for CPU (or no CUDA)."""
    d = torch.device(device if device is not None else "cpu")
    if d.type != "cuda" or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability(d)


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def torchao_nvfp4_config():
    """torchao's NVFP4 (dynamic activation + weight) config class, or ``None`` (name differs across versions)."""
    if not _has_module("torchao"):
        return None
    try:
        from torchao.prototype.mx_formats import inference_workflow as iw  # type: ignore
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None
    for name in ("NVFP4DynamicActivationNVFP4WeightConfig", "NVFP4InferenceConfig"):
        if hasattr(iw, name):
            return getattr(iw, name)
    return None


def real_available(fmt: str, device: torch.device | str | None) -> tuple[bool, str]:
    """``(available, reason)`` for real kernels of ``fmt`` on ``device``."""
    cc = device_capability(device)
    if fmt == "bf16":
        return True, "bf16 needs no special kernels"
    if cc is None:
        return False, f"device {device!s} is not a CUDA GPU"
    if fmt == "fp8":
        if cc < FP8_MIN_CC:
            return False, f"FP8 GEMMs need compute capability >= {FP8_MIN_CC}, this GPU has {cc}"
        if not hasattr(torch, "_scaled_mm"):
            return False, "this torch build has no torch._scaled_mm"
        return True, f"torch._scaled_mm on compute capability {cc}"
    if fmt == "nvfp4":
        if cc < NVFP4_MIN_CC:
            return False, f"NVFP4 GEMMs need compute capability >= {NVFP4_MIN_CC} (Blackwell), this GPU has {cc}"
        if torchao_nvfp4_config() is None:
            te = (" (transformer_engine is installed, but this layer drives torchao)"
                  if _has_module("transformer_engine") else "")
            return False, f"torchao with NVFP4 support (torchao.prototype.mx_formats) is not installed{te}"
        return True, f"torchao NVFP4 on compute capability {cc}"
    raise ValueError(f"unknown format {fmt!r}")


def resolve_backend(cfg: QuantConfig, device: torch.device | str | None) -> str:
    """``"emulated"`` or ``"real"`` for ``cfg`` on ``device`` (see module docstring)."""
    if cfg.format == "bf16" or cfg.backend == "emulated":
        return "emulated"
    ok, why = real_available(cfg.format, device)
    if cfg.format == "fp8" and ok and not cfg.quantize_activations:
        ok, why = False, "real FP8 GEMMs need FP8 activations (quantize_activations=False is weight-only)"
    if ok:
        return "real"
    if cfg.backend == "auto":
        return "emulated"
    msg = f"quant.backend='real' for format {cfg.format!r} is not available: {why}"
    if cfg.strict:
        raise QuantBackendError(msg + " (quant.strict=True; use backend='auto' or 'emulated' to allow emulation)")
    if (cfg.format, why) not in _WARNED:
        _WARNED.add((cfg.format, why))
        warnings.warn(msg + "; falling back to the emulated (fake-quant) path, which is slower than bf16",
                      RuntimeWarning, stacklevel=3)
    return "emulated"

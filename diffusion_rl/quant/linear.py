"""``QuantLinear``: the ``nn.Linear`` of the rollout copy, holding NVFP4 or FP8 weights.

``y = x W^T + b`` with ``W [out, in]`` stored quantized (:mod:`diffusion_rl.quant.formats`) and, with
``quantize_activations``, ``x [..., in]`` quantized per call (dynamic scales):

* NVFP4 (W4A4): ``W`` as 16-blocks along ``in`` (E2M1 codes ``[out, in/2]`` uint8, E4M3 block scales
  ``[out, in/16]``, FP32 tensor scale); ``x`` fake-quantized the same way along its last dim.
* FP8 (W8A8): ``W`` as ``float8_e4m3fn [out, in]`` with a scale ``[]`` or ``[out, 1]``; ``x`` per tensor or per
  token (row).

Backends: ``"emulated"`` runs ``F.linear(fake_quant(x), W_hat, b)`` in the copy's dtype with ``W_hat`` the
dequantized weight, cached in a non-persistent buffer (any device; slower than plain bf16 because of the
activation fake-quant). ``"real"``: FP8 via ``torch._scaled_mm(x_fp8, W_fp8^T, s_x, s_w)`` (Hopper+), NVFP4 via
torchao's NVFP4 tensor subclass on an inner ``nn.Linear`` (Blackwell+). Both real paths are import/capability
guarded (:mod:`diffusion_rl.quant.backends`) and are not exercised by the CPU test suite.

:meth:`QuantLinear.set_weight` re-quantizes in place (``copy_`` into the existing buffers): refreshing the copy
after an optimizer step allocates no new modules.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import QuantConfig
from .formats import (
    NVFP4_BLOCK,
    fp8_dequantize,
    fp8_fake_quant,
    fp8_quantize,
    nvfp4_dequantize,
    nvfp4_fake_quant,
    nvfp4_quantize,
)

_FIXED_DTYPE_BUFFERS = ("codes", "block_scale", "tensor_scale", "qweight", "wscale")


class QuantLinear(nn.Module):
    """A frozen quantized linear layer (see module docstring). Build it with :meth:`from_weight`."""

    def __init__(self, in_features: int, out_features: int, bias: bool, cfg: QuantConfig, backend: str = "emulated",
                 device: torch.device | str | None = None):
        super().__init__()
        if cfg.format not in ("fp8", "nvfp4"):
            raise ValueError(f"QuantLinear holds fp8 or nvfp4 weights, got format {cfg.format!r} (bf16 layers stay "
                             "nn.Linear)")
        if backend not in ("emulated", "real"):
            raise ValueError(f"backend must be 'emulated' or 'real' (resolve 'auto' first), got {backend!r}")
        if cfg.format == "nvfp4" and in_features % NVFP4_BLOCK:
            raise ValueError(f"NVFP4 needs in_features % {NVFP4_BLOCK} == 0, got in_features={in_features}")
        self.in_features, self.out_features = in_features, out_features
        self.format, self.backend = cfg.format, backend
        self.granularity = cfg.fp8_granularity
        self.quantize_activations = cfg.quantize_activations
        self.compute_dtype = cfg.torch_dtype
        dev = torch.device(device) if device is not None else None
        if cfg.format == "nvfp4":
            self.register_buffer("codes", torch.zeros(out_features, in_features // 2, dtype=torch.uint8, device=dev))
            self.register_buffer("block_scale", torch.zeros(out_features, in_features // NVFP4_BLOCK,
                                                            dtype=torch.float8_e4m3fn, device=dev))
            self.register_buffer("tensor_scale", torch.ones((), dtype=torch.float32, device=dev))
        else:
            self.register_buffer("qweight",
                                 torch.zeros(out_features, in_features, dtype=torch.float8_e4m3fn, device=dev))
            wshape = (out_features, 1) if cfg.fp8_granularity == "row" else ()
            self.register_buffer("wscale", torch.ones(wshape, dtype=torch.float32, device=dev))
        self.bias = nn.Parameter(torch.zeros(out_features, dtype=self.compute_dtype, device=dev), requires_grad=False) \
            if bias else None
        # emulated: the dequantized weight in the compute dtype (not saved: state_dict holds the quantized storage)
        self.register_buffer("weight_dequant", None, persistent=False)
        self._ao_linear: nn.Linear | None = None  # real NVFP4: torchao-quantized inner linear

    # ---- construction / refresh --------------------------------------------------------------------------------
    @classmethod
    def from_weight(cls, weight: torch.Tensor, bias: torch.Tensor | None, cfg: QuantConfig,
                    backend: str = "emulated") -> "QuantLinear":
        """Quantize ``weight [out, in]`` (any float dtype) and ``bias [out]`` into a new layer on ``weight.device``."""
        if weight.dim() != 2:
            raise ValueError(f"weight must be [out_features, in_features], got shape {tuple(weight.shape)}")
        m = cls(weight.shape[1], weight.shape[0], bias is not None, cfg, backend, device=weight.device)
        m.set_weight(weight, bias)
        return m

    @torch.no_grad()
    def set_weight(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Re-quantize from ``weight [out, in]`` (and copy ``bias``) in place: no new buffers except the first time."""
        if tuple(weight.shape) != (self.out_features, self.in_features):
            raise ValueError(f"weight shape {tuple(weight.shape)} != layer shape ({self.out_features}, "
                             f"{self.in_features})")
        w = weight.detach().to(self._device()).float()
        if self.format == "nvfp4":
            q = nvfp4_quantize(w)
            self.codes.copy_(q.codes)
            self.block_scale.copy_(q.block_scale)
            self.tensor_scale.copy_(q.tensor_scale)
        else:
            q, s = fp8_quantize(w, self.granularity)
            self.qweight.copy_(q)
            self.wscale.copy_(s.reshape(self.wscale.shape))
        if bias is not None and self.bias is not None:
            self.bias.copy_(bias.detach())
        if self.backend == "emulated":
            wd = self.dequantized_weight()
            if (self.weight_dequant is None or self.weight_dequant.shape != wd.shape
                    or self.weight_dequant.dtype != wd.dtype):
                self.weight_dequant = wd
            else:
                self.weight_dequant.copy_(wd)
        elif self.format == "nvfp4":
            self._build_ao_linear()

    def _device(self) -> torch.device:
        return (self.codes if self.format == "nvfp4" else self.qweight).device

    def dequantized_weight(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``W_hat [out, in]`` in ``dtype`` (default: the compute dtype)."""
        dtype = dtype or self.compute_dtype
        if self.format == "nvfp4":
            return nvfp4_dequantize(self.codes, self.block_scale, self.tensor_scale, dtype)
        return fp8_dequantize(self.qweight, self.wscale, dtype)

    @property
    def weight(self) -> torch.Tensor:
        """The dequantized weight, for code that reads ``layer.weight`` (dtype/device checks, diagnostics)."""
        return self.weight_dequant if self.weight_dequant is not None else self.dequantized_weight()

    # ---- dtype/device moves must not cast the quantized storage ---------------------------------------------------
    def _apply(self, fn, recurse=True):
        keep = {n: self._buffers[n] for n in _FIXED_DTYPE_BUFFERS if self._buffers.get(n) is not None}
        super()._apply(fn, recurse)
        for n, old in keep.items():
            new = self._buffers[n]
            if new.dtype != old.dtype:  # a dtype cast (model.to(bf16)): keep the storage dtype, follow the device
                self._buffers[n] = old.to(new.device)
        return self

    # ---- forward ---------------------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"QuantLinear expected inputs [..., {self.in_features}], got {tuple(x.shape)}")
        x = x.to(self.compute_dtype)
        if self.backend == "real":
            return self._forward_real(x)
        if self.quantize_activations:
            x = nvfp4_fake_quant(x) if self.format == "nvfp4" else fp8_fake_quant(x, self.granularity)
        return F.linear(x, self.weight_dequant, self.bias)

    def _forward_real(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - needs a Hopper/Blackwell GPU
        if self.format == "nvfp4":
            return self._ao_linear(x)
        lead, K = x.shape[:-1], x.shape[-1]
        x2 = x.reshape(-1, K)
        M = x2.shape[0]
        pad = (-M) % 16  # _scaled_mm wants every dim a multiple of 16
        if pad:
            x2 = F.pad(x2, (0, 0, 0, pad))
        xq, xs = fp8_quantize(x2, self.granularity)
        if self.granularity == "tensor":
            sa, sb = xs.reshape(()), self.wscale.reshape(())
        else:
            sa, sb = xs.reshape(-1, 1), self.wscale.reshape(1, -1)
        y = torch._scaled_mm(xq, self.qweight.t(), scale_a=sa, scale_b=sb, bias=self.bias,
                             out_dtype=self.compute_dtype)
        return y[:M].reshape(*lead, self.out_features)

    def _build_ao_linear(self) -> None:  # pragma: no cover - needs torchao and a Blackwell GPU
        from torchao.quantization import quantize_

        from .backends import torchao_nvfp4_config

        conf_cls = torchao_nvfp4_config()
        lin = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device=self._device(),
                        dtype=self.compute_dtype)
        with torch.no_grad():
            # torchao re-derives its own (identical-scheme) NVFP4 storage from the high-precision weight; start it from
            # the emulated dequantization so both backends see the same weight grid
            lin.weight.copy_(self.dequantized_weight(torch.float32))
            if self.bias is not None:
                lin.bias.copy_(self.bias)
        try:
            conf = conf_cls(use_dynamic_per_tensor_scale=True) if self.quantize_activations else conf_cls()
        except TypeError:
            conf = conf_cls()
        quantize_(lin, conf)
        self._ao_linear = lin.requires_grad_(False)

    def extra_repr(self) -> str:
        gran = f", granularity={self.granularity}" if self.format == "fp8" else ""
        act = "W4A4" if self.format == "nvfp4" else "W8A8"
        if not self.quantize_activations:
            act = act.split("A")[0] + "A16"
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"format={self.format} ({act}){gran}, backend={self.backend}")

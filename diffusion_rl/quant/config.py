"""Configuration of the quantized rollout copy (Sol-RL's "FP4 explore, BF16 train").

Sol-RL (low-precision exploration for diffusion RL, 2025) samples a large candidate pool with an NVFP4 copy of the
denoiser and trains, in BF16, only on a contrastive subset regenerated at full precision. :class:`QuantConfig` says
which format the copy uses, on which backend, and which ``nn.Linear`` layers stay in high precision
(:class:`SkipRules`).

Skip rule (documented default, every part configurable). A linear layer named ``name`` (its qualified name in the
denoiser, e.g. ``transformer_blocks.0.attn.to_q``) is **kept in the copy's dtype** when

1. ``re.search(pattern, name)`` for any of ``patterns``: by default
   * ``embed``            -- embedders (``pos_embed``, ``time_text_embed``, ``context_embedder``, ``x_embedder``,
     Wan's ``condition_embedder``): they map conditioning into the residual stream and are tiny;
   * ``(^|\\.)norm``       -- norm / adaLN modulation linears (``norm1.linear``, ``norm1_context.linear``,
     ``norm_out.linear``): their outputs scale and shift every activation, so errors there are amplified;
   * ``^proj_out$``       -- the final output projection of the denoiser (the velocity itself); FLUX's per-block
     ``single_transformer_blocks.i.proj_out`` is *not* matched (anchored at the top level);
   * ``adaLN|modulation`` -- modulation layers under other names;
   plus ``extra_patterns``;
2. ``in_features < min_in_features`` (default 32): too small to gain anything;
3. ``in_features % 16 != 0`` when ``require_divisible`` (NVFP4 blocks are 16 wide; ``torch._scaled_mm`` needs
   ``K % 16 == 0`` too).

``force_patterns`` override rules 1-2 (never 3 for NVFP4, which cannot represent a partial block).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import torch

from .formats import NVFP4_BLOCK

QuantFormat = Literal["bf16", "fp8", "nvfp4"]
Backend = Literal["auto", "emulated", "real"]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEFAULT_SKIP_PATTERNS: tuple[str, ...] = ("embed", r"(^|\.)norm", r"^proj_out$", r"adaLN|modulation")


@dataclass
class SkipRules:
    """Which linear layers are *not* quantized (see module docstring)."""

    patterns: tuple[str, ...] = DEFAULT_SKIP_PATTERNS  # regexes of layer names kept in full precision
    extra_patterns: tuple[str, ...] = ()  # more such regexes, added to patterns
    force_patterns: tuple[str, ...] = ()  # regexes of layers quantized even if another rule skips them
    min_in_features: int = 32  # layers narrower than this stay in full precision
    require_divisible: bool = True  # skip layers whose in_features are not a multiple of 16

    def __post_init__(self) -> None:
        for p in (*self.patterns, *self.extra_patterns, *self.force_patterns):
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"skip rule pattern {p!r} is not a valid regular expression: {e}") from e
        if self.min_in_features < 0:
            raise ValueError(f"skip.min_in_features must be >= 0, got {self.min_in_features}")

    def reason(self, name: str, in_features: int, fmt: str) -> str | None:
        """Why the layer ``name`` stays unquantized, or ``None`` if it is quantized."""
        if self.require_divisible and in_features % NVFP4_BLOCK:
            return f"in_features={in_features} not a multiple of {NVFP4_BLOCK}"
        if fmt == "nvfp4" and in_features % NVFP4_BLOCK:
            return f"in_features={in_features} not a multiple of the NVFP4 block {NVFP4_BLOCK}"
        if any(re.search(p, name) for p in self.force_patterns):
            return None
        for p in (*self.patterns, *self.extra_patterns):
            if re.search(p, name):
                return f"name matches {p!r}"
        if in_features < self.min_in_features:
            return f"in_features={in_features} < min_in_features={self.min_in_features}"
        return None


@dataclass
class QuantConfig:
    """The rollout copy: ``format`` of the linear layers, ``backend`` that runs them, and what is skipped.

    * ``format``: ``"bf16"`` (reference: a plain copy in ``dtype``), ``"fp8"`` (E4M3), ``"nvfp4"``.
    * ``fp8_granularity``: ``"tensor"`` (one scale) or ``"row"`` (weights per output row, activations per token).
    * ``quantize_activations``: also quantize the linear inputs (dynamic scales per call), W4A4 / W8A8; else
      weight-only (W4A16 / W8A16).
    * ``backend``: ``"auto"`` (real kernels where the hardware has them, else emulation, silently), ``"emulated"``
      (fake-quant in ``dtype``, any device), ``"real"`` (real kernels; where missing: one warning and emulation, or
      :class:`QuantBackendError` if ``strict``).
    * ``dtype``: the copy's compute dtype (unquantized layers, activations, dequantized weights).
    """

    format: QuantFormat = "nvfp4"  # bf16 (plain copy), fp8 (E4M3) or nvfp4 (E2M1, 16-element blocks)
    fp8_granularity: Literal["tensor", "row"] = "row"  # fp8 scales: one per tensor, or per output row / token
    skip: SkipRules = field(default_factory=SkipRules)  # which linear layers stay unquantized
    quantize_activations: bool = True  # also quantize linear inputs (W4A4/W8A8); false: weight-only
    backend: Backend = "auto"  # auto (real kernels where present), emulated, or real
    strict: bool = False  # backend real: fail instead of falling back to emulation
    dtype: Literal["bf16", "fp16", "fp32"] = "bf16"  # compute dtype of the copy

    def __post_init__(self) -> None:
        if isinstance(self.skip, dict):
            self.skip = SkipRules(**{k: tuple(v) if isinstance(v, list) else v for k, v in self.skip.items()})

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


class QuantBackendError(RuntimeError):
    """``backend="real", strict=True`` on a device without the real kernels."""

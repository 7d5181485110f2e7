"""Low-precision exploration for diffusion RL (Sol-RL, issue 4): a quantized rollout copy of the denoiser.

* :mod:`.formats` -- NVFP4 (E2M1 values, E4M3 16-block scales, FP32 tensor scale) and FP8 E4M3 quantize/dequantize;
* :mod:`.config`  -- :class:`QuantConfig`, :class:`SkipRules`;
* :mod:`.backends` -- real kernels (FP8 ``torch._scaled_mm`` on cc >= 9.0, NVFP4 torchao on cc >= 10.0) vs emulation;
* :mod:`.linear`  -- :class:`QuantLinear`;
* :mod:`.copy`    -- :func:`make_rollout_copy`, :func:`refresh_rollout_copy`.

The two-stage rollout (pool in low precision, select, regenerate in bf16) is :mod:`diffusion_rl.pool_rollout`.
"""

from .backends import real_available, resolve_backend
from .config import QuantBackendError, QuantConfig, SkipRules
from .copy import effective_linear_weight, make_rollout_copy, refresh_rollout_copy
from .formats import (
                      fp8_dequantize,
                      fp8_fake_quant,
                      fp8_quantize,
                      nvfp4_dequantize,
                      nvfp4_fake_quant,
                      nvfp4_quantize,
                      round_to_e2m1,
)
from .linear import QuantLinear

__all__ = ["QuantConfig", "SkipRules", "QuantBackendError", "QuantLinear", "make_rollout_copy", "refresh_rollout_copy",
           "effective_linear_weight", "real_available", "resolve_backend", "nvfp4_quantize", "nvfp4_dequantize",
           "nvfp4_fake_quant", "fp8_quantize", "fp8_dequantize", "fp8_fake_quant", "round_to_e2m1"]

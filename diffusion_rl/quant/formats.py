"""Number formats of the quantized rollout copy: NVFP4 (E2M1 + E4M3 block scales + FP32 tensor scale) and FP8 E4M3.

Everything here is plain torch and runs on any device (the *emulated* path); the real kernels live in
:mod:`diffusion_rl.quant.linear` and consume the same quantized storage.

NVFP4 (NVIDIA, "Introducing NVFP4 for efficient and accurate low-precision inference", 2025; the two-level scheme
of Transformer Engine's ``NVFP4BlockScaling`` recipe and torchao's ``NVFP4Tensor``). A tensor ``x [..., K]`` with
``K % 16 == 0`` is cut into blocks of 16 consecutive elements along the last dim::

    s_t      = amax(|x|) / (6 * 448)                           FP32 per-tensor scale   (6 = E2M1 max, 448 = E4M3 max)
    s_b      = E4M3( amax_block(|x|) / (6 * s_t) )             one E4M3 scale per block, in [0, 448], RNE
    q        = E2M1( clamp(x / (s_b * s_t), -6, 6) )           RNE onto {0, 0.5, 1, 1.5, 2, 3, 4, 6} x sign
    x_hat    = q * s_b * s_t

Error bound (tested): where ``s_b`` is an E4M3 *normal* number (``s_b >= 2^-6``) its relative rounding error is at
most 2^-4, so ``|x / (s_b s_t)| <= 6 / (1 - 2^-4) = 6.4`` and every element of the block satisfies
``|x - x_hat| <= s_b * s_t`` (half of the largest E2M1 gap, 2, times the scale; saturation above 6 costs at most
0.4 of it). Blocks whose target scale underflows E4M3 (``< 2^-10``, i.e. 2^-9/2: more than ~17 binades below the
tensor's amax) quantize to zero: the format's dynamic range limit, not a bug.

Block scales below E4M3's smallest normal (``2^-6``) are kept as E4M3 *subnormals* here (what the cast gives, as TE
does); torchao's ``NVFP4Tensor`` floors them at ``2^-6``. The two differ only for blocks whose amax is below
``2^-6 * 6 * s_t``, about 3.5e-5 of the tensor's amax (``2^-6 / 448``); such blocks round to zero or near it in both.

Non-finite values in the fake quantizers: NaN and +-inf pass through unchanged, and the scales are computed from the
*finite* values only, so one inf in a tensor does not turn every finite value to 0 (as ``nan_to_num`` to
+-3.4e38 would, through a tensor amax of 3.4e38).

Storage (per NVFP4 tensor ``[R, K]``): ``codes`` uint8 ``[R, K/2]`` (two 4-bit E2M1 codes per byte, element
``2i`` in the low nibble, ``2i+1`` in the high nibble; code = ``sign << 3 | magnitude index`` with magnitudes
``E2M1_GRID``), ``block_scale`` ``float8_e4m3fn [R, K/16]``, ``tensor_scale`` FP32 scalar: 4.5 bits per value.

FP8 E4M3 (Micikevicius et al. 2022, "FP8 formats for deep learning"): ``s = amax / 448`` per tensor or per row
(``[R, 1]``), ``q = float8_e4m3fn(clamp(x / s, -448, 448))`` (torch's cast rounds to nearest even), ``x_hat = q s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

E2M1_MAX = 6.0
E4M3_MAX = 448.0
NVFP4_BLOCK = 16
E4M3_MIN_NORMAL = 2.0**-6
E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # magnitudes; index = the 3 low bits of the E2M1 code

Fp8Granularity = Literal["tensor", "row"]


def _check_finite(x: torch.Tensor, what: str) -> None:
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{what}: input holds NaN/inf; only finite tensors can be quantized")


def _finite_or_zero(x: torch.Tensor) -> torch.Tensor:
    """``x`` in FP32 with NaN/+-inf replaced by 0, so that scales come from the finite values only."""
    xf = x.float()
    return torch.where(torch.isfinite(xf), xf, torch.zeros_like(xf))


# ---- E2M1 ------------------------------------------------------------------------------------------------------
def round_to_e2m1(y: torch.Tensor) -> torch.Tensor:
    """Round FP32 ``y`` to the nearest E2M1 value, ties to even mantissa, saturating at +-6.

    The E2M1 grid is uniform with step 0.5 on [0, 2), 1 on [2, 4), 2 on [4, 6]; the region boundaries are grid
    points, so ``round_half_even(|y| / step) * step`` per region is exactly IEEE RNE onto the grid
    (e.g. 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 2.5 -> 2, 5 -> 4).
    """
    a = y.float().abs().clamp(max=E2M1_MAX)
    step = torch.where(a < 2, torch.full_like(a, 0.5), torch.where(a < 4, torch.ones_like(a), torch.full_like(a, 2.0)))
    return torch.copysign(torch.round(a / step) * step, y.float())


def e2m1_encode(q: torch.Tensor) -> torch.Tensor:
    """E2M1 values (on the grid) -> 4-bit codes ``uint8`` (``sign << 3 | index``)."""
    a = q.abs()
    idx = torch.where(a < 2, a * 2, torch.where(a < 4, a + 2, a / 2 + 4)).to(torch.uint8)
    sign = (torch.signbit(q) & (a > 0)).to(torch.uint8)
    return idx | (sign << 3)


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes -> FP32 values."""
    grid = torch.tensor(E2M1_GRID, dtype=torch.float32, device=codes.device)
    mag = grid[(codes & 0x7).long()]
    return torch.where((codes & 0x8) > 0, -mag, mag)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """``[..., K]`` uint8 codes < 16 -> ``[..., K/2]`` (element 2i low nibble, 2i+1 high nibble)."""
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_nibbles`: ``[..., K/2]`` -> ``[..., K]``."""
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).flatten(-2)


# ---- NVFP4 -----------------------------------------------------------------------------------------------------
@dataclass
class NVFP4Quantized:
    """Quantized storage of ``x [..., K]`` (see module docstring)."""

    codes: torch.Tensor  # uint8 [..., K/2]
    block_scale: torch.Tensor  # float8_e4m3fn [..., K/16]
    tensor_scale: torch.Tensor  # float32 []

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return nvfp4_dequantize(self.codes, self.block_scale, self.tensor_scale, dtype)


def nvfp4_tensor_scale(x: torch.Tensor) -> torch.Tensor:
    """``s_t = amax / (6 * 448)`` (FP32 scalar); 1 where the tensor is all zero (or its amax underflows)."""
    amax = x.detach().float().abs().amax()
    s = amax / (E2M1_MAX * E4M3_MAX)
    return torch.where(s > 0, s, torch.ones_like(s))


def _nvfp4_scaled(x: torch.Tensor,
                  tensor_scale: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(q [..., K/16, 16] FP32 on the E2M1 grid, block_scale e4m3 [..., K/16], tensor_scale [])``."""
    K = x.shape[-1]
    if K % NVFP4_BLOCK:
        raise ValueError(f"NVFP4 quantizes blocks of {NVFP4_BLOCK} along the last dim: its size {K} is not a "
                         f"multiple of {NVFP4_BLOCK} (shape {tuple(x.shape)})")
    xf = x.float()
    ts = nvfp4_tensor_scale(xf) if tensor_scale is None else tensor_scale.float().reshape(())
    blocks = xf.reshape(*xf.shape[:-1], K // NVFP4_BLOCK, NVFP4_BLOCK)
    target = blocks.abs().amax(dim=-1) / (E2M1_MAX * ts)
    sb = target.clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    eff = sb.float() * ts  # [..., K/16]
    safe = torch.where(eff > 0, eff, torch.ones_like(eff))
    y = torch.where(eff[..., None] > 0, blocks / safe[..., None], torch.zeros_like(blocks))
    return round_to_e2m1(y), sb, ts


def nvfp4_quantize(x: torch.Tensor, tensor_scale: torch.Tensor | None = None) -> NVFP4Quantized:
    """Quantize ``x [..., K]`` (``K % 16 == 0``, finite) to NVFP4; ``tensor_scale`` overrides ``s_t`` (calibrated)."""
    _check_finite(x, "nvfp4_quantize")
    q, sb, ts = _nvfp4_scaled(x, tensor_scale)
    codes = e2m1_encode(q).reshape(*x.shape)
    return NVFP4Quantized(pack_nibbles(codes), sb, ts)


def nvfp4_dequantize(codes: torch.Tensor, block_scale: torch.Tensor, tensor_scale: torch.Tensor,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``x_hat = q * s_b * s_t`` in FP32, then cast to ``dtype``; shape ``[..., K]`` with ``K = 2 *
    codes.shape[-1]``."""
    q = e2m1_decode(unpack_nibbles(codes))
    blocks = q.reshape(*q.shape[:-1], -1, NVFP4_BLOCK)
    out = blocks * (block_scale.float() * tensor_scale.float())[..., None]
    return out.reshape(q.shape).to(dtype)


def nvfp4_fake_quant(x: torch.Tensor, tensor_scale: torch.Tensor | None = None) -> torch.Tensor:
    """``dequantize(quantize(x))`` in ``x.dtype`` without packing (the emulated activation path).

    Activations use a dynamic per-tensor ``s_t`` (the amax of this call), as TE's NVFP4 recipe does for inputs.
    Non-finite inputs are passed through (NaN in, NaN out, inf in, inf out) rather than raising in the middle of a
    forward pass; the finite values are quantized against the finite amax (non-finite ones count as 0 in the scales).
    """
    q, sb, ts = _nvfp4_scaled(_finite_or_zero(x), tensor_scale)
    out = (q * (sb.float() * ts)[..., None]).reshape(x.shape)
    return torch.where(torch.isfinite(x), out, x.float()).to(x.dtype)


# ---- FP8 E4M3 --------------------------------------------------------------------------------------------------
def fp8_scale(x: torch.Tensor, granularity: Fp8Granularity = "tensor") -> torch.Tensor:
    """``amax / 448``: a FP32 scalar (``"tensor"``) or ``[..., R, 1]`` (``"row"``, amax over the last dim); 1 where
    0."""
    if granularity not in ("tensor", "row"):
        raise ValueError(f"fp8 granularity must be 'tensor' or 'row', got {granularity!r}")
    xa = x.detach().float().abs()
    amax = xa.amax() if granularity == "tensor" else xa.amax(dim=-1, keepdim=True)
    s = amax / E4M3_MAX
    return torch.where(s > 0, s, torch.ones_like(s))


def fp8_quantize(x: torch.Tensor, granularity: Fp8Granularity = "tensor",
                 scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q float8_e4m3fn, scale FP32)`` with ``x ~ q * scale`` (see module docstring)."""
    s = fp8_scale(x, granularity) if scale is None else scale.float()
    q = (x.float() / s).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, s


def fp8_dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (q.float() * scale.float()).to(dtype)


def fp8_fake_quant(x: torch.Tensor, granularity: Fp8Granularity = "tensor") -> torch.Tensor:
    """``dequantize(quantize(x))`` in ``x.dtype`` (dynamic scale of this call from the finite values; NaN/inf pass
    through)."""
    xf = _finite_or_zero(x)
    q, s = fp8_quantize(xf, granularity)
    return torch.where(torch.isfinite(x), q.float() * s, x.float()).to(x.dtype)

"""NVFP4 / FP8 number formats: exact grid values, RNE ties, per-block error bounds, E4M3 scales, zeros, huge values."""

import pytest
import torch

from diffusion_rl.quant.formats import (
    E2M1_GRID,
    E4M3_MIN_NORMAL,
    NVFP4_BLOCK,
    e2m1_decode,
    e2m1_encode,
    fp8_dequantize,
    fp8_fake_quant,
    fp8_quantize,
    nvfp4_fake_quant,
    nvfp4_quantize,
    pack_nibbles,
    round_to_e2m1,
    unpack_nibbles,
)

GRID = torch.tensor(E2M1_GRID)
ALL_E2M1 = torch.cat([GRID, -GRID[1:]])


def test_every_e2m1_value_is_exact():
    assert torch.equal(round_to_e2m1(ALL_E2M1), ALL_E2M1)
    assert torch.equal(e2m1_decode(e2m1_encode(ALL_E2M1)), ALL_E2M1)
    codes = torch.tensor([c for c in range(16) if c != 8], dtype=torch.uint8)  # 8 is -0
    assert torch.equal(e2m1_encode(e2m1_decode(codes)), codes)


def test_e2m1_round_to_nearest_even_and_saturation():
    x = torch.tensor([0.24, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 6.5, 1e9, -0.75, -5.0, -100.0])
    want = torch.tensor([0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 6.0, -1.0, -4.0, -6.0])
    assert torch.equal(round_to_e2m1(x), want)


def test_nibble_packing_round_trip():
    codes = torch.randint(0, 16, (3, 32), dtype=torch.uint8)
    packed = pack_nibbles(codes)
    assert packed.shape == (3, 16) and torch.equal(unpack_nibbles(packed), codes)


def test_nvfp4_grid_tensor_round_trips():
    # a tensor whose amax is 6: s_t = 6/2688, every block with amax 6 gets s_b = 448 and values stay on the grid
    x = ALL_E2M1[torch.randint(0, 15, (4, 64), generator=torch.Generator().manual_seed(0))]
    x.view(4, -1, NVFP4_BLOCK)[..., 0] = 6.0
    q = nvfp4_quantize(x)
    assert torch.allclose(q.dequantize(), x, rtol=1e-6, atol=0)
    assert torch.equal(e2m1_decode(unpack_nibbles(q.codes)), x)  # the codes are exactly the grid values


def _blocks(t):
    return t.reshape(*t.shape[:-1], -1, NVFP4_BLOCK)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nvfp4_error_bound_per_block(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(32, 128, generator=g) * torch.logspace(-2, 2, 32)[:, None]  # rows over 4 decades
    x[0, :16] *= 50  # an outlier block
    q = nvfp4_quantize(x)
    xh = q.dequantize()
    eff = q.block_scale.float() * q.tensor_scale  # [32, 8]
    err = _blocks((x - xh).abs()).amax(-1)
    normal = q.block_scale.float() >= E4M3_MIN_NORMAL
    assert normal.float().mean() > 0.9
    assert bool((err[normal] <= eff[normal] * (1 + 1e-6)).all())
    # and the bound in terms of the data: s_b s_t <= (1 + 2^-4) amax_block / 6
    amax = _blocks(x.abs()).amax(-1)
    assert bool((eff[normal] <= amax[normal] / 6 * (1 + 2**-4) * (1 + 1e-6)).all())
    # fake-quant (activations) is the same math without packing
    assert torch.equal(nvfp4_fake_quant(x), xh)


def test_nvfp4_scales_are_e4m3_representable():
    x = torch.randn(16, 256, generator=torch.Generator().manual_seed(3)) * 7
    q = nvfp4_quantize(x)
    assert q.block_scale.dtype == torch.float8_e4m3fn and q.block_scale.shape == (16, 16)
    s = q.block_scale.float()
    assert torch.equal(s.to(torch.float8_e4m3fn).float(), s)
    assert bool(torch.isfinite(s).all()) and float(s.max()) <= 448.0
    assert float(s.max()) == 448.0  # the block holding the tensor amax uses the full E4M3 range
    assert q.tensor_scale.dtype == torch.float32 and q.tensor_scale.dim() == 0
    assert torch.isclose(q.tensor_scale, x.abs().max() / (6 * 448))


def test_nvfp4_zero_and_huge_blocks_stay_finite():
    x = torch.zeros(2, 64)
    q = nvfp4_quantize(x)
    assert torch.equal(q.dequantize(), x) and float(q.tensor_scale) == 1.0
    y = torch.randn(2, 64)
    y[0, :16] = 0.0  # an all-zero block next to normal ones
    y[1, 16:32] = 3.0e38  # near the FP32 max
    y[1, 32:48] = -1.0e-30  # tiny next to huge: underflows the E4M3 block scale -> zeros, not NaN
    q = nvfp4_quantize(y)
    yh = q.dequantize()
    assert bool(torch.isfinite(yh).all()) and bool(torch.isfinite(q.block_scale.float()).all())
    assert torch.equal(yh[0, :16], torch.zeros(16))
    assert torch.allclose(yh[1, 16:32], y[1, 16:32], rtol=0.2)
    assert bool(torch.isfinite(nvfp4_fake_quant(y)).all())


def test_nvfp4_bad_inputs():
    with pytest.raises(ValueError, match="multiple of 16"):
        nvfp4_quantize(torch.randn(2, 24))
    with pytest.raises(ValueError, match="NaN/inf"):
        nvfp4_quantize(torch.tensor([[float("nan")] * 16]))


@pytest.mark.parametrize("gran", ["tensor", "row"])
def test_fp8_round_trip_and_bound(gran):
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(4)) * torch.logspace(-3, 3, 8)[:, None]
    q, s = fp8_quantize(x, gran)
    assert q.dtype == torch.float8_e4m3fn and s.shape == ((8, 1) if gran == "row" else ())
    xh = fp8_dequantize(q, s)
    # E4M3: relative error <= 2^-4 for normals, absolute <= 2^-10 * scale below the normal range
    assert bool(((x - xh).abs() <= x.abs() * 2**-4 + 2**-10 * s).all())
    assert torch.equal(fp8_dequantize(*fp8_quantize(xh, gran, s)), xh)  # idempotent
    assert torch.equal(fp8_fake_quant(x, gran), xh)
    z = fp8_fake_quant(torch.zeros(3, 16), gran)
    assert torch.equal(z, torch.zeros(3, 16))
    big = fp8_fake_quant(torch.full((2, 16), 3e38), gran)
    assert bool(torch.isfinite(big).all())


def test_fp8_bad_granularity():
    with pytest.raises(ValueError, match="'tensor' or 'row'"):
        fp8_quantize(torch.randn(2, 16), "block")


def test_fake_quant_with_inf_keeps_finite_values():
    # one inf must not zero the finite values: NaN/inf pass through, the rest is quantized against the finite amax
    x = torch.tensor([1.0, float("nan"), float("inf"), 0.0])
    y = fp8_fake_quant(x)
    assert y[0] == 1.0 and torch.isnan(y[1]) and y[2] == float("inf") and y[3] == 0.0
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 32, generator=g)
    xi = x.clone()
    xi[0, 3], xi[1, 5], xi[2, 7] = float("inf"), float("-inf"), float("nan")
    finite = torch.isfinite(xi)
    for fq in (fp8_fake_quant, lambda t: fp8_fake_quant(t, "row"), nvfp4_fake_quant):
        yi = fq(xi)
        # the finite values come out as the quantizer gives them for the same tensor with the non-finite ones at 0
        torch.testing.assert_close(yi[finite], fq(torch.where(finite, xi, torch.zeros_like(xi)))[finite])
        assert yi[0, 3] == float("inf") and yi[1, 5] == float("-inf") and torch.isnan(yi[2, 7])
        assert (yi[finite] - xi[finite]).abs().max() < 0.5 * xi[finite].abs().max()

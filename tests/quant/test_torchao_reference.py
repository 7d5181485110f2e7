"""Our emulated NVFP4 / FP8 (diffusion_rl.quant.formats) against torchao's own quantize functions, run on CPU.

torchao (0.18.0) runs in a process of its own from ``<venv>/torchao-ref`` (tests/quant/torchao_ref.py says why it
is kept out of the venv's site-packages); ``make install`` puts it there.

What matches, exactly (bit for bit): NVFP4's per-tensor scale, its E4M3 block scales, the E2M1 codes (up to the
sign of zero: torchao stores a negative value that rounds to 0 as -0, code 8, we store +0) and the dequantized
values, for blocks whose scale is an E4M3 normal number; FP8 E4M3's per-tensor and per-row scales and codes.

The deliberate differences, one case each:
* NaN / inf inputs: torchao's amax takes them in (a NaN or infinite tensor scale: every dequantized value NaN);
  ours computes the scales from the finite values and passes NaN / inf through, so at the finite positions it
  equals torchao on the same tensor with the non-finite values set to 0.
* sub-normal block scales: torchao floors an NVFP4 block scale at E4M3's smallest normal, 2^-6; we keep the E4M3
  sub-normal the cast gives (as Transformer Engine does). Only blocks whose amax is below 2^-6 / 448 of the tensor's
  amax differ.
* an all-zero FP8 tensor: torchao's scale is 0 and dequantizes to NaN; ours is 1 and gives zeros.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from diffusion_rl.quant.formats import (
    E4M3_MIN_NORMAL,
    fp8_fake_quant,
    fp8_quantize,
    nvfp4_fake_quant,
    nvfp4_quantize,
    unpack_nibbles,
)

TORCHAO_DIR = Path(sys.prefix) / "torchao-ref"
TORCHAO_VERSION = "0.18.0"


def _data(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(32, 128, generator=g) * torch.logspace(-2, 2, 32)[:, None]  # rows over 4 decades
    x[0, :16] *= 50  # an outlier block
    return x


def _nonfinite() -> dict[str, torch.Tensor]:
    x = _data(3)[:4, :64].clone()
    x[0, 3], x[2, 20] = float("nan"), float("inf")
    x_inf = x.clone()
    x_inf[0, 3] = 1.0  # inf only
    zero = lambda t: torch.where(torch.isfinite(t), t, torch.zeros_like(t))  # noqa: E731
    return {"nan": x, "nan_zeroed": zero(x), "inf": x_inf, "inf_zeroed": zero(x_inf)}


def _subnormal() -> torch.Tensor:
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    x[1, 16:32] *= 2e-5  # block (1, 1): 2e-5 of the tensor's amax
    return x


INPUTS = {**{f"seed{s}": _data(s) for s in range(3)}, **_nonfinite(), "subnormal": _subnormal(),
          "zeros": torch.zeros(2, 16)}


@pytest.fixture(scope="module")
def ao(tmp_path_factory):
    """torchao's outputs for every tensor of INPUTS (tests/quant/torchao_ref.py in a subprocess)."""
    assert (TORCHAO_DIR / "torchao").is_dir(), (
        f"torchao is not installed in {TORCHAO_DIR}: make install (or pip install --no-deps --target {TORCHAO_DIR} "
        f"torchao=={TORCHAO_VERSION})")
    d = tmp_path_factory.mktemp("torchao")
    torch.save(INPUTS, d / "in.pt")
    env = {**os.environ, "PYTHONPATH": str(TORCHAO_DIR), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, str(Path(__file__).with_name("torchao_ref.py")), str(d / "in.pt"),
                        str(d / "out.pt")], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = torch.load(d / "out.pt")
    assert out.pop("__version__") == TORCHAO_VERSION
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nvfp4_equals_torchao(ao, seed):
    x, ref = INPUTS[f"seed{seed}"], ao[f"seed{seed}"]
    ours = nvfp4_quantize(x)
    assert bool((ours.block_scale.float() >= E4M3_MIN_NORMAL).all())  # every block scale normal: no difference here
    assert torch.equal(ours.tensor_scale, ref["nvfp4_ts"])
    assert ours.block_scale.dtype == ref["nvfp4_sb"].dtype
    assert torch.equal(ours.block_scale.float(), ref["nvfp4_sb"].float())
    theirs = ref["nvfp4_codes"]
    minus_zero = theirs == 8  # torchao keeps the sign of a value rounded to 0; we store +0
    assert torch.equal(unpack_nibbles(ours.codes), torch.where(minus_zero, torch.zeros_like(theirs), theirs))
    assert bool((x[minus_zero] < 0).all())
    assert torch.equal(ours.dequantize(), ref["nvfp4_deq"])
    assert torch.equal(nvfp4_fake_quant(x), ref["nvfp4_deq"])  # the activation path: the same numbers


@pytest.mark.parametrize("gran", ["tensor", "row"])
@pytest.mark.parametrize("seed", [0, 1])
def test_fp8_equals_torchao(ao, seed, gran):
    x, ref = INPUTS[f"seed{seed}"], ao[f"seed{seed}"]
    q, s = fp8_quantize(x, gran)
    assert torch.equal(s, ref[f"fp8_{gran}_scale"].reshape(s.shape))
    assert q.dtype == ref[f"fp8_{gran}_q"].dtype == torch.float8_e4m3fn
    assert torch.equal(q.view(torch.uint8), ref[f"fp8_{gran}_q"].view(torch.uint8))
    assert torch.equal(fp8_fake_quant(x, gran), ref[f"fp8_{gran}_deq"])


def test_difference_nan_and_inf_inputs(ao):
    """torchao: one NaN or one inf makes every dequantized value NaN (a NaN scale; or an infinite one, by which the
    finite values round to 0 and 0 x inf is NaN); ours: NaN / inf pass through and the finite values are what
    torchao gives for the tensor with the non-finite ones set to 0."""
    for name in ("nan", "inf"):
        x = INPUTS[name]
        fin = torch.isfinite(x)
        assert bool(torch.isnan(ao[name]["nvfp4_deq"]).all()) and bool(torch.isnan(ao[name]["fp8_tensor_deq"]).all())
        for ours in (nvfp4_fake_quant(x), fp8_fake_quant(x)):
            assert torch.equal(torch.isnan(ours), torch.isnan(x)) and torch.equal(torch.isinf(ours), torch.isinf(x))
            assert torch.equal(ours[torch.isinf(x)], x[torch.isinf(x)])  # the same signed infinities
        ref = ao[f"{name}_zeroed"]
        assert torch.equal(nvfp4_fake_quant(x)[fin], ref["nvfp4_deq"][fin])
        assert torch.equal(fp8_fake_quant(x)[fin], ref["fp8_tensor_deq"][fin])
        assert torch.equal(fp8_fake_quant(x, "row")[fin], ref["fp8_row_deq"][fin])


def test_difference_subnormal_block_scale(ao):
    """A block 2e-5 times smaller than the tensor's amax: its target scale (0.0059) is below E4M3's smallest normal.
    We keep the E4M3 sub-normal (0.005859375 = 3 x 2^-9), torchao floors it at 2^-6; every other block is equal.
    Both stay within the block's error bound (half the largest E2M1 gap times the block's own scale)."""
    x, ref = INPUTS["subnormal"], ao["subnormal"]
    ours = nvfp4_quantize(x)
    ts, sb, deq = ref["nvfp4_ts"], ref["nvfp4_sb"].float(), ref["nvfp4_deq"]
    target = x[1, 16:32].abs().amax() / (6 * ours.tensor_scale)
    assert float(target) < E4M3_MIN_NORMAL
    assert float(ours.block_scale.float()[1, 1]) == float(target.to(torch.float8_e4m3fn).float()) == 3 * 2**-9
    assert float(sb[1, 1]) == E4M3_MIN_NORMAL
    other = torch.ones(4, 4, dtype=torch.bool)
    other[1, 1] = False
    assert torch.equal(ours.block_scale.float()[other], sb[other])
    d = ours.dequantize()
    rest = torch.ones(4, 64, dtype=torch.bool)
    rest[1, 16:32] = False
    assert torch.equal(d[rest], deq[rest]) and not torch.equal(d[1, 16:32], deq[1, 16:32])
    assert (d - x)[1, 16:32].abs().max() <= ours.block_scale.float()[1, 1] * ts
    assert (deq - x)[1, 16:32].abs().max() <= sb[1, 1] * ts


def test_difference_all_zero_fp8_tensor(ao):
    z, ref = INPUTS["zeros"], ao["zeros"]
    assert float(ref["fp8_tensor_scale"]) == 0 and bool(torch.isnan(ref["fp8_tensor_deq"]).all())
    _, s = fp8_quantize(z)
    assert float(s) == 1.0 and torch.equal(fp8_fake_quant(z), z)

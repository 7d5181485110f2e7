"""torchao's own NVFP4 / FP8 quantize functions on CPU, run in a process of its own
(tests/quant/test_torchao_reference.py).

    python tests/quant/torchao_ref.py IN.pt OUT.pt      # with torchao on PYTHONPATH (the venv's torchao-ref/)

IN.pt: ``{name: FP32 tensor [R, K]}``. OUT.pt: ``{name: {...}}`` with torchao's NVFP4 (``nvfp4_ts`` per-tensor scale,
``nvfp4_sb`` E4M3 block scales, ``nvfp4_codes`` unpacked 4-bit codes ``[R, K]``, ``nvfp4_deq`` ``NVFP4Tensor``'s
dequantized FP32) and FP8 E4M3 per tensor and per row (``fp8_<g>_scale``, ``fp8_<g>_q``, ``fp8_<g>_deq``).

torchao lives outside the venv's site-packages (Makefile: ``pip install --target .venv/torchao-ref``) because
diffusers 0.36 fails to import with any torchao newer than 0.15 (its torchao quantizer imports layouts those
releases removed) and peft refuses torchao older than 0.16; this process imports neither.
"""

from __future__ import annotations

import sys

import torch


def reference(x: torch.Tensor) -> dict[str, torch.Tensor]:
    from torchao.prototype.mx_formats.kernels import unpack_uint4
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, nvfp4_quantize, per_tensor_amax_to_scale
    from torchao.quantization.quant_primitives import (
        _choose_scale_float8,
        _dequantize_affine_float8,
        _quantize_affine_float8,
    )

    out: dict[str, torch.Tensor] = {}
    ts = per_tensor_amax_to_scale(x.abs().amax())
    sb, packed = nvfp4_quantize(x.contiguous(), 16, ts)
    out.update(nvfp4_ts=ts, nvfp4_sb=sb, nvfp4_codes=unpack_uint4(packed).reshape(x.shape),
               nvfp4_deq=NVFP4Tensor.to_nvfp4(x, per_tensor_scale=ts).dequantize(torch.float32))
    for gran, block in (("tensor", list(x.shape)), ("row", [1, x.shape[1]])):
        s = _choose_scale_float8(x, block)
        q = _quantize_affine_float8(x, s)
        out.update({f"fp8_{gran}_scale": s, f"fp8_{gran}_q": q, f"fp8_{gran}_deq": _dequantize_affine_float8(q, s)})
    return out


def main(argv: list[str]) -> int:
    import torchao

    inputs = torch.load(argv[0])
    res = {name: reference(x) for name, x in inputs.items()}
    res["__version__"] = torchao.__version__
    torch.save(res, argv[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

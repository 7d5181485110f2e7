"""Memory and FLOPs of a module's pass without weights or a GPU: the module is built on the ``meta`` device, its
parameters become fake tensors (``torch._subclasses.fake_tensor``: shapes and dtypes only), and the pass runs under
``FakeTensorMode`` twice, once under ``torch.utils.flop_counter.FlopCounterMode`` (FLOPs) and once under
:class:`PeakMemory` (the peak of live bytes created by the pass; weights and inputs excluded). The two runs are
separate because the FLOP counter's module hooks keep checkpointed activations alive.

Shared by the frontends' ``--plan`` (``diffusion_rl.plan`` for the denoisers, ``vla_rl.plan`` for the VLA policies and
the world model); the fake CPU device makes ``scaled_dot_product_attention`` take its fused O(S)-memory kernel, as a
GPU does, whose FLOPs are registered here with the formulas torch uses for the CUDA kernels.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

GiB = 2 ** 30


@dataclass
class Trace:
    flops: float  # FLOPs of the traced pass
    peak: float  # peak bytes created by the pass (weights and inputs excluded)


# ---- FLOPs of the CPU fused attention kernel (what SDPA runs on fake CPU tensors) --------------------------------
def register_cpu_flash_flops() -> None:
    """``FlopCounterMode`` knows the CUDA SDPA kernels; register the same formulas (4 B H S_q S_k D forward,
    twice that plus the recompute backward, torch.utils.flop_counter.sdpa_*flop_count) for the CPU kernel."""
    from torch.utils.flop_counter import flop_registry, register_flop_formula, sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten
    fwd = aten._scaled_dot_product_flash_attention_for_cpu
    bwd = aten._scaled_dot_product_flash_attention_for_cpu_backward
    if fwd.default not in flop_registry and fwd not in flop_registry:
        @register_flop_formula(fwd)
        def _fwd(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
            return sdpa_flop_count(query_shape, key_shape, value_shape)

    if bwd.default not in flop_registry and bwd not in flop_registry:
        @register_flop_formula(bwd)
        def _bwd(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
            return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


class PeakMemory(TorchDispatchMode):
    """Live bytes of every storage created by a dispatched op (views share their base's storage), freed when the
    storage is garbage-collected; ``peak`` is the maximum. Storages passed to :meth:`ignore` (weights, inputs that
    exist before the traced region) are not counted. Works on real and fake tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def ignore(self, tensors) -> None:
        for t in tensors:
            self._seen[t.untyped_storage()] = None

    def reset_peak(self) -> None:
        self.peak = self.live

    def _freed(self, n: int, _ref) -> None:
        self.live -= n

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and not t.is_meta:
                st = t.untyped_storage()
                if st in self._seen:
                    continue
                n = st.nbytes()
                self._seen[st] = weakref.ref(st, lambda r, n=n: self._freed(n, r))
                self.live += n
                self.peak = max(self.peak, self.live)
        return out


def to_fake(module: torch.nn.Module, fake_mode, device: torch.device) -> list[torch.Tensor]:
    """Replace every parameter / buffer (and plain tensor attribute, e.g. Qwen-Image's RoPE tables) by a fake tensor on
    ``device`` (same shape, dtype, requires_grad); meta ones keep no data, real ones (a buffer a module makes on the
    CPU explicitly) are converted by the fake mode."""
    from torch._subclasses.fake_tensor import FakeTensor

    def fake(t: torch.Tensor) -> torch.Tensor:
        return FakeTensor(fake_mode, t, device) if t.is_meta else fake_mode.from_tensor(t)

    out = []
    for m in module.modules():
        for n, p in list(m._parameters.items()):
            if p is not None:
                m._parameters[n] = torch.nn.Parameter(fake(p.data), requires_grad=p.requires_grad)
                out.append(m._parameters[n])
        for n, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[n] = fake(b)
                out.append(m._buffers[n])
        for n, v in list(vars(m).items()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter) and v.is_meta:
                setattr(m, n, fake(v))
                out.append(getattr(m, n))
    return out


def trace_pass(build: Callable[[], torch.nn.Module], inputs: Callable[[torch.nn.Module], Any],
               run: Callable[[torch.nn.Module, Any], None], grad: bool = True) -> Trace:
    """FLOPs and transient peak of ``run(module, inputs(module))`` on fake tensors. ``build()`` returns the module on
    the meta device (a fresh one per run: a pass may leave state behind); ``inputs`` creates the pass's inputs
    (inside the fake mode; not counted in the peak); ``grad=False`` runs under ``torch.no_grad()``."""
    import contextlib

    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    register_cpu_flash_flops()

    def once(what: str) -> float:
        m = build()
        fm = FakeTensorMode()
        held = to_fake(m, fm, torch.device("cpu"))
        mem, flops = PeakMemory(), FlopCounterMode(display=False)
        with fm:
            x = inputs(m)
            mem.ignore([*held, *(t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor))])
            with (mem if what == "memory" else flops), (contextlib.nullcontext() if grad else torch.no_grad()):
                run(m, x)
        return float(mem.peak) if what == "memory" else float(flops.get_total_flops())

    return Trace(once("flops"), once("memory"))

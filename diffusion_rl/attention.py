"""Attention kernel of the denoiser (``model.attention``): ``sdpa`` (default) | ``xformers`` | ``flash``.

* ``sdpa``: PyTorch's ``F.scaled_dot_product_attention``, what diffusers' processors call by default; on CUDA with
  bf16/fp16 PyTorch itself dispatches it to its FlashAttention-2 or memory-efficient kernel, on CPU to the math one.
  On a CUDA model, PyTorch's cuDNN attention kernel is switched off (``torch.backends.cuda.enable_cudnn_sdp(False)``,
  a process-wide switch): on an H100 (torch 2.11.0+cu130, which prefers cuDNN's kernel on Hopper) its backward failed
  on FLUX.1-dev's training shapes (``mha_graph.execute(...).is_good()``, then an illegal memory access), and the same
  iteration ran with it off (docs/RESULTS.md, "GPU node without internet"). A user who wants it back calls
  ``torch.backends.cuda.enable_cudnn_sdp(True)`` after the model is built.
* ``xformers``: xformers' ``memory_efficient_attention`` (Rabe & Staats 2021 / Dao et al. 2022 style tiling).
  FLUX and Wan: diffusers' attention backend ``"xformers"`` (``model.set_attention_backend``, dispatched per call in
  ``diffusers.models.attention_dispatch``); SD3: its joint-attention processor ``XFormersJointAttnProcessor``
  (``enable_xformers_memory_efficient_attention``), since SD3's processor has no backend dispatch in diffusers 0.36.
* ``flash``: the ``flash-attn`` package (FlashAttention-2, Dao 2023) through diffusers' backend ``"flash"``; CUDA only
  (fp16/bf16). SD3's joint processor cannot dispatch to it in diffusers 0.36, so SD3 refuses ``flash`` and says to use
  ``sdpa``, which reaches PyTorch's own flash kernel on CUDA.

A backend whose package is not installed (or that needs CUDA on a CPU device) is one error naming the package and
the fallback; nothing is silently downgraded.
"""

from __future__ import annotations

import importlib.util

import torch

ATTENTION = ("sdpa", "xformers", "flash")
PACKAGES = {"xformers": ("xformers", "pip install xformers"), "flash": ("flash_attn", "pip install flash-attn")}


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def check_attention(name: str, kind: str, device: torch.device) -> None:
    """Refuse an unknown, uninstalled or inapplicable backend (before anything is changed)."""
    if name not in ATTENTION:
        raise ValueError(f"model.attention={name!r}: expected one of {list(ATTENTION)}")
    if name == "sdpa":
        return
    module, how = PACKAGES[name]
    if name == "flash" and kind == "sd3":
        raise ValueError("model.attention=flash: SD3's joint-attention processor has no flash-attn dispatch in "
                         "diffusers 0.36; use model.attention=sdpa (PyTorch runs its own flash kernel for bf16 on "
                         "CUDA)")
    if not installed(module):
        raise ValueError(f"model.attention={name}: the {module} package is not installed ({how}); use "
                         "model.attention=sdpa (the default)")
    if torch.device(device).type != "cuda":
        raise ValueError(f"model.attention={name} runs on CUDA only, the model is on {device}; use "
                         "model.attention=sdpa")


def set_attention(transformer, name: str, kind: str, device: torch.device) -> str:
    """Switch ``transformer``'s attention to ``name``; returns a short description of what runs."""
    check_attention(name, kind, device)
    if name == "sdpa":
        if torch.device(device).type == "cuda":
            torch.backends.cuda.enable_cudnn_sdp(False)  # its backward failed on FLUX shapes (module docstring)
            return "torch scaled_dot_product_attention (flash / memory-efficient; cuDNN's kernel off)"
        return "torch scaled_dot_product_attention"
    if kind == "sd3":  # xformers (flash was refused above)
        transformer.enable_xformers_memory_efficient_attention()
        return "xformers (XFormersJointAttnProcessor)"
    transformer.set_attention_backend(name)
    return f"diffusers attention backend {name!r}"


def attention_backends(transformer) -> set[str]:
    """The processors' backend names (``"sdpa"`` for processors without a dispatch choice or left at the default)."""
    out = set()
    for m in transformer.modules():
        proc = getattr(m, "processor", None)
        if proc is None:
            continue
        b = getattr(proc, "_attention_backend", None)
        out.add("xformers" if "XFormers" in type(proc).__name__ else (str(getattr(b, "value", b)) if b else "sdpa"))
    return out

"""Where models run: the ``device`` option of every trainer, and noise drawn the same on any device.

    dev = resolve_device("auto")          # cuda (the current device under torchrun) if available, else cpu
    model.to(dev); x = batch.to(dev)
    eps = randn((B, C, H, W), generator=cpu_gen, device=dev)   # drawn on the generator's device, then moved

Noise comes from CPU generators in this project (seeded per episode / per step), drawn on the CPU and moved:
the same seed then gives the same noise on a CPU and on a GPU, so a run moves between devices with its
randomness, and a fixed-seed world-model env or rollout is reproducible across them. The copy is small next
to the model call that consumes it.
"""

from __future__ import annotations

import torch
from torch import nn

DEVICE_TYPES = ("cpu", "cuda", "mps")  # the device types a trainer, evaluation or policy of this project runs on


def check_device_type(dev: torch.device, name: object) -> None:
    """``dev`` (parsed from the option ``name``) is of a type in :data:`DEVICE_TYPES`, else one line naming it: e.g.
    meta / xla / hpu, which torch parses but no trainer here runs on."""
    if dev.type not in DEVICE_TYPES:
        raise ValueError(f"device {name!r}: expected 'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps' (this project "
                         f"does not run on {dev.type!r} devices)")


def resolve_device(name: str | torch.device) -> torch.device:
    """``"auto"`` -> ``cuda`` (``torch.cuda.current_device()``, which ``grpo.distributed.init_distributed`` sets to
    ``LOCAL_RANK``) when CUDA is available, else ``cpu``; ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` as given.
    A CUDA device without CUDA raises (it would otherwise fail at the first tensor, far from the config)."""
    if isinstance(name, torch.device):
        dev = name
    elif not isinstance(name, str) or not name:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps', got {name!r}")
    elif name == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    else:
        try:
            dev = torch.device(name)
        except RuntimeError as e:
            raise ValueError(f"device {name!r} is not a torch device (expected 'auto', 'cpu', 'cuda', 'cuda:<index>' "
                             f"or 'mps'): {e}") from None
    check_device_type(dev, name)
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r} asks for Apple's MPS, but torch.backends.mps.is_available() is False on "
                         "this machine (use device: auto or cpu)")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asks for CUDA, but torch.cuda.is_available() is False on this machine "
                         "(use device: auto or cpu)")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def check_rank_device(dev: torch.device, name: str, world_size: int, rank: int) -> None:
    """Under ``world_size > 1`` processes, a CUDA ``dev`` (resolved from the config's ``device=name``) must be this
    rank's own GPU (``torch.cuda.current_device()``, set from ``LOCAL_RANK``), not one device shared by every rank."""
    if world_size > 1 and dev.type == "cuda" and dev.index != torch.cuda.current_device():
        raise ValueError(f"device={name!r} under {world_size} processes: rank {rank} would use {dev}, not its own "
                         f"cuda:{torch.cuda.current_device()}; use device: auto or cuda")


def check_device_name(name: str) -> str:
    """The config-time check of a ``device`` option: ``"auto"`` or any string ``torch.device`` parses (whether that
    device exists is checked when the run starts, :func:`resolve_device`, so a GPU config can be dry-run on a
    laptop). Returns ``name``; raises ``ValueError`` naming it otherwise."""
    if name == "auto":
        return name
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"device {name!r} is not a torch device: expected 'auto', 'cpu', 'cuda', 'cuda:<index>' "
                         "or 'mps'") from None
    check_device_type(dev, name)
    return name


def module_device(module: nn.Module) -> torch.device:
    """The device of ``module``'s first parameter (or buffer); CPU for a module with neither."""
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")


def device_of(obj) -> torch.device:
    """Where ``obj`` runs: an ``nn.Module``'s parameters' device (:func:`module_device`), else its ``device``
    attribute (policy and encoder wrappers), else the CPU."""
    if isinstance(obj, nn.Module):
        return module_device(obj)
    return torch.device(getattr(obj, "device", "cpu"))


def _draw_device(generator: torch.Generator | None, device: torch.device | str) -> torch.device | str:
    return generator.device if generator is not None else device


def randn(shape: tuple[int, ...] | torch.Size, generator: torch.Generator | None = None,
          device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``torch.randn(shape)`` drawn on ``generator``'s device (its own stream) and returned on ``device``."""
    return torch.randn(tuple(shape), generator=generator, device=_draw_device(generator, device),
                       dtype=dtype).to(device)


def rand(shape: tuple[int, ...] | torch.Size, generator: torch.Generator | None = None,
         device: torch.device | str = "cpu") -> torch.Tensor:
    """``torch.rand(shape)`` (uniform [0, 1)) drawn on ``generator``'s device and returned on ``device``."""
    return torch.rand(tuple(shape), generator=generator, device=_draw_device(generator, device)).to(device)


def randint(low: int, high: int, shape: tuple[int, ...] | torch.Size, generator: torch.Generator | None = None,
            device: torch.device | str = "cpu") -> torch.Tensor:
    """``torch.randint(low, high, shape)`` drawn on ``generator``'s device and returned on ``device``."""
    return torch.randint(low, high, tuple(shape), generator=generator,
                         device=_draw_device(generator, device)).to(device)

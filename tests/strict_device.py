"""A CPU stand-in for "does this code keep its tensors on the model's device?".

No GPU in CI, so a tensor created without ``device=`` (``torch.zeros(n)``, ``torch.randn(shape, generator=g)``,
``torch.tensor([...])``) would silently sit on the CPU next to a CPU model and only break on a GPU. Inside
:func:`strict_device`, such a tensor lands on the ``meta`` device instead, and the first op that mixes it with
the model's real (CPU) tensors raises "Tensor on device meta is not on the expected device cpu": the same
failure a CUDA run would hit. Build the models outside the block; run the code under test inside it.
``torch.from_numpy`` and ``Tensor.to``/``.cpu()`` are unaffected (they say where their data goes).
"""

from contextlib import contextmanager

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook


@contextmanager
def strict_device():
    """Inside the block, a tensor made without ``device=`` lands on ``meta``; except inside ``optimizer.step()``,
    where it lands on the CPU, as it does on a GPU run: torch < 2.13's Adam makes its ``step`` counter with
    ``torch.tensor(0.0)`` (the CPU on purpose: its "special device hosting for step"), 2.13 says ``device="cpu"``."""
    inner: list = []

    def cpu_during_step(*_):
        inner.append(torch.device("cpu"))
        inner[-1].__enter__()

    def end_of_step(*_):
        inner.pop().__exit__(None, None, None)

    meta = torch.device("meta")
    meta.__enter__()
    hooks = [register_optimizer_step_pre_hook(cpu_during_step), register_optimizer_step_post_hook(end_of_step)]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()
        while inner:  # a step that raised left its CPU context open
            inner.pop().__exit__(None, None, None)
        meta.__exit__(None, None, None)

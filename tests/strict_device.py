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


@contextmanager
def strict_device():
    with torch.device("meta"):
        yield

"""The distributed part of a policy-gradient update, once for every frontend: scaled backward passes, FSDP's
zero-weight passes, gradient synchronisation and the guarded optimizer step with cross-rank agreement.

A frontend's update then reads like the algorithm (one process or ``N``, DDP-style replicas or FSDP2 shards)::

    upd = DistributedUpdate(params, optimizer, guard, max_grad_norm, fsdp=...)
    for minibatch in ...:
        n_global = upd.global_sum([len(local_rows)])[0]      # the minibatch's denominator over all ranks
        if not len(local_rows):
            upd.zero_weight_pass(lambda: loss_of(one_row))   # FSDP: the same collectives, weight 0
            continue
        out = clipped_pg_loss(...)                           # the mean over this rank's rows
        upd.backward(out.loss, len(local_rows), n_global)
        st = upd.step()                                      # all-reduce (DDP), agree on a skip, clip, step

Scaling: rank ``k`` holds ``n_k`` of the minibatch's ``n = sum_k n_k`` rows (or tokens) and its loss is the mean
over its own rows, ``L_k = (1/n_k) sum_{i in k} l_i``. It back-propagates ``L_k * (n_k / n) * N``; averaging the
ranks' gradients (DDP's all-reduce-mean, or FSDP's reduce-scatter, which also averages) then gives
``(1/N) sum_k N (n_k/n) grad L_k = grad (1/n) sum_i l_i``, the gradient of the mean over the *global* minibatch,
exactly what one process computes over the same rows (up to float summation order). Micro-batches (gradient
accumulation) are the same sum with more terms. ``N = 1`` is the same code.

Skips: a non-finite loss is not back-propagated (:meth:`backward` flags the guard); under FSDP the backward is a
collective that every rank must run, so ``nan_to_num(loss)`` (zero upstream gradient) is back-propagated instead.
:meth:`step` makes a skip on any rank a skip on every rank (:func:`agree_on_skip`), so the replicas / shards never
diverge. Matches what ``torch.nn.parallel.DistributedDataParallel`` + ``no_sync`` would do for a model that is not
wrapped (this project's LoRA / small policies are not: their gradients are reduced in one bucketed call).
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch

from .distributed import DistInfo, all_reduce_floats, any_rank, average_gradients, dist_info
from .train_step import NonFiniteGuard, StepStats, backward_if_finite, guarded_step


def agree_on_skip(guard: NonFiniteGuard, reason: str = "non-finite loss on another rank") -> bool:
    """Make a pending skip on any rank a skip on every rank (a collective: every rank must call it); returns whether
    the current update is skipped. World size 1: just ``guard.pending is not None``."""
    if any_rank(guard.pending is not None) and guard.pending is None:
        guard.flag(reason)
    return guard.pending is not None


class DistributedUpdate:
    """Backward passes and optimizer steps of one model's trainable ``params`` over the launched ranks.

    Args:
        params: the trained parameters (LoRA weights, a policy's parameters; DTensors under FSDP).
        optimizer: their optimizer.
        guard: the run's :class:`~grpo.train_step.NonFiniteGuard` (skips and their count).
        max_grad_norm: gradient clipping of :func:`~grpo.train_step.guarded_step`.
        fsdp: the model is sharded with FSDP2 over more than one process (its backward reduce-scatters the gradients,
            and every forward/backward is a collective).
        info: the process group's ranks (default: :func:`~grpo.distributed.dist_info`).
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], optimizer: torch.optim.Optimizer, guard: NonFiniteGuard,
                 max_grad_norm: float, fsdp: bool = False, info: DistInfo | None = None):
        self.params = [p for p in params if p.requires_grad]
        self.optimizer = optimizer
        self.guard = guard
        self.max_grad_norm = max_grad_norm
        self.fsdp = fsdp
        self.info = info or dist_info()

    @property
    def world_size(self) -> int:
        return self.info.world_size

    # ---- counts over ranks ---------------------------------------------------------------------------------------
    def global_sum(self, values: list[float]) -> list[float]:
        """Element-wise sums over ranks (float64), e.g. the global rows / tokens of each minibatch."""
        return all_reduce_floats(values)

    def global_max(self, values: list[float]) -> list[float]:
        """Element-wise maxima over ranks (float64)."""
        return all_reduce_floats(values, "max")

    def mean_over_ranks(self, values: list[float]) -> list[float]:
        """Element-wise means over ranks of per-rank diagnostics (a rank's mean loss, ...)."""
        if self.world_size == 1:
            return [float(v) for v in values]
        return [v / self.world_size for v in all_reduce_floats(values)]

    @property
    def stand_in_rows(self) -> int:
        """Rows a rank with none of its own still runs: 1 under FSDP (its passes are collectives, run with weight 0
        by :meth:`zero_weight_pass`), else 0."""
        return 1 if self.fsdp else 0

    def lockstep(self, values: list[float], op: str = "max") -> list[float]:
        """Under FSDP, the per-pass counts reduced over ranks (``op``: ``"max"`` or ``"sum"``): a sharded forward is
        a collective, so a rank runs a pass (a dummy one where it has no rows) wherever any rank runs one. Without
        FSDP each rank runs only its own passes: the local values, no collective."""
        return all_reduce_floats(values, op) if self.fsdp else [float(v) for v in values]

    # ---- backward ------------------------------------------------------------------------------------------------
    def scale(self, local: float, global_: float) -> float:
        """The factor of a rank's mean loss over ``local`` of the ``global_`` rows (or tokens) of a batch:
        ``(local / global_) * world_size`` (module docstring); ``world_size`` when ``global_ <= 0``."""
        return local / global_ * self.world_size if global_ > 0 else float(self.world_size)

    def backward(self, loss: torch.Tensor, local: float = 1.0, global_: float = 1.0) -> float:
        """Back-propagate ``loss * scale(local, global_)`` (see :meth:`scale`), skipping a non-finite loss (the update
        is then flagged; under FSDP a zero-gradient backward still runs). Returns the scale."""
        s = self.scale(local, global_)
        self._backward(loss * s)
        return s

    def zero_weight_pass(self, loss_fn: Callable[[], torch.Tensor], others_have_rows: bool = True) -> bool:
        """FSDP only: where this rank has no rows but another rank trains (``others_have_rows``), run the same
        forward/backward collectives with weight 0 on ``loss_fn()`` (a loss over one stand-in row). Returns whether
        it ran (never without FSDP: a replica with no rows simply contributes a zero gradient to :meth:`step`)."""
        if not (self.fsdp and others_have_rows):
            return False
        self._backward(loss_fn() * 0.0)
        return True

    def _backward(self, loss: torch.Tensor) -> None:
        if not self.fsdp:
            backward_if_finite(loss, self.guard)
        elif self.guard.check("loss", loss.detach()):
            loss.backward()
        else:
            loss.nan_to_num(0.0, 0.0, 0.0).backward()

    # ---- step ----------------------------------------------------------------------------------------------------
    def sync_gradients(self) -> None:
        """Average the gradients over ranks (DDP's all-reduce, with zeros for a rank that had no rows; under FSDP the
        backward already reduce-scattered them: nothing to do) and agree on skipping the update."""
        if self.world_size == 1:
            return
        if not self.fsdp:
            for p in self.params:  # a rank whose rows were all dropped still takes part in every all-reduce
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            average_gradients(self.params)
        agree_on_skip(self.guard)

    def step(self) -> StepStats:
        """:meth:`sync_gradients`, then :func:`~grpo.train_step.guarded_step` (clip, step unless a rank saw a
        non-finite loss or gradient, zero the gradients)."""
        self.sync_gradients()
        return guarded_step(self.params, self.optimizer, self.max_grad_norm, self.guard)

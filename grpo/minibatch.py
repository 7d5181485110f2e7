"""The minibatches of a policy-gradient update, with everything that spans processes hidden: a frontend's update
reads as the algorithm (recompute log-probs, ratio, clipped loss, KL, backward, step) for one process or ``N``.

    batches = Minibatches(upd, weights=lambda rows: (float(len(rows)),), stand_in=loss_of_one_row)
    for epoch in range(inner_epochs):
        for step in batches.steps(groups_of_rows(epoch), epoch):   # one optimizer step per group
            for mb in step:                                         # this rank's passes that hold rows
                out = clipped_pg_loss(...)                          # the mean over mb.item's rows
                mb.backward(out.loss)                               # weighted by its share of the global step
            st = step.apply()                                       # all-reduce / agree on a skip, clip, step

A *step* is a list of *passes* (micro-batches: one forward/backward each), the same number of passes on every rank
(rank ``k``'s pass ``j`` holds its own rows of the global pass ``j``, maybe none). What this module does for the
frontend, once:

* global weighting: ``weights(item)`` gives a pass's loss denominators on this rank (rows, or tokens, and any more
  the frontend's diagnostics need); their sums over the step and over every rank are the step's ``totals`` (one
  all-reduce per epoch). :meth:`Pass.backward` back-propagates ``loss * N * weight / total``
  (:meth:`grpo.update.DistributedUpdate.backward`), so the applied gradient is that of the mean over the *global*
  step, what one process computes over the same rows; a step whose rows were all dropped on every rank is skipped
  (no passes, no optimizer step);
* FSDP lockstep: a sharded forward/backward is a collective, so where this rank has no rows in a pass that another
  rank trains it runs ``stand_in(item)`` (a loss over one stand-in row) with weight 0
  (:meth:`~grpo.update.DistributedUpdate.zero_weight_pass`); :meth:`Minibatches.no_grad` does the same for passes
  without gradient (old log-probs computed before the first update). Without FSDP nothing extra runs;
* the on-policy self-check (:class:`grpo.onpolicy.OnPolicyGap`, ``onpolicy``): fed by the frontend on the first
  step's passes (:attr:`Pass.first`), before any optimizer step; reduced over ranks by
  :meth:`Minibatches.onpolicy_scalars`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch

from .onpolicy import Action, OnPolicyGap, check_onpolicy
from .train_step import StepStats
from .update import DistributedUpdate


@dataclass
class Pass:
    """One forward/backward of this rank: ``item`` (the frontend's rows), their loss denominators ``weights`` here and
    the step's ``totals`` over every rank (the same kinds, in the same order)."""

    item: Any
    weights: tuple[float, ...]
    totals: tuple[float, ...]
    epoch: int  # inner epoch
    step: int  # the step's index in its epoch
    _upd: DistributedUpdate

    @property
    def first(self) -> bool:
        """In the iteration's first optimizer step: nothing has been applied yet (the on-policy self-check)."""
        return self.epoch == 0 and self.step == 0

    @property
    def share(self) -> float:
        """This pass's share of the global step's loss denominator, ``weights[0] / totals[0]`` (1 when it is 0)."""
        return self.weights[0] / self.totals[0] if self.totals[0] > 0 else 1.0

    def backward(self, loss: torch.Tensor) -> None:
        """Back-propagate the pass's mean ``loss`` weighted by its share of the global step (a non-finite loss flags
        the update instead: :meth:`grpo.update.DistributedUpdate.backward`)."""
        self._upd.backward(loss, self.weights[0], self.totals[0])


class Step:
    """One optimizer step: iterate it for this rank's :class:`Pass` es (zero-weight passes run inside), then
    :meth:`apply`."""

    def __init__(self, owner: Minibatches, items: Sequence[Any], totals: tuple[float, ...], active: list[float],
                 epoch: int, index: int):
        self._owner, self.items, self.totals = owner, items, totals
        self._active, self.epoch, self.index = active, epoch, index

    def __iter__(self) -> Iterator[Pass]:
        o = self._owner
        for item, rows_anywhere in zip(self.items, self._active):
            if not o.size(item):  # another rank may train this pass: the same collectives, weight 0 (FSDP)
                o.upd.zero_weight_pass(lambda: o.stand_in(item), rows_anywhere > 0)
                continue
            yield Pass(item, o.weights(item), self.totals, self.epoch, self.index, o.upd)

    def apply(self) -> StepStats:
        """Average the gradients over ranks (DDP), agree on a skip, clip and step (:meth:`DistributedUpdate.step`)."""
        return self._owner.upd.step()


class Minibatches:
    """The passes and optimizer steps of one update over the launched ranks (module docstring).

    Args:
        upd: the model's :class:`~grpo.update.DistributedUpdate`.
        weights: ``item -> (denominator, ...)`` of a pass on this rank; the first scales the loss (rows or tokens).
        stand_in: ``item -> loss`` over one stand-in row of ``item``'s source with gradient (FSDP's zero-weight
            pass where this rank has no rows of ``item``).
        size: rows of ``item`` on this rank (default ``len(item)``).
        onpolicy: track the on-policy gap (:class:`~grpo.onpolicy.OnPolicyGap`; ``exact``: also the gap of passes
            that reproduce the rollout's batch, which must be exactly 0).
    """

    def __init__(self, upd: DistributedUpdate, weights: Callable[[Any], tuple[float, ...]],
                 stand_in: Callable[[Any], torch.Tensor], size: Callable[[Any], int] = len, exact: bool = False):
        self.upd, self.weights, self.stand_in, self.size = upd, weights, stand_in, size
        self.onpolicy = OnPolicyGap(track_exact=exact)

    def steps(self, groups: Sequence[Sequence[Any]], epoch: int = 0) -> Iterator[Step]:
        """One :class:`Step` per group of items (this rank's rows of one global step, as passes); every rank passes
        the same number of groups and of items per group. A group without rows on any rank is skipped."""
        if not groups:
            return
        kinds = len(self.weights(groups[0][0]))
        local = [[sum(self.weights(it)[k] for it in g) for g in groups] for k in range(kinds)]
        flat = self.upd.global_sum([v for per_kind in local for v in per_kind])
        totals = [tuple(flat[k * len(groups) + i] for k in range(kinds)) for i in range(len(groups))]
        # under FSDP, the rows of each pass over all ranks: a pass with rows anywhere runs everywhere
        active = self.upd.lockstep([self.size(it) for g in groups for it in g], "sum")
        start = 0
        for i, g in enumerate(groups):
            act, start = active[start:start + len(g)], start + len(g)
            if totals[i][0] == 0:  # every row of this step dropped on every rank: no update
                continue
            yield Step(self, g, totals[i], act, epoch, i)

    def no_grad(self, items: Sequence[Any], mine: Sequence[bool],
                stand_in: Callable[[Any], Any]) -> Iterator[Any]:
        """The ``items`` whose pass this rank runs without gradient (``mine``), in order; under FSDP a pass another
        rank runs is run here too on ``stand_in(item)`` (the same collectives; its result is dropped)."""
        anywhere = self.upd.lockstep([float(m) for m in mine], "max")
        for item, m, a in zip(items, mine, anywhere):
            if m:
                yield item
            elif a:
                stand_in(item)

    def rows_anywhere(self, rows: float) -> float:
        """This rank's ``rows`` summed over ranks (0: nothing to train on any rank)."""
        return self.upd.global_sum([rows])[0]

    @property
    def stand_in_rows(self) -> int:
        """Rows a rank with none of its own computes anyway: 1 under FSDP (its zero-weight passes), else 0."""
        return self.upd.stand_in_rows

    def sum_over_ranks(self, values: list[float]) -> list[float]:
        """Element-wise sums over ranks of per-rank diagnostics already weighted by their global share."""
        return self.upd.global_sum(values)

    def mean_over_ranks(self, values: list[float]) -> list[float]:
        """Element-wise means over ranks of per-rank diagnostics."""
        return self.upd.mean_over_ranks(values)

    def check_onpolicy(self, tol: float, action: Action, iteration: int, where: str) -> dict[str, float]:
        """The iteration's ``onpolicy/*`` scalars over every rank (:meth:`OnPolicyGap.scalars`; a collective), warned
        about on rank 0 or stopped on (:func:`grpo.onpolicy.check_onpolicy`; ``where`` names the tolerance's key)."""
        scalars = self.onpolicy.scalars(self.upd.global_sum, self.upd.global_max)
        check_onpolicy(scalars, tol, action, iteration, where, say=print if self.upd.info.is_main else _silent)
        return scalars


def _silent(message: str) -> None:
    """The ``say`` of ranks other than 0."""


def local_minibatches(order: torch.Tensor, size: int, local_of: torch.Tensor,
                      accum: int = 1) -> list[Sequence[torch.Tensor]]:
    """This rank's rows of each global minibatch: ``order`` (global row ids, the same permutation on every rank) cut
    into minibatches of ``size``, each mapped through ``local_of`` (global id -> this rank's row index, -1 for rows
    held elsewhere) with the others' rows dropped, and split into ``accum`` micro-batches (``tensor_split``: one
    forward/backward each, one optimizer step per minibatch): the groups :meth:`Minibatches.steps` takes."""
    mbs = [loc[loc >= 0] for loc in (local_of[mb] for mb in order.split(size))]
    return [mb.tensor_split(accum) if accum > 1 else (mb,) for mb in mbs]


def local_index(gid: torch.Tensor, n_global: int) -> torch.Tensor:
    """``local_of [n_global]``: this rank's row index of each global row id (``gid [n_local]`` lists its rows), -1 for
    rows held by other ranks."""
    local_of = torch.full((n_global,), -1, dtype=torch.long, device="cpu")
    local_of[gid] = torch.arange(gid.numel(), device="cpu")
    return local_of

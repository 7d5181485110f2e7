"""The per-record plans of :class:`diffusion_rl.trainer.DiffusionGRPOTrainer`'s clipped-PG update (``update_pg``): the
steps trained this iteration (:func:`trained_steps`), a :class:`Plan` per trained step record in chunks, one optimizer
step each (:func:`record_chunks`), the ``old`` log-probs of the PPO ratio (:func:`old_logps`), the stand-in row of
FSDP's zero-weight passes (:func:`dummy_plan`, :func:`dummy_loss`) and the update's scalars (:func:`pg_scalars`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from grpo.distributed import keyed_generator
from grpo.minibatch import Minibatches

from .config import DiffusionRLConfig
from .sampling import STREAM_TIMESTEPS, Rollout
from .trainer_protocol import DiffusionTrainerLike


@dataclass
class Plan:
    """A trained record of the clipped-PG update: the rows of ``rec`` trained this iteration (``idx``) and their
    ``old`` log-probs."""

    rec: Any  # StepRecord
    idx: torch.Tensor  # positions in the record that are trained
    full: bool  # all rows of the record kept: the rollout's batch is reproduced exactly
    old: torch.Tensor | None = None

    def __len__(self) -> int:  # rows trained here
        return len(self.idx)


def trained_steps(cfg: DiffusionRLConfig, ro: Rollout, iteration: int) -> set[int]:
    """The stochastic steps trained this iteration: a ``sampler.timestep_fraction`` subset keyed by (seed,
    iteration), the same on every rank and on resume."""
    steps = sorted({r.step for r in ro.records if r.stochastic})
    n = max(1, math.ceil(cfg.sampler.timestep_fraction * len(steps)))
    if n >= len(steps):
        return set(steps)
    perm = torch.randperm(len(steps), generator=keyed_generator(cfg.seed, iteration, STREAM_TIMESTEPS), device="cpu")
    return {steps[i] for i in perm[:n].tolist()}


def record_chunks(ro: Rollout, keep_rows: torch.Tensor, steps: set[int], n: int) -> list[list[Plan]]:
    """A :class:`Plan` per stochastic record of a trained step (its rows kept by ``keep_rows``, per global row id), in
    ``min(n, records)`` contiguous chunks (one optimizer step each); the same records on every rank."""
    plans = [Plan(r, torch.nonzero(keep_rows[r.rows]).flatten(), bool(keep_rows[r.rows].all()))
             for r in ro.records if r.stochastic and r.step in steps]
    n = min(n, len(plans))
    return [plans[i * len(plans) // n:(i + 1) * len(plans) // n] for i in range(n)]


def old_logps(tr: DiffusionTrainerLike, chunks: list[list[Plan]], batches: Minibatches, cond) -> int:
    """Each plan's ``old`` log-probs: the rollout's where its batch is reproduced (all rows kept), else a no-grad
    pre-update pass for chunks after the first (the first chunk's live pass is pre-update: ``old`` stays None until
    then). Returns the rows computed."""
    later = [bool(len(pl)) and not pl.full and ci > 0 for ci, chunk in enumerate(chunks) for pl in chunk]
    plans = [pl for chunk in chunks for pl in chunk]
    for pl in plans:
        pl.old = pl.rec.log_prob if pl.full else None
    rows = 0
    for pl in batches.no_grad(plans, later, lambda pl: tr.logp(dummy_plan(pl), cond, grad=False)):
        pl.old = tr.logp(pl, cond, grad=False).log_prob
        rows += len(pl)
    return rows


def pg_scalars(tr: DiffusionTrainerLike, batches: Minibatches, stats: dict[str, list[float]], grad_norms: list[float],
               objective: list[float], backward: int, nfe: int) -> dict[str, float]:
    """The update's scalars: per-pass diagnostics averaged (then over ranks), the globally weighted objective per
    step summed over ranks, costs summed, ``grad_norm`` per step, and the on-policy check."""
    out = {f"loss/{k}": sum(v) / max(1, len(v)) for k, v in stats.items()}
    out = dict(zip(out, batches.mean_over_ranks(list(out.values()))))
    out["grad_norm"] = sum(grad_norms) / max(1, len(grad_norms))
    objective = batches.sum_over_ranks(objective)
    backward, nfe = batches.sum_over_ranks([backward, nfe])
    out.update({"backward": backward, "nfe_train": nfe, "loss/objective": sum(objective) / max(1, len(objective))})
    tc = tr.cfg.train  # the on-policy self-check (grpo.onpolicy), warned about or stopped on
    out.update(batches.check_onpolicy(tc.onpolicy_tol, tc.onpolicy_action, tr.iteration + 1,
                                      "train.onpolicy_tol"))
    return out


def dummy_plan(pl: Plan) -> Plan:
    """Row 0 of ``pl``'s record: the stand-in of a zero-weight pass that keeps FSDP's collectives in step."""
    return Plan(pl.rec, torch.zeros(1, dtype=torch.long, device="cpu"), False)


def dummy_loss(tr: DiffusionTrainerLike, pl: Plan, cond_all) -> torch.Tensor:
    """The passes a trained record runs (policy, and the reference with KL), on its stand-in row."""
    dummy = dummy_plan(pl)
    out = tr.logp(dummy, cond_all, grad=True)
    if tr.cfg.grpo.kl_coef > 0:
        with tr.adapter.reference():
            tr.logp(dummy, cond_all, grad=False)
    return out.log_prob.sum()

"""The trainer shell both frontends share: the loop settings (:class:`LoopConfig`, the ``train:`` section of
diffusion-rl and the ``rl:`` section of vla-rl), and :class:`TrainerBase`, which owns what is the same in every trainer:
checkpoint state through one ``state_dict`` / ``load_state_dict`` protocol (the shared parts -- skip guard, random
states, reward-hacking alarm, config, last credit -- added and restored here; the resume check's free keys come from
the config's field metadata, :func:`grpo.config.resume_free_keys`), keep-best and the learning-rate schedule. A
frontend supplies the algorithm in its ``step``: rollout, reward, credit and the loss of each minibatch (the
minibatches, their weights across processes and the on-policy check are :class:`grpo.minibatch.Minibatches`), and
runs the loop with :func:`grpo.loop.run_loop`.

One iteration (``step``), and what follows it in the loop (:func:`grpo.loop.run_loop`)::

    rollout -> reward -> credit -> minibatches (grpo.minibatch) -> loss -> backward -> step
            -> log (grpo.metrics) -> [evaluate -> keep_best] -> [save]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch

from .checkpoint import (
    best_record,
    capture_rng_state,
    improves,
    load_checkpoint,
    restore_rng_state,
    save_best,
    save_checkpoint,
)
from .config import (
    MAX_INNER_EPOCHS,
    MAX_LR,
    check_resume_config,
    config_to_dict,
    free_on_resume,
    require_at_least,
    require_at_most,
    require_positive,
)
from .distributed import all_reduce_floats, barrier
from .onpolicy import Action, validate


@dataclass
class LoopConfig:
    """The loop settings of a training job (one section: diffusion-rl's ``train:``, vla-rl's ``rl:``).

    A frontend's section subclasses it (its own defaults and keys added); ``section`` names it in messages."""

    section: ClassVar[str] = "train"

    iterations: int = free_on_resume("RL iterations (rollout -> reward -> advantages -> update)", default=40)
    lr: float = 3e-4  # AdamW learning rate (the peak when lr_schedule decays it)
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"  # constant | linear | cosine: the lr over
                                                                       # iterations, from lr down to lr *
                                                                       # lr_min_ratio at the last iteration
    lr_min_ratio: float = 0.1  # the decayed lr's floor as a fraction of lr (linear / cosine), in [0, 1]
    inner_epochs: int = 1  # passes over the iteration's rollout
    eval_every: int = free_on_resume("iterations between evaluations (0: before and after only)", default=0)
    save_every: int = free_on_resume("iterations between checkpoints", default=10)
    keep_last: int = 2  # checkpoints kept on disk
    onpolicy_tol: float = 1e-4  # on-policy self-check (grpo.onpolicy): max |log pi_train - log pi_rollout|
                                # allowed before the first update
    onpolicy_action: Action = "warn"  # warn | stop | off: what the run does when the on-policy gap exceeds onpolicy_tol

    def __post_init__(self) -> None:
        s = self.section
        validate(self.onpolicy_tol, f"{s}.onpolicy")
        require_at_least(s, self, iterations=0, inner_epochs=1, eval_every=0, save_every=1, keep_last=1)
        require_at_most(s, self, inner_epochs=MAX_INNER_EPOCHS)  # (1e9 passes over each rollout: a run that never ends)
        require_positive(s, self, "lr")
        require_at_most(s, self, lr=MAX_LR)
        if not 0.0 <= self.lr_min_ratio <= 1.0:
            raise ValueError(f"{s}.lr_min_ratio must be in [0, 1] (the floor as a fraction of {s}.lr), got "
                             f"{self.lr_min_ratio}")

    def lr_at(self, it: int) -> float:
        """The learning rate of the update of iteration ``it`` (0-based), a function of ``it`` alone (so a resumed run
        applies the same rates as an uninterrupted one). With ``t = min(it / iterations, 1)`` and
        ``m = lr_min_ratio``: constant ``lr``; linear ``lr * (1 - (1 - m) t)``; cosine
        ``lr * (m + (1 - m) (1 + cos(pi t)) / 2)`` (SGDR's annealing, Loshchilov & Hutter 2017, eq. 5, one cycle, no
        warm-up; the decays of TRL's / transformers' ``get_linear_schedule_with_warmup`` and
        ``get_cosine_schedule_with_warmup``, floored at ``m``)."""
        if self.lr_schedule == "constant" or self.iterations <= 0:
            return self.lr
        t = min(max(it, 0) / self.iterations, 1.0)
        m = self.lr_min_ratio
        frac = (1.0 - (1.0 - m) * t if self.lr_schedule == "linear"
                else m + (1.0 - m) * 0.5 * (1.0 + math.cos(math.pi * t)))
        return self.lr * frac


class TrainerBase:
    """What both trainers share (module docstring). A subclass sets ``cfg`` (with ``output_dir``), ``loop`` (its
    :class:`LoopConfig` section), ``dist``, ``guard``, ``alarm``, ``optimizer``, ``best_metric`` and ``iteration``,
    and implements ``state_dict`` / ``load_state_dict`` for its own parts of a checkpoint."""

    best_metric: ClassVar[str] = "eval/reward"
    cfg: Any
    loop: LoopConfig
    optimizer: torch.optim.Optimizer
    iteration: int  # iterations done (the next checkpoint's step)
    best: dict[str, Any] | None
    last_iteration: dict[str, torch.Tensor] | None

    @property
    def ckpt_dir(self) -> Path:
        return Path(self.cfg.output_dir) / "checkpoints"

    # ---- the checkpoint protocol --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any] | None:
        """The frontend's part of a checkpoint (rank 0's; other ranks may return None). Every rank calls it (FSDP's
        gathers are collectives)."""
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the frontend's part from a checkpoint's ``state`` (the shared parts are restored by :meth:`load`)."""
        raise NotImplementedError

    def save(self, best: bool = False) -> Path | None:
        """Rank 0 writes the checkpoint (nothing in it depends on the world size), then every rank waits for it;
        ``best``: as ``checkpoints/best`` (record ``self.best``) instead of the next ``step_*``."""
        state, path = self.state_dict(), None
        if self.dist.is_main:
            state.update({"guard": self.guard.state_dict(), "rng": capture_rng_state(),
                          "alarm": self.alarm.state_dict(), "config": config_to_dict(self.cfg)})
            if self.last_iteration is not None:  # the last iteration's global credit (diagnostics, tests)
                state["last_iteration"] = self.last_iteration
            files = state.pop("__files__", None) or {}
            path = (save_best(self.ckpt_dir, self.iteration, state, self.best, files=files) if best
                    else save_checkpoint(self.ckpt_dir, self.iteration, state, keep_last=self.loop.keep_last,
                                         files=files))
        barrier()
        return path

    def load(self, path: str | Path, check_config: bool = True) -> None:
        """Resume from checkpoint ``path``: refuse another config (the keys marked free on resume aside), restore the
        frontend's part (:meth:`load_state_dict`), the skip guard, the alarm and the random states."""
        state = load_checkpoint(path, map_location="cpu")  # the RNG states must be CPU tensors
        if check_config:
            check_resume_config(state["config"], self.cfg, str(state.get("__path__", path)))
        self.load_state_dict(state)
        self.guard.load_state_dict(state["guard"])
        self.alarm.load_state_dict(state.get("alarm"))  # the reward-hacking alarm's history of evaluations
        restore_rng_state(state["rng"])
        self.after_load(state)

    def after_load(self, state: dict[str, Any]) -> None:
        """Hook after every part is restored (random states included)."""

    # ---- the loop's pieces ----------------------------------------------------------------------------------------
    def keep_best(self, value: float) -> Path | None:
        """After an evaluation (every rank calls it): when rank 0's ``value`` of :attr:`best_metric` beats the best so
        far, save this iteration as ``checkpoints/best`` (:func:`grpo.checkpoint.save_best`) beside the latest."""
        value = all_reduce_floats([value if self.dist.is_main else float("-inf")], "max")[0]
        if not improves(self.best, value):
            return None
        self.best = best_record(self.best_metric, value, self.iteration)
        return self.save(best=True)

    def set_lr(self, it: int) -> float:
        """Set the optimizer's lr for iteration ``it``'s update to the schedule's value (:meth:`LoopConfig.lr_at`);
        returns it."""
        lr = self.loop.lr_at(it)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

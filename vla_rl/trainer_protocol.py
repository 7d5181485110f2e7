"""What the parts split out of :class:`vla_rl.trainer.VLARLTrainer` (``sft_stage``, ``episode_rewards``,
``fsdp_policy``, ``heldout_eval``) use of the trainer, as a :class:`typing.Protocol`: they are typed against it
without importing the trainer, which imports them; and the record the trainer keeps of a held-out evaluation
(:class:`EvalRecord`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, TypedDict

import torch

from grpo.distributed import DistInfo
from grpo.metrics import MetricsLogger
from grpo.monitors import HackingAlarm
from grpo.train_step import NonFiniteGuard
from grpo.update import DistributedUpdate
from rewards.remote import RemoteReward
from rewards.srpo import SRPOReward

from .config import VLARLConfig
from .policies import TrainablePolicy
from .rollout import EnvPool, EvalResult


class EvalRecord(TypedDict):
    """One held-out evaluation as the trainer keeps it (``evals[tag]``, a checkpoint's ``trainer["eval"][tag]``)."""

    iteration: int  # RL iterations done when it ran
    success_rate: float
    mean_length: float  # mean episode length (steps)
    per_task: dict[str, Any]  # env name -> success rate
    episodes: int


class VLATrainerLike(Protocol):
    """The attributes and methods of the VLA trainer its parts read or call."""

    cfg: VLARLConfig
    dist: DistInfo
    out: Path  # output_dir
    quiet: bool  # no console lines (ranks > 0)
    policy: TrainablePolicy  # the full policy: rollouts, SFT, evaluation, SRPO
    train_policy: torch.nn.Module  # the copy the RL update trains (FSDP-sharded, or the policy itself)
    fsdp: bool  # dist.strategy=fsdp over more than one process
    optimizer: torch.optim.Optimizer
    upd: DistributedUpdate
    guard: NonFiniteGuard
    alarm: HackingAlarm
    logger: MetricsLogger | None
    pool: EnvPool
    srpo: SRPOReward | None
    remote: RemoteReward | None
    eval_seeds: list[int]  # the held-out initial states (rl.heldout_seeds())
    rewards_since_eval: list[float]  # training rewards since the last evaluation (the alarm's input)
    iteration: int
    sft_done: bool
    sft_record: dict[str, Any] | None
    evals: dict[str, EvalRecord]  # tag -> its held-out evaluation

    def report(self, *a: Any) -> None: ...

    def run_eval(self, tag: str, step: int, videos: bool = True) -> EvalResult: ...

    def keep_best(self, value: float) -> Path | None: ...

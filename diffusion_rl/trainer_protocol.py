"""What the parts split out of :class:`diffusion_rl.trainer.DiffusionGRPOTrainer` (``scoring``, ``record_plans``,
``nft_update``, ``evaluation``, ``sharded_denoiser``) use of the trainer, as a :class:`typing.Protocol`: they are
typed against it without importing the trainer, which imports them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Protocol

import torch

from grpo.distributed import DistInfo
from grpo.flow_sde import SDEStepOutput
from grpo.metrics import MetricsLogger
from grpo.monitors import HackingAlarm
from grpo.train_step import StepStats
from grpo.update import DistributedUpdate
from rewards.remote import RemoteReward

from .adapters import Cond, DiffusionAdapter
from .config import DiffusionRLConfig
from .prompts import PromptSource
from .sampling import Rollout
from .strategies import Strategy


class DiffusionTrainerLike(Protocol):
    """The attributes and methods of the diffusion trainer its parts read or call."""

    cfg: DiffusionRLConfig
    adapter: DiffusionAdapter
    dist: DistInfo
    fsdp: bool  # the denoiser is sharded (dist.strategy=fsdp)
    optimizer: torch.optim.Optimizer
    upd: DistributedUpdate
    ema: dict[str, torch.Tensor] | None  # EMA of the trainable weights (train.ema_decay > 0)
    iteration: int
    prompts: PromptSource
    strategy: Strategy
    reward_fn: Callable  # batch -> reward output (.total [B])
    remote: RemoteReward | None  # the reward server's client, when the reward is served
    reward_name: str
    scorer: ThreadPoolExecutor | None  # reward.overlap > 1: the background scorer
    logger: MetricsLogger
    monitors: dict[str, Any]  # eval.monitors: name -> reward callable
    alarm: HackingAlarm
    last_eval_components: dict[str, float]
    eval_before: float | None  # the evaluation before training (rank 0's; None until it ran)
    eval_before_components: dict[str, float]

    def rollout(self, prompts: list[str], iteration: int) -> Rollout: ...

    def score(self, latents: torch.Tensor, prompts: list[str]) -> tuple[Any, torch.Tensor]: ...

    def warm_prompts(self, prompts: list[str]) -> None: ...

    def uncond(self, n: int) -> Cond | None: ...

    def logp(self, plan: Any, cond_all: Cond, grad: bool, reference: bool = False) -> SDEStepOutput:
        """``plan``: a :class:`diffusion_rl.record_plans.Plan`."""
        ...

    def note_step(self, st: StepStats, grad_norms: list[float]) -> None: ...

    def ema_update(self) -> None: ...

    def save(self, best: bool = False) -> Path | None: ...

    def evaluate(self, tag: str | None = None, step: int = 0) -> float: ...

    def keep_best(self, value: float) -> Path | None: ...

"""``dist.strategy=fsdp`` for :class:`diffusion_rl.trainer.DiffusionGRPOTrainer`: the denoiser sharded with FSDP2
(:func:`shard_denoiser`, per block then the root; each Wan 2.2 expert its own root) and the trainer's FULL trainable
weights, optimizer state and EMA gathered for a checkpoint (:func:`full_trainable_state`) or sharded from one
(:func:`load_full_trainable_state`); without FSDP the same calls read and write the unsharded state."""

from __future__ import annotations

from typing import Any

from grpo.distributed import DistInfo
from grpo.fsdp import (
    full_optimizer_state_dict,
    full_tensor,
    full_trainable_state_dict,
    load_full_optimizer_state_dict,
    load_full_trainable_state_dict,
    shard_model,
)

from .adapters import DiffusionAdapter
from .config import DiffusionRLConfig
from .trainer_protocol import DiffusionTrainerLike


def shard_denoiser(cfg: DiffusionRLConfig, adapter: DiffusionAdapter, dist: DistInfo) -> bool:
    """Shard ``adapter``'s denoiser when ``dist.strategy=fsdp`` runs on more than one process; whether it did."""
    fsdp = cfg.dist.strategy == "fsdp" and dist.world_size > 1
    if fsdp:
        if cfg.pool.enabled:
            raise ValueError("dist.strategy=fsdp is not supported with pool.enabled (the quantized rollout copy is "
                             "a full replica); use dist.strategy=ddp")
        experts = getattr(adapter.transformer, "experts", None)  # Wan 2.2 A14B: each expert is called alone,
        for m in experts() if callable(experts) else [adapter.transformer]:  # so each is its own FSDP root
            shard_model(m, reshard_after_forward=cfg.dist.reshard_after_forward)
    elif cfg.dist.strategy == "fsdp" and dist.is_main:
        print("dist.strategy=fsdp with one process: nothing to shard, the denoiser is not wrapped")
    return fsdp


def full_trainable_state(tr: DiffusionTrainerLike) -> tuple[Any, Any, Any]:
    """``(trainable, optimizer, ema)`` state dicts, full; FSDP: every rank takes part in gathering them. Without FSDP
    ranks other than 0 get ``(None, None, None)``."""
    trainable = optim = ema = None
    if tr.fsdp:
        m = tr.adapter.transformer
        trainable, optim = full_trainable_state_dict(m), full_optimizer_state_dict(m, tr.optimizer)
        ema = {k: full_tensor(v).cpu() for k, v in tr.ema.items()} if tr.ema is not None else None
    elif tr.dist.is_main:
        trainable, optim = tr.adapter.trainable_state_dict(), tr.optimizer.state_dict()
        ema = {k: v.clone() for k, v in tr.ema.items()} if tr.ema is not None else None
    return trainable, optim, ema


def load_full_trainable_state(tr: DiffusionTrainerLike, state: dict[str, Any]) -> None:
    """The checkpoint's trainable weights and optimizer state; FSDP: a full state dict (saved by any world size,
    either strategy) sharded onto this rank."""
    if tr.fsdp:
        load_full_trainable_state_dict(tr.adapter.transformer, state["trainable"])
        load_full_optimizer_state_dict(tr.adapter.transformer, tr.optimizer, state["optimizer"])
    else:
        tr.adapter.load_trainable_state_dict(state["trainable"])
        tr.optimizer.load_state_dict(state["optimizer"])

"""``dist.strategy=fsdp`` for :class:`vla_rl.trainer.VLARLTrainer`: the RL copy of the policy sharded with FSDP2
(:func:`shard_for_rl`) and the full replica refreshed from its shards after every update (:func:`sync_replica`)."""

from __future__ import annotations

import copy

import torch

from grpo.fsdp import copy_full_parameters, load_full_optimizer_state_dict, shard_submodules
from grpo.update import DistributedUpdate

from .trainer_protocol import VLATrainerLike


def shard_for_rl(tr: VLATrainerLike) -> None:
    """``dist.strategy=fsdp``, more than one process: shard a copy of the (SFT-trained / resumed) policy for RL.

    Every forward of an FSDP-sharded module is a collective (an all-gather per unit), but the ranks make
    different numbers of policy calls in rollouts and evaluation (episodes end at different times; evaluation
    runs on rank 0 alone). So the no-grad calls keep using ``tr.policy``, a full replica on every rank, and
    the RL update runs on ``tr.train_policy``, a deep copy sharded by :func:`grpo.fsdp.shard_submodules`
    (every ``nn.ModuleList`` element, e.g. the conv stages or a LeRobot policy's transformer layers, and every
    direct child -- image encoder, text embedding, fuse MLP, action head -- then the root), where every rank runs
    the same forward/backward passes (a zero-weight pass where it has no rows). Parameters, gradients and the
    AdamW state (``2 |W| / N`` per rank instead of ``2 |W|``) are sharded; the replica is refreshed from the shards
    after every update (:func:`sync_replica`, one all-gather per parameter). The optimizer is rebuilt on the
    shards and the full state of the one built (and maybe resumed) in ``__init__`` is sharded into it."""
    if not tr.fsdp or tr.train_policy is not tr.policy:
        return
    full_state = tr.optimizer.state_dict()  # indices in named_parameters() order, the same on every rank
    if not all(p.requires_grad for p in tr.policy.parameters()):
        raise ValueError("dist.strategy=fsdp for vla-rl expects every policy parameter to be trained")
    tr.train_policy = copy.deepcopy(tr.policy)
    # the update calls policy.chunk_log_prob -> head.log_prob, not forward(): FSDP must gather around those
    units = shard_submodules(tr.train_policy, tr.cfg.dist.reshard_after_forward,
                             forward_methods={"": ("chunk_log_prob",), "head": ("log_prob",)})
    tr.optimizer = torch.optim.AdamW(tr.train_policy.parameters(), lr=tr.cfg.rl.lr, weight_decay=0.0)
    if full_state["state"]:
        load_full_optimizer_state_dict(tr.train_policy, tr.optimizer, full_state)
    tr.upd = DistributedUpdate(tr.train_policy.parameters(), tr.optimizer, tr.guard,
                               tr.cfg.grpo.max_grad_norm, tr.fsdp, tr.dist)
    tr.report(f"dist.strategy=fsdp: the RL copy of the policy is sharded over {tr.dist.world_size} processes "
              f"({len(units)} units + the root); rollouts and evaluation use the full replica")


def sync_replica(tr: VLATrainerLike) -> None:
    """Copy the sharded weights into the full replica ``tr.policy`` (a collective; no-op without FSDP)."""
    if tr.train_policy is not tr.policy:
        copy_full_parameters(tr.train_policy, tr.policy)

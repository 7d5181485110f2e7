"""grpo: the shared group-relative optimizer core (imports no frontend).

Modules: ``advantages`` (GRPO, MC-GRPO, GDPO, per-prompt tracker), ``loss`` (clipped PG + KL),
``flow_sde`` (the SDE step with log-prob and the one sampling chain, ``flow_chain``, for diffusion latents, robot
action chunks and world-model frames alike; Mix's SDE window, ``mix_sde_mask``),
``tree`` (BranchGRPO rollout trees and their credit, ``tree_advantages``),
``selection`` (pool-then-train subsets), ``train_step``
(config + guarded update), ``update`` (the update across processes: scaled backward, FSDP zero-weight passes,
gradient all-reduce, a skip agreed by every rank), ``loop`` (the training loop: resume, eval / save cadence,
graceful stop), ``checkpoint``, ``metrics``, ``config``, ``device`` (the ``device`` option and noise drawn the
same on any device).
"""

# ruff: noqa: F401  (the package re-exports these names: __all__ below is built from dir())
from .advantages import Advantages, PerPromptStatTracker, clip_advantages, decoupled_advantages, group_advantages
from .checkpoint import capture_rng_state, latest_checkpoint, load_checkpoint, restore_rng_state, save_checkpoint
from .config import ConfigError, load_config
from .device import module_device, resolve_device
from .flow_sde import (
    ChainStep,
    SDEStepOutput,
    chain_step,
    flow_chain,
    flow_sigmas,
    gaussian_log_prob,
    mix_sde_mask,
    sde_step,
    sliding_window,
)
from .loop import LoopResult, resume_latest, run_loop
from .loss import PGLossOutput, clipped_pg_loss, flow_kl, flow_kl_scale, k3_kl, reference_kl
from .selection import select_per_group, select_subset
from .train_step import GRPOConfig, NonFiniteError, NonFiniteGuard, backward_if_finite, compute_advantages, guarded_step
from .tree import (
    RolloutTree,
    TreeCredit,
    depth_advantages,
    fuse_rewards,
    subtree_of_leaves,
    tree_advantages,
    width_prune,
)
from .update import DistributedUpdate, agree_on_skip

__all__ = [n for n in dir() if not n.startswith("_")]

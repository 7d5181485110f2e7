"""The diffusion GRPO trainer: flat Flow-GRPO/DanceGRPO or BranchGRPO trees, one loop (TRL-like config + trainer).

One iteration::

    rollout   flat: P prompts x G samples (sampling.flat_rollout)    tree: P trees (branch.tree_rollout)
    reward    decode the final latents -> images [B, 3, H, W] in [0, 1] -> rewards.Reward -> total [B]
    credit    flat: group-relative A_i = (r_i - mean_g) / (std_g + eps)  (or the per-prompt stat tracker)
              tree: fused node rewards -> depth-wise advantages, width/depth pruning (BranchGRPO Eq. 7)
    update    for every trained (row, step): log pi_theta(x_{i+1} | x_i) recomputed (grpo.flow_sde.sde_step with
              prev_sample), clipped surrogate + KL to the LoRA-disabled reference (grpo.loss), guarded step

Exactness of the PPO ratio before the first update: a record's rows are recomputed as ONE call in the rollout's
order, so the stored rollout log-prob is bit-identical to the recomputation. Where pruning drops rows from a
record the batch differs, so the old log-prob is the trainer's own pre-update forward value instead (the live pass
in the first update of the iteration, or a no-grad pass before the first update for later chunks).

Scale-out (``torchrun`` / ``accelerate launch``, one process per device; world size 1 is the same code):

* the iteration's prompts are drawn identically on every rank (same seeded ``random.Random``); flat: each rank
  rolls out its contiguous share of the ``P * G`` samples (groups may straddle ranks); tree: each rank rolls out
  whole trees (``P`` must divide by the world size). Every draw (initial latents, per-step SDE noise, split
  noise, the ``timestep_fraction`` step subset) is keyed by ``(seed, iteration, global index)``, so the run is
  reproducible from one seed and independent of the world size;
* rewards are gathered and the advantages computed over the global batch (``gathered_advantages``; the tracker
  and tree credit see the gathered rewards, prompts and path log-probs), each rank keeps its rows;
* gradients, ``dist.strategy: ddp`` (default): the transformer is not wrapped; after the backward passes of each
  optimizer step the trainable (LoRA) gradients are all-reduce-averaged (:func:`grpo.distributed.average_gradients`);
  ``dist.strategy: fsdp``: the transformer is sharded with FSDP2 (:mod:`grpo.fsdp`, per block then the root) and
  the backward reduce-scatters the gradients instead; every forward/backward is then a collective, so a rank with
  no rows for a trained record runs a zero-weight dummy pass on one row, and evaluation runs on every rank. Each rank's
  loss is scaled by ``world_size * local_rows / global_rows``, so the applied gradient is the gradient of the
  mean over the *global* (row, step) pairs, exactly what one process computes; gradient accumulation is
  ``train.updates_per_iter`` chunks per epoch. A skip (non-finite loss, gradient, reward) on any rank is a skip
  on all ranks. Precision is ``model.dtype`` (bf16/fp16 base weights, fp32 LoRA weights);
* evaluation, logging, image grids and checkpoints happen on rank 0 (then a barrier); a checkpoint holds no
  world-size dependent state and resumes on any number of processes, under either strategy (FSDP gathers FULL
  trainable/optimizer/EMA state dicts onto rank 0 to save, and shards a full one on load);
* SIGTERM/SIGINT (:class:`grpo.signals.GracefulExit`): the ranks agree at the end of the iteration, save and
  return ``stopped``; a rerun resumes. A reward that raises is retried (:func:`grpo.retry.call_with_retry`,
  ``reward.retries``) and then fails with the prompts of the batch in the message.
"""

from __future__ import annotations

import importlib
import math
import random
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import torch
from tqdm.auto import tqdm

from grpo.advantages import PerPromptStatTracker, clip_advantages
from grpo.checkpoint import (capture_rng_state, latest_checkpoint, load_checkpoint, random_state_from_json,
                             random_state_to_json, restore_rng_state, save_checkpoint)
from grpo.config import check_resume_config, config_to_dict
from grpo.distributed import (all_reduce_floats, any_rank, average_gradients, barrier, comm_device,
                              gather_cpu, gathered_advantages, init_distributed, keyed_generator, shard_range)
from grpo.flow_sde import flow_sigmas, sde_step
from grpo.fsdp import (DistConfig, full_optimizer_state_dict, full_tensor, full_trainable_state_dict,
                       load_full_optimizer_state_dict, load_full_trainable_state_dict, shard_like, shard_model)
from grpo.loss import clipped_pg_loss, flow_kl, flow_kl_scale, k3_kl
from grpo.metrics import MetricsLogger
from grpo.retry import call_with_retry
from grpo.signals import GracefulExit
from grpo.train_step import GRPOConfig, NonFiniteGuard, backward_if_finite, compute_advantages, guarded_step

from .adapters import Cond, DiffusionAdapter, ModelConfig, build_adapter, cond_select
from .branch import BranchConfig, tree_credit, tree_rollout
from .pool_config import PoolConfig
from .prompts import PromptConfig, PromptSource
from .sampling import (STREAM_TIMESTEPS, Rollout, SamplerConfig, flat_rollout, guided_velocity, keyed_noise,
                       ode_sample)

STREAM_NFT = 11  # key stream of the DiffusionNFT re-noising draws (times and noise per final sample)


@dataclass
class RewardConfig:
    name: str = "shapes_verifier"  # a name of rewards.build_reward, or "package.module:attr" (a callable or a class)
    kwargs: dict[str, Any] = field(default_factory=dict)
    retries: int = 2  # extra attempts when the reward raises (then the run stops, naming the batch's prompts)
    retry_backoff_s: float = 0.5

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"reward.retries must be >= 0, got {self.retries}")


@dataclass
class TrainConfig:
    iterations: int = 40
    prompts_per_iter: int = 2
    lr: float = 3e-4
    weight_decay: float = 0.0
    inner_epochs: int = 1
    updates_per_iter: int = 1  # optimizer steps per epoch (the trained steps are split into this many chunks)
    ema_decay: float = 0.0  # > 0: keep an EMA of the trainable weights, used for evaluation
    use_tracker: bool = False  # per-prompt stat tracker (DDPO/Flow-GRPO) instead of per-batch groups
    tracker_buffer: int = 32
    tracker_min_count: int = 16
    eval_every: int = 0  # 0: evaluate before and after only
    eval_steps: int = 10  # ODE steps of the evaluation sampler
    save_every: int = 10
    keep_last: int = 2
    log_images: bool = True
    # the objective: "grpo" (clipped policy gradient on the SDE step log-probs, grpo.loss) or "nft" (DiffusionNFT,
    # grpo.nft_loss: flow-matching regression on the final samples, re-noised at nft_timesteps logit-normal times per
    # sample, contrasting the implicit positive/negative policies built from the pre-update velocity; no log-probs)
    loss: Literal["grpo", "nft"] = "grpo"
    nft_beta: float = 1.0
    nft_timesteps: int = 2  # re-noising times per final sample and iteration (split over updates_per_iter chunks)

    def __post_init__(self) -> None:
        if self.loss not in ("grpo", "nft"):
            raise ValueError(f"train.loss must be 'grpo' or 'nft', got {self.loss!r}")
        if self.nft_beta <= 0 or self.nft_timesteps < 1:
            raise ValueError(f"train.nft_beta must be > 0 and train.nft_timesteps >= 1, got {self.nft_beta}, "
                             f"{self.nft_timesteps}")
        if self.iterations < 0 or self.prompts_per_iter < 1 or self.inner_epochs < 1 or self.updates_per_iter < 1:
            raise ValueError("train.iterations >= 0, prompts_per_iter >= 1, inner_epochs >= 1, updates_per_iter >= 1 needed")


@dataclass
class DiffusionRLConfig:
    seed: int = 0
    output_dir: str = "runs/diffusion"
    resume: bool = True
    model: ModelConfig = field(default_factory=ModelConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    branch: BranchConfig = field(default_factory=BranchConfig)
    grpo: GRPOConfig = field(default_factory=lambda: GRPOConfig(group_size=8, clip_low=1e-4, kl_coef=0.0))
    train: TrainConfig = field(default_factory=TrainConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    prompts: PromptConfig = field(default_factory=PromptConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)  # enabled: pool-then-train (diffusion_rl.pool_rollout)
    dist: DistConfig = field(default_factory=DistConfig)  # ddp (replicas) or fsdp (sharded denoiser), grpo.fsdp


def build_reward(rc: RewardConfig):
    """``rewards.build_reward(name, **kwargs)`` with the registry's names in the error.

    ``name = "package.module:attr"`` imports ``attr`` instead: a class is instantiated with ``kwargs``, a function
    is the reward itself (or, with ``kwargs``, a factory called with them).
    """
    if ":" in rc.name:
        mod, _, attr = rc.name.partition(":")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"reward.name={rc.name!r}: cannot import {attr!r} from {mod!r}: {e}") from e
        return obj(**rc.kwargs) if isinstance(obj, type) or rc.kwargs else obj
    import rewards

    if not hasattr(rewards, "build_reward"):
        raise ValueError(f"reward.name={rc.name!r}: the reward registry rewards.build_reward is not available")
    try:
        return rewards.build_reward(rc.name, **rc.kwargs)
    except KeyError as e:
        raise ValueError(f"unknown reward.name {rc.name!r}: {e}") from e


def make_reward_batch(images: torch.Tensor, prompts: list[str], metadata: list[dict] | None = None):
    try:
        from rewards.base import RewardBatch
    except ImportError:  # rewards/ not installed: a plain namespace with the same fields
        return types.SimpleNamespace(images=images, prompts=prompts, metadata=metadata or [{} for _ in prompts])
    return RewardBatch(images=images, prompts=prompts, metadata=metadata or [{} for _ in prompts])


@dataclass
class _Plan:
    rec: Any  # StepRecord
    idx: torch.Tensor  # positions in the record that are trained
    full: bool  # all rows of the record kept: the rollout's batch is reproduced exactly
    old: torch.Tensor | None = None
    n_global: int = 0  # trained rows of this record over all ranks (FSDP: decides the dummy passes)


def _no_phase(name: str) -> None:
    """Phase callback outside ``train()`` (no progress bar to label)."""


class DiffusionGRPOTrainer:
    """Flat GRPO or BranchGRPO on any :class:`DiffusionAdapter` (see module docstring).

    ``reward_fn`` overrides ``cfg.reward`` with any callable ``batch -> object with .total [B]`` (and optional
    ``.components``); ``adapter`` overrides ``cfg.model`` (e.g. an adapter already built).
    """

    def __init__(self, cfg: DiffusionRLConfig, reward_fn: Callable | None = None, adapter: DiffusionAdapter | None = None,
                 log: bool = True):
        if cfg.dist.mixed_precision != "fp32":  # dist.mixed_precision is vla-rl's switch (grpo.fsdp.DistConfig)
            raise ValueError(f"dist.mixed_precision={cfg.dist.mixed_precision!r} is not used by diffusion-rl train: set "
                             "model.dtype (e.g. model.dtype=bf16: bf16 base weights, fp32 LoRA weights and log-probs) "
                             "and leave dist.mixed_precision=fp32")
        self.cfg = cfg
        # device=cpu on a CUDA machine: gloo, which reduces CPU tensors (the default there, NCCL, cannot)
        self.dist = init_distributed("gloo") if cfg.model.device == "cpu" else init_distributed()
        torch.manual_seed(cfg.seed)
        self.tree = cfg.branch.make_tree(cfg.sampler.num_steps) if cfg.branch.enabled else None
        ws = self.dist.world_size
        if self.tree is not None and cfg.train.prompts_per_iter % ws:
            raise ValueError(f"BranchGRPO rolls out whole trees per process: train.prompts_per_iter="
                             f"{cfg.train.prompts_per_iter} must be a multiple of the {ws} processes")
        if self.tree is None and (cfg.train.prompts_per_iter * cfg.grpo.group_size) % ws:
            raise ValueError(f"the global batch prompts_per_iter x group_size = {cfg.train.prompts_per_iter} x "
                             f"{cfg.grpo.group_size} does not split evenly over {ws} processes")
        self.prompts = PromptSource(cfg.prompts, cfg.seed)
        if adapter is None:
            # device auto / cuda resolves to this process's current CUDA device, which init_distributed set to its
            # LOCAL_RANK: one device per process (cfg itself is left as written)
            adapter = build_adapter(cfg.model)
        self.adapter = adapter
        # FSDP2: shard the denoiser (after LoRA, before the optimizer: its parameters become DTensors)
        self.fsdp = cfg.dist.strategy == "fsdp" and ws > 1
        if self.fsdp:
            if cfg.pool.enabled:
                raise ValueError("dist.strategy=fsdp is not supported with pool.enabled (the quantized rollout copy is "
                                 "a full replica); use dist.strategy=ddp")
            shard_model(self.adapter.transformer, reshard_after_forward=cfg.dist.reshard_after_forward)
        elif cfg.dist.strategy == "fsdp" and self.dist.is_main:
            print("dist.strategy=fsdp with one process: nothing to shard, the denoiser is not wrapped")
        self.reward_fn = reward_fn if reward_fn is not None else build_reward(cfg.reward)
        self.reward_name = cfg.reward.name if reward_fn is None else getattr(reward_fn, "__name__", type(reward_fn).__name__)
        self.params = self.adapter.trainable_parameters()
        if not self.params:
            raise ValueError("nothing to train: enable model.lora (or pass an adapter with trainable parameters)")
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        self.guard = NonFiniteGuard(cfg.grpo.max_nonfinite)
        self.tracker = PerPromptStatTracker(cfg.train.tracker_buffer, cfg.train.tracker_min_count, cfg.grpo.adv_eps) \
            if cfg.train.use_tracker else None
        self.ema = {n: p.detach().clone() for n, p in self._named_trainable()} if cfg.train.ema_decay > 0 else None
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.out = Path(cfg.output_dir)
        self._phase: Callable[[str], None] = _no_phase  # train() labels its progress bar: rollout/reward/update/eval
        self.logger = MetricsLogger(self.out, enabled=log and self.dist.is_main, config=config_to_dict(cfg))
        self.iteration = 0
        self.eval_before: float | None = None
        self.last_eval_components: dict[str, float] = {}
        self.eval_before_components: dict[str, float] = {}
        self.last_advantages: torch.Tensor | None = None  # global advantages per row id of the last iteration
        self.last_rewards: torch.Tensor | None = None  # global rewards (flat: samples, tree: leaves)

    # ---- cost -------------------------------------------------------------------------------
    def cost_per_iteration(self) -> dict[str, float]:
        """Rollout NFE and backward passes per iteration (expected value under the timestep fraction)."""
        sc, P = self.cfg.sampler, self.cfg.train.prompts_per_iter
        cfg_mult = 2 if sc.cfg_scale != 1.0 else 1
        from .sampling import sde_step_mask

        nft = self.cfg.train.loss == "nft"
        if self.tree is None:
            G = self.cfg.grpo.group_size
            n_st = int(sde_step_mask(sc, 0).sum())
            trained = self.cfg.train.nft_timesteps if nft else max(1, math.ceil(sc.timestep_fraction * n_st))
            return {"nfe": P * G * sc.num_steps * cfg_mult, "backward": P * G * trained, "final_samples": P * G}
        if nft:
            return {"nfe": P * self.tree.nfe() * cfg_mult, "backward": P * self.tree.num_leaves * self.cfg.train.nft_timesteps,
                    "final_samples": P * self.tree.num_leaves}
        mask = sde_step_mask(sc, 0, force=tuple(self.tree.split_steps))
        steps = [i for i in range(sc.num_steps) if mask[i]]
        trained = steps[:max(1, math.ceil(sc.timestep_fraction * len(steps)))] if sc.timestep_fraction < 1 else steps
        keep = None
        if self.cfg.branch.width_prune != "none" or self.cfg.branch.depth_window:
            credit = tree_credit(self.tree, torch.arange(self.tree.num_leaves, dtype=torch.float32, device="cpu")[None], self.cfg.branch,
                                 torch.zeros(1, len(self.tree), device="cpu"))
            keep = credit.keep
        bw = self.tree.backward_steps(keep, trained)
        if sc.timestep_fraction < 1:  # expected value over random step subsets
            bw = self.tree.backward_steps(keep, steps) * len(trained) / len(steps)
        return {"nfe": P * self.tree.nfe() * cfg_mult, "backward": P * bw, "final_samples": P * self.tree.num_leaves}

    # ---- pieces -------------------------------------------------------------------------------
    def _named_trainable(self):
        return [(n, p) for n, p in self.adapter.transformer.named_parameters() if p.requires_grad]

    def warm_prompts(self, prompts: list[str]) -> None:
        """Encode new prompts one at a time: a text encoder's output for a prompt depends (in the last float bits) on
        the batch it is encoded in, so the cache must not depend on which prompts happened to come first -- otherwise
        a resumed run (or another world size) would condition on slightly different embeddings."""
        cache = getattr(self.adapter, "_cache", None)  # adapters without the base class's cache: nothing to do
        if cache is None:
            return
        for p in dict.fromkeys(prompts):
            if p not in cache:
                self.adapter.encode_prompts([p])

    def rollout(self, prompts: list[str], iteration: int) -> Rollout:
        """This rank's share of the iteration's rollout (global row ids; noise keyed by global index)."""
        if self.tree is None:
            mine = shard_range(len(prompts) * self.cfg.grpo.group_size, self.dist)
            return flat_rollout(self.adapter, prompts, self.cfg.grpo.group_size, self.cfg.sampler, None, iteration,
                                seed=self.cfg.seed, rows=mine)
        return tree_rollout(self.adapter, prompts, self.tree, self.cfg.sampler, None, iteration, seed=self.cfg.seed,
                            prompt_ids=shard_range(len(prompts), self.dist))

    def score(self, latents: torch.Tensor, prompts: list[str]):
        """Decode and reward; a reward that raises is retried ``reward.retries`` times, then fails with
        :class:`grpo.retry.RetryError` whose ``.batch`` (and message) lists the batch's distinct prompts."""
        images = self.adapter.decode(latents)  # [B, 3, H, W] (video: [B, F, 3, H, W], the frames)
        rc = self.cfg.reward
        out = call_with_retry(self.reward_fn, make_reward_batch(images, prompts), retries=rc.retries,
                              backoff_s=rc.retry_backoff_s, what=f"reward {self.reward_name!r}",
                              describe=lambda b: list(dict.fromkeys(b.prompts)))
        return out, images

    def credit(self, ro: Rollout, prompts: list[str], rewards: torch.Tensor, components) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantage and loss mask per *global* row id (flat: per sample; tree: per global node), computed over the
        rewards gathered from every rank; identical on all ranks."""
        if self.tree is None:
            total = len(prompts) * self.cfg.grpo.group_size
            group_ids = ro.final_prompt_idx
            all_rows = gather_cpu(ro.final_rows)
            adv_rows, keep_rows = torch.zeros(total, device="cpu"), torch.zeros(total, dtype=torch.bool, device="cpu")
            if self.tracker is not None:
                all_r, all_p = gather_cpu(rewards), gather_cpu(group_ids)
                adv = clip_advantages(self.tracker.update([prompts[i] for i in all_p.tolist()], all_r), self.cfg.grpo.adv_clip)
                adv_rows[all_rows], keep_rows[all_rows] = adv, True
            else:
                comm = comm_device()
                a = gathered_advantages(lambda r, g, c: compute_advantages(self.cfg.grpo, r.cpu(), g.cpu(),
                                                                           {k: v.cpu() for k, v in c.items()} if c else None),
                                        rewards.to(comm), group_ids.to(comm),
                                        {k: v.to(comm) for k, v in components.items()} if components else None)
                adv_rows[all_rows] = gather_cpu(a.values.float())
                keep_rows[all_rows] = gather_cpu(a.mask.to(torch.uint8)).bool()
            self.last_advantages = adv_rows.clone()
            return adv_rows, keep_rows
        P = len(prompts)
        all_r = gather_cpu(rewards).view(P, -1)
        edge_lp = gather_cpu(ro.extra["edge_log_prob"].float())
        c = tree_credit(self.tree, all_r, self.cfg.branch, edge_lp, self.iteration, self.cfg.grpo.adv_eps)
        adv = clip_advantages(c.advantages, self.cfg.grpo.adv_clip)
        self.last_advantages = adv.clone()
        return adv, c.keep

    def train_steps(self, ro: Rollout) -> set[int]:
        """The stochastic steps trained this iteration: a ``timestep_fraction`` subset keyed by (seed, iteration),
        the same on every rank and on resume."""
        steps = sorted({r.step for r in ro.records if r.stochastic})
        n = max(1, math.ceil(self.cfg.sampler.timestep_fraction * len(steps)))
        if n >= len(steps):
            return set(steps)
        perm = torch.randperm(len(steps), generator=keyed_generator(self.cfg.seed, self.iteration, STREAM_TIMESTEPS), device="cpu")
        return {steps[i] for i in perm[:n].tolist()}

    def _uncond(self, n: int) -> Cond | None:
        """The empty prompt's embeddings expanded to ``n`` rows when CFG is on (``sampler.cfg_scale != 1``), else None."""
        if self.cfg.sampler.cfg_scale == 1.0:
            return None
        return {k: v.expand(n, *v.shape[1:]) for k, v in self.adapter.encode_prompts([""]).items()}

    def _logp(self, plan: _Plan, cond_all, grad: bool, reference: bool = False):
        rec, idx = plan.rec, plan.idx
        x, xn = rec.x[idx], rec.x_next[idx]
        cond = cond_select(cond_all, rec.prompt_idx[idx])
        sc = self.cfg.sampler
        uncond = self._uncond(len(idx))
        with torch.set_grad_enabled(grad):
            v = guided_velocity(self.adapter, x, rec.sigma, cond, uncond, sc.cfg_scale)
            return sde_step(v, x, rec.sigma, rec.sigma_next, kind=sc.sde, eta=sc.eta,
                            sigma_max=float(flow_sigmas(sc.num_steps, sc.shift)[1]), prev_sample=xn)

    def update(self, ro: Rollout, prompts: list[str], adv_rows: torch.Tensor, keep_rows: torch.Tensor,
               steps: set[int]) -> dict[str, float]:
        """Clipped-PG updates over the trained (row, step) pairs (or the DiffusionNFT objective); returns diagnostics."""
        if self.cfg.train.loss == "nft":
            return self.update_nft(ro, prompts, adv_rows, keep_rows)
        g, sc = self.cfg.grpo, self.cfg.sampler
        cond_all = self.adapter.encode_prompts(prompts)
        # one plan per trained record, kept rows or not: every rank has the same records (same steps, same depths),
        # so the chunks (optimizer steps) line up over ranks and world sizes
        plans = []
        for r in ro.records:
            if not r.stochastic or r.step not in steps:
                continue
            k = keep_rows[r.rows]
            plans.append(_Plan(r, torch.nonzero(k).flatten(), bool(k.all())))
        if not plans:
            return {"backward": 0, "nfe_train": 0}
        n_chunks = min(self.cfg.train.updates_per_iter, len(plans))
        chunks = [plans[i * len(plans) // n_chunks:(i + 1) * len(plans) // n_chunks] for i in range(n_chunks)]
        # rows per chunk over all ranks: each rank's loss is weighted so that the averaged gradient is the gradient of
        # the mean over the global (row, step) pairs, whatever the world size
        ws = self.dist.world_size
        rows_global = all_reduce_floats([sum(len(pl.idx) for pl in chunk) for chunk in chunks])
        nfe_mult = 2 if sc.cfg_scale != 1.0 else 1
        nfe, backward, gap = 0, 0, 0.0
        objective: list[float] = []
        # old log-probs: exact rollout values where the batch is reproduced; otherwise a pre-update forward pass
        # (FSDP: a forward is a collective, so where another rank needs one this rank runs a dummy)
        needs = [float(bool(len(pl.idx)) and not pl.full and ci > 0) for ci, chunk in enumerate(chunks) for pl in chunk]
        others = all_reduce_floats(needs, "max") if self.fsdp else needs
        # FSDP: the global row count per plan decides whether the update pass runs it (with a dummy where local is 0)
        plan_rows = all_reduce_floats([len(pl.idx) for pl in plans]) if self.fsdp else [len(pl.idx) for pl in plans]
        for pl, n in zip(plans, plan_rows):
            pl.n_global = n
        k = 0
        for ci, chunk in enumerate(chunks):
            for pl in chunk:
                need, other = needs[k], others[k]
                k += 1
                if not len(pl.idx):
                    if other:
                        self._logp(self._dummy(pl), cond_all, grad=False)
                    continue
                if pl.full:
                    pl.old = pl.rec.log_prob
                    if other:
                        self._logp(self._dummy(pl), cond_all, grad=False)
                elif need:
                    pl.old = self._logp(pl, cond_all, grad=False).log_prob
                    nfe += len(pl.idx) * nfe_mult
        stats: dict[str, list[float]] = {k: [] for k in ("loss", "kl", "clip_frac", "approx_kl", "ratio_mean", "grad_norm")}
        self.adapter.train(True)
        for epoch in range(self.cfg.train.inner_epochs):
            for ci, chunk in enumerate(chunks):
                if rows_global[ci] == 0:  # everything pruned on every rank: no update
                    continue
                chunk_obj = 0.0
                for pl in chunk:
                    if not len(pl.idx):
                        if self.fsdp and pl.n_global:  # others train this record: the same collectives, weight 0
                            dummy = self._dummy(pl)
                            out = self._logp(dummy, cond_all, grad=True)
                            if g.kl_coef > 0:
                                with self.adapter.reference():
                                    self._logp(dummy, cond_all, grad=False)
                            self._backward(out.log_prob.sum() * 0.0)
                        continue
                    out = self._logp(pl, cond_all, grad=True)
                    nfe += len(pl.idx) * nfe_mult
                    if pl.old is None:  # first update of the iteration, pruned batch: own pre-update value
                        pl.old = out.log_prob.detach()
                    if pl.full and epoch == 0 and ci == 0:  # before the first update: must be exactly 0
                        gap = max(gap, float((out.log_prob.detach() - pl.rec.log_prob[pl.idx]).abs().max()))
                    old = pl.old  # full record: idx covers every row in order
                    kl = None
                    if g.kl_coef > 0:
                        with self.adapter.reference():
                            ref = self._logp(pl, cond_all, grad=False)
                        nfe += len(pl.idx) * nfe_mult
                        kl = (flow_kl(out.mean, ref.mean, flow_kl_scale(g.kl_type, out.std, out.std_dev_t)) if g.kl_type != "k3"
                              else k3_kl(out.log_prob, ref.log_prob))
                    adv = adv_rows[pl.rec.rows[pl.idx]]
                    lo = clipped_pg_loss(out.log_prob, old, adv, None, g.clip_low, g.clip_high, kl, g.kl_coef,
                                         g.loss_reduction)
                    weight = len(pl.idx) / rows_global[ci]
                    self._backward(lo.loss * (weight * ws))
                    chunk_obj += float(lo.loss.detach()) * weight
                    backward += len(pl.idx)
                    for k in ("kl", "clip_frac", "approx_kl", "ratio_mean"):
                        v = getattr(lo, k)  # a 0-dim tensor on the model's device, or a float
                        stats[k].append(float(v.detach() if isinstance(v, torch.Tensor) else v))
                    stats["loss"].append(float(lo.loss.detach()))
                objective.append(chunk_obj)
                self._optimizer_step(stats)
        self.adapter.train(False)
        self._ema_update()
        out = {f"loss/{k}" if k != "grad_norm" else k: sum(v) / max(1, len(v)) for k, v in stats.items()}
        if ws > 1:  # diagnostics: means over ranks (the objective: summed, it is already globally weighted)
            keys = [k for k in out if k != "grad_norm"]
            vals = all_reduce_floats([out[k] for k in keys] + objective + [backward, nfe])
            out.update({k: v / ws for k, v in zip(keys, vals)})
            objective, (backward, nfe) = vals[len(keys):len(keys) + len(objective)], vals[len(keys) + len(objective):]
            gap = all_reduce_floats([gap], "max")[0]
        out.update({"backward": backward, "nfe_train": nfe, "logp_recompute_gap": gap,
                    "loss/objective": sum(objective) / max(1, len(objective))})
        return out

    def update_nft(self, ro: Rollout, prompts: list[str], adv_rows: torch.Tensor,
                   keep_rows: torch.Tensor) -> dict[str, float]:
        """DiffusionNFT (:mod:`grpo.nft_loss`) on the final samples: ``x_t = (1 - t) x_0 + t eps``, ``t`` logit-normal,
        target ``eps - x_0``; ``r = optimality_probability(A)``; ``v_old`` is the velocity before this iteration's first
        update (one no-grad pass). The draws are keyed by (seed, iteration, global row), like the rollout noise."""
        from grpo.nft_loss import nft_loss, optimality_probability

        tc, g, sc = self.cfg.train, self.cfg.grpo, self.cfg.sampler
        rows = ro.final_rows
        idx = torch.nonzero(keep_rows[rows]).flatten()
        n_local = len(idx)
        n_global = all_reduce_floats([n_local])[0]
        if n_global == 0:
            return {"backward": 0, "nfe_train": 0}
        dummy = self.fsdp and n_local == 0  # FSDP: the same forward/backward calls as the other ranks, weight 0
        if dummy:
            idx = torch.zeros(1, dtype=torch.long, device="cpu")
        m = len(idx)  # rows computed here (n_local, or the dummy's 1)
        ws, T = self.dist.world_size, tc.nft_timesteps
        dev = self.adapter.device
        cond = cond_select(self.adapter.encode_prompts(prompts), ro.final_prompt_idx[idx]) if m else None
        uncond = self._uncond(m) if m else None
        keys = rows[idx].tolist()
        x0 = ro.final[idx].detach().to(dev).float()
        t_all = torch.sigmoid(keyed_noise((T,), self.cfg.seed, self.iteration, STREAM_NFT, keys)) if m else None
        eps_all = keyed_noise((T, *x0.shape[1:]), self.cfg.seed, self.iteration, STREAM_NFT + 1, keys) if m else None
        r = optimality_probability(adv_rows[rows[idx]], g.adv_clip or 5.0).to(dev) if m else None
        nfe_mult = 2 if sc.cfg_scale != 1.0 else 1
        n_chunks = min(tc.updates_per_iter, T)
        chunks = [list(range(i * T // n_chunks, (i + 1) * T // n_chunks)) for i in range(n_chunks)]

        def noised(j):
            t = t_all[:, j].to(dev)
            eps = eps_all[:, j].to(dev)
            shape = (-1,) + (1,) * (x0.dim() - 1)
            return (1 - t.view(shape)) * x0 + t.view(shape) * eps, t, eps - x0

        nfe, backward = 0, 0
        v_old = {}
        if m:
            with torch.no_grad():
                for j in range(T):
                    xt, t, _ = noised(j)
                    v_old[j] = guided_velocity(self.adapter, xt, t, cond, uncond, sc.cfg_scale).detach()
                    nfe += n_local * nfe_mult
        stats: dict[str, list[float]] = {k: [] for k in ("loss", "positive", "negative", "grad_norm")}
        self.adapter.train(True)
        for _epoch in range(tc.inner_epochs):
            for chunk in chunks:
                for j in chunk if m else ():
                    xt, t, target = noised(j)
                    v = guided_velocity(self.adapter, xt, t, cond, uncond, sc.cfg_scale)
                    nfe += n_local * nfe_mult
                    lo = nft_loss(v, v_old[j], target, r, tc.nft_beta)
                    if dummy:
                        self._backward(lo.loss * 0.0)
                        continue
                    self._backward(lo.loss * (n_local / n_global * ws / len(chunk)))
                    backward += n_local
                    stats["loss"].append(float(lo.loss.detach()))
                    stats["positive"].append(float(lo.positive.detach().mean()))
                    stats["negative"].append(float(lo.negative.detach().mean()))
                self._optimizer_step(stats)
        self.adapter.train(False)
        self._ema_update()
        out = {f"loss/nft_{k}" if k != "grad_norm" else k: sum(v) / max(1, len(v)) for k, v in stats.items()}
        backward, nfe = all_reduce_floats([backward, nfe])
        out.update({"backward": backward, "nfe_train": nfe})
        return out

    def _dummy(self, pl: _Plan) -> _Plan:
        """Row 0 of ``pl``'s record: the input of a zero-weight pass that keeps FSDP's collectives in step."""
        return _Plan(pl.rec, torch.zeros(1, dtype=torch.long, device="cpu"), False)

    def _backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()`` unless non-finite (the update is then flagged and skipped on every rank). Under FSDP the
        backward is a collective, so a non-finite loss still runs one, of ``nan_to_num(loss)`` (zero upstream
        gradient; the step is skipped anyway)."""
        if not self.fsdp:
            backward_if_finite(loss, self.guard)
            return
        if self.guard.check("loss", loss.detach()):
            loss.backward()
        else:
            loss.nan_to_num(0.0, 0.0, 0.0).backward()

    def _sync_gradients(self) -> None:
        """Average the trainable gradients over ranks (DDP's all-reduce; FSDP's backward already reduce-scattered
        them) and agree on skipping the update."""
        if self.dist.world_size == 1:
            return
        if self.fsdp:
            if any_rank(self.guard._pending is not None) and self.guard._pending is None:
                self.guard.flag("non-finite loss on another rank")
            return
        for p in self.params:  # a rank whose rows were all pruned still takes part in every all-reduce
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        average_gradients(self.params)
        if any_rank(self.guard._pending is not None) and self.guard._pending is None:
            self.guard.flag("non-finite loss on another rank")

    def _optimizer_step(self, stats: dict[str, list[float]]) -> None:
        """All-reduce the gradients, then one guarded optimizer step (skipped, and said, on a non-finite loss/grad)."""
        self._sync_gradients()
        st = guarded_step(self.params, self.optimizer, self.cfg.grpo.max_grad_norm, self.guard)
        stats["grad_norm"].append(st.grad_norm)
        if st.skipped:
            print(f"iteration {self.iteration}: update skipped ({st.reason})")

    def _ema_update(self) -> None:
        if self.ema is None:
            return
        d = self.cfg.train.ema_decay
        with torch.no_grad():
            for n, p in self._named_trainable():
                self.ema[n].mul_(d).add_(p.detach(), alpha=1 - d)

    # ---- evaluation ---------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, tag: str | None = None, step: int = 0) -> float:
        """Mean reward of deterministic (ODE) samples on the fixed evaluation prompts (EMA weights if kept)."""
        backup = None
        if self.ema is not None:
            backup = self.adapter.trainable_state_dict()
            self.adapter.load_trainable_state_dict(self.ema)
        prompts = self.prompts.eval_prompts
        self.warm_prompts(prompts)
        gen = torch.Generator().manual_seed(self.cfg.seed + 777)
        lat = ode_sample(self.adapter, prompts, self.cfg.train.eval_steps, gen, self.cfg.sampler.shift, self.cfg.sampler.cfg_scale)
        out, images = self.score(lat, prompts)
        if backup is not None:
            self.adapter.load_trainable_state_dict(backup)
        if tag and self.cfg.train.log_images and images.dim() == 4:
            self.logger.log_images(step, tag, images[:16], nrow=8)
        named = {**(getattr(out, "components", None) or {}), **(getattr(out, "details", None) or {})}
        comps = {f"eval/{k}": float(v.float().mean()) for k, v in named.items()}
        if comps:
            self.logger.log(step, comps)
            self.last_eval_components = comps
        return float(out.total.float().mean())

    # ---- checkpoints --------------------------------------------------------------------------
    def save(self) -> Path | None:
        """Rank 0 writes the checkpoint (nothing in it depends on the world size), then every rank waits for it.
        FSDP: every rank first takes part in gathering the full trainable weights, optimizer state and EMA."""
        path = None
        if self.fsdp:
            tr = self.adapter.transformer
            trainable, optim = full_trainable_state_dict(tr), full_optimizer_state_dict(tr, self.optimizer)
            ema = {k: full_tensor(v).cpu() for k, v in self.ema.items()} if self.ema is not None else None
        else:
            trainable, optim = (self.adapter.trainable_state_dict(), self.optimizer.state_dict()) if self.dist.is_main \
                else (None, None)
            ema = {k: v.clone() for k, v in self.ema.items()} if self.ema is not None and self.dist.is_main else None
        if self.dist.is_main:
            state = {"trainable": trainable, "optimizer": optim,
                     "tracker": self.tracker.state_dict() if self.tracker else None, "guard": self.guard.state_dict(),
                     "rng": capture_rng_state(), "generator": self.gen.get_state(),
                     "data_rng": random_state_to_json(self.rng.getstate()), "iteration": self.iteration,
                     "eval_before": self.eval_before,
                     "config": config_to_dict(self.cfg)}
            if ema is not None:
                state["ema"] = ema
            if self.last_advantages is not None:  # the last iteration's global credit (diagnostics, tests)
                state["last_iteration"] = {"advantages": self.last_advantages, "rewards": self.last_rewards}
            path = save_checkpoint(self.out / "checkpoints", self.iteration, state, keep_last=self.cfg.train.keep_last)
        barrier()
        return path

    def load(self, path: str | Path, check_config: bool = True) -> None:
        state = load_checkpoint(path)
        if check_config:
            check_resume_config(state["config"], self.cfg, state["__path__"],
                                ignore=("train.iterations", "resume", "train.eval_every", "train.save_every",
                                        "reward.retries", "reward.retry_backoff_s", "dist"))
        if self.fsdp:  # a full state dict (saved by any world size, either strategy) sharded onto this rank
            load_full_trainable_state_dict(self.adapter.transformer, state["trainable"])
            load_full_optimizer_state_dict(self.adapter.transformer, self.optimizer, state["optimizer"])
        else:
            self.adapter.load_trainable_state_dict(state["trainable"])
            self.optimizer.load_state_dict(state["optimizer"])
        if self.tracker is not None and state.get("tracker"):
            self.tracker.load_state_dict(state["tracker"])
        self.guard.load_state_dict(state["guard"])
        restore_rng_state(state["rng"])
        self.gen.set_state(state["generator"])
        if "data_rng" in state:
            self.rng.setstate(random_state_from_json(state["data_rng"]))
        else:  # checkpoints before the shared format: the state's ints and gauss_next under py_rng / py_rng_pos
            self.rng.setstate((3, tuple(state["py_rng"]), state["py_rng_pos"]))
        if self.ema is not None and "ema" in state:
            like = dict(self._named_trainable())
            self.ema = {k: shard_like(v.clone(), like[k]) for k, v in state["ema"].items()}
        self.iteration = int(state["iteration"])
        self.eval_before = state.get("eval_before")

    # ---- the loop -----------------------------------------------------------------------------
    def step(self) -> dict[str, float]:
        """One rollout + update iteration (this rank's share, global credit); returns its scalars (logged on rank 0)."""
        t0 = time.perf_counter()
        self._phase("rollout")
        prompts = self.prompts.sample(self.cfg.train.prompts_per_iter, self.rng)  # identical on every rank
        self.warm_prompts(prompts)
        ro = self.rollout(prompts, self.iteration)
        t_roll = time.perf_counter() - t0
        self._phase("reward")
        final_prompts = [prompts[i] for i in ro.final_prompt_idx.tolist()]
        out, _ = self.score(ro.final, final_prompts)
        rewards = out.total.detach().float().cpu()
        components = {k: v.detach().float().cpu() for k, v in (getattr(out, "components", None) or {}).items()} or None
        logps = torch.cat([r.log_prob for r in ro.records if r.stochastic]) if ro.records else torch.zeros(1, device="cpu")
        t1 = time.perf_counter()
        t_reward = t1 - t0 - t_roll
        self._phase("update")
        ok = self.guard.check("reward", rewards) & self.guard.check("log_prob", logps)
        all_rewards = gather_cpu(rewards)
        self.last_rewards = all_rewards
        if any_rank(not ok) and ok:  # one rank's NaN skips the update everywhere
            self.guard.flag("non-finite reward or log-prob on another rank")
            ok = False
        if ok:
            adv, keep = self.credit(ro, prompts, rewards, components)
            upd = self.update(ro, prompts, adv, keep, self.train_steps(ro))
        else:
            reason = self.guard.end_step()  # raises NonFiniteError after max_nonfinite in a row
            if self.dist.is_main:
                print(f"iteration {self.iteration}: rollout skipped ({reason}); no update applied")
            upd = {"backward": 0, "nfe_train": 0}
        self.iteration += 1
        t_roll_max, nfe_roll = all_reduce_floats([t_roll], "max")[0], all_reduce_floats([ro.nfe])[0]
        scalars = {"reward/mean": float(all_rewards.nan_to_num().mean()), "reward/std": float(all_rewards.nan_to_num().std()),
                   "cost/nfe_rollout": nfe_roll, "cost/backward": upd.pop("backward"), "cost/nfe_train": upd.pop("nfe_train"),
                   "time/rollout_s": t_roll_max, "time/reward_s": t_reward, "time/update_s": time.perf_counter() - t1,
                   "time/iter_s": time.perf_counter() - t0, "throughput/rollout_samples_per_s": len(all_rewards) / max(t_roll_max, 1e-9),
                   "skipped_updates": self.guard.total_skipped, **upd}
        self.logger.log(self.iteration, scalars)
        return scalars

    def train(self, progress: bool = True) -> dict[str, Any]:
        """The loop; under a launcher every rank runs it. Returns ``{"eval_before", "eval_after", "seconds", "last",
        "stopped"}`` (evaluations are rank 0's; other ranks get NaN, except under FSDP, where every rank evaluates
        because the sharded forward is a collective; ``stopped`` names the signal that ended the run)."""
        cfg, main = self.cfg, self.dist.is_main
        ev = main or self.fsdp  # the ranks that run evaluate() (rank 0 alone logs)
        latest = latest_checkpoint(self.out / "checkpoints") if cfg.resume else None
        if latest is not None:
            self.load(latest)
            if main:
                print(f"resumed from {latest} at iteration {self.iteration}")
        t0 = time.time()
        if self.eval_before is None and ev:
            self.eval_before = self.evaluate("samples/before", 0)
            self.eval_before_components = dict(self.last_eval_components)
            self.logger.log(0, {"eval/reward": self.eval_before})
        barrier()
        bar = tqdm(range(self.iteration, cfg.train.iterations), initial=self.iteration, total=cfg.train.iterations,
                   desc="diffusion-rl", disable=not (progress and main))
        self._phase = lambda name: bar.set_description(f"diffusion-rl[{name}]", refresh=False)
        last: dict[str, float] = {}
        stopped = None
        with GracefulExit() as stop:
            for _ in bar:
                last = self.step()
                bar.set_postfix(reward=f"{last['reward/mean']:.3f}", nfe=int(last["cost/nfe_rollout"]))
                if any_rank(stop.requested is not None):  # every rank stops after the same iteration
                    stopped = stop.requested or "a signal on another rank"
                    self.save()
                    if main:
                        print(f"stopped by {stopped} after iteration {self.iteration}; checkpoint saved, rerun to resume",
                              flush=True)
                    break
                if cfg.train.eval_every and self.iteration % cfg.train.eval_every == 0 and self.iteration < cfg.train.iterations:
                    if ev:
                        self._phase("eval")
                        self.logger.log(self.iteration, {"eval/reward": self.evaluate(step=self.iteration)})
                    barrier()
                if self.iteration % cfg.train.save_every == 0 or self.iteration == cfg.train.iterations:
                    self.save()
        self._phase = _no_phase
        after = float("nan")
        if stopped is None and ev:
            after = self.evaluate("samples/after", self.iteration)
            self.logger.log(self.iteration, {"eval/reward": after, "eval/reward_before": self.eval_before})
        barrier()
        self.logger.close()
        before = self.eval_before if self.eval_before is not None else float("nan")
        return {"eval_before": before, "eval_after": after, "seconds": time.time() - t0, "last": last, "stopped": stopped,
                "eval_components_before": self.eval_before_components, "eval_components_after": self.last_eval_components}

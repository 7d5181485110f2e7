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

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from grpo.checkpoint import (capture_rng_state, load_checkpoint, random_state_from_json, random_state_to_json,
                             restore_rng_state, save_checkpoint)
from grpo.config import check_resume_config, config_to_dict
from grpo.distributed import all_reduce_floats, barrier, gather_cpu, init_distributed, keyed_generator
from grpo.flow_sde import sde_step
from grpo.fsdp import (full_optimizer_state_dict, full_tensor, full_trainable_state_dict,
                       load_full_optimizer_state_dict, load_full_trainable_state_dict, shard_like, shard_model)
from grpo.loss import clipped_pg_loss, flow_kl, k3_kl
from grpo.metrics import MetricsLogger
from grpo.loop import Phase, no_phase, resume_latest, run_loop
from grpo.retry import call_with_retry
from grpo.train_step import NonFiniteGuard
from grpo.update import DistributedUpdate, agree_on_skip
from rewards import RewardBatch, build_reward

from .adapters import Cond, DiffusionAdapter, build_adapter, cond_select
from .config import DiffusionRLConfig
from .prompts import PromptSource
from .sampling import STREAM_TIMESTEPS, Rollout, guided_velocity, keyed_noise, ode_sample
from .strategies import check_strategy, make_strategy

STREAM_NFT = 11  # key stream of the DiffusionNFT re-noising draws (times and noise per final sample)


@dataclass
class _Plan:
    rec: Any  # StepRecord
    idx: torch.Tensor  # positions in the record that are trained
    full: bool  # all rows of the record kept: the rollout's batch is reproduced exactly
    old: torch.Tensor | None = None
    n_global: int = 0  # trained rows of this record over all ranks (FSDP: decides the dummy passes)


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
        ws = self.dist.world_size
        check_strategy(cfg, ws)  # flat / tree / pool settings, before the model is built
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
        self.reward_fn = reward_fn if reward_fn is not None else build_reward(cfg.reward.name, **cfg.reward.kwargs)
        self.reward_name = cfg.reward.name if reward_fn is None else getattr(reward_fn, "__name__", type(reward_fn).__name__)
        self.params = self.adapter.trainable_parameters()
        if not self.params:
            raise ValueError("nothing to train: enable model.lora (or pass an adapter with trainable parameters)")
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        self.guard = NonFiniteGuard(cfg.grpo.max_nonfinite)
        self.upd = DistributedUpdate(self.params, self.optimizer, self.guard, cfg.grpo.max_grad_norm, self.fsdp, self.dist)
        self.ema = {n: p.detach().clone() for n, p in self._named_trainable()} if cfg.train.ema_decay > 0 else None
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.out = Path(cfg.output_dir)
        self.logger = MetricsLogger(self.out, enabled=log and self.dist.is_main, config=config_to_dict(cfg))
        self.iteration = 0
        self.eval_before: float | None = None
        self.last_eval_components: dict[str, float] = {}
        self.eval_before_components: dict[str, float] = {}
        self.last_advantages: torch.Tensor | None = None  # global advantages per row id of the last iteration
        self.last_rewards: torch.Tensor | None = None  # global rewards (flat: samples, tree: leaves)
        # flat / tree / pool rollouts and their credit (diffusion_rl.strategies), picked from the config
        self.strategy = make_strategy(cfg, self.adapter, self.dist, self.score)

    # ---- cost -------------------------------------------------------------------------------
    def cost_per_iteration(self) -> dict[str, float]:
        """Rollout NFE and backward passes per iteration (expected value under the timestep fraction)."""
        return self.strategy.cost()

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
        return self.strategy.rollout(prompts, iteration)

    def score(self, latents: torch.Tensor, prompts: list[str]):
        """Decode and reward; a reward that raises is retried ``reward.retries`` times, then fails with
        :class:`grpo.retry.RetryError` whose ``.batch`` (and message) lists the batch's distinct prompts."""
        images = self.adapter.decode(latents)  # [B, 3, H, W] (video: [B, F, 3, H, W], the frames)
        rc = self.cfg.reward
        batch = RewardBatch(images=images, prompts=prompts, metadata=[{} for _ in prompts])
        out = call_with_retry(self.reward_fn, batch, retries=rc.retries,
                              backoff_s=rc.retry_backoff_s, what=f"reward {self.reward_name!r}",
                              describe=lambda b: list(dict.fromkeys(b.prompts)))
        return out, images

    def credit(self, ro: Rollout, prompts: list[str], rewards: torch.Tensor, components) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantage and loss mask per *global* row id (flat: per sample; tree: per global node), computed over the
        rewards gathered from every rank; identical on all ranks."""
        adv, keep = self.strategy.credit(ro, prompts, rewards, components, self.iteration)
        self.last_advantages = adv.clone()
        return adv, keep

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
            return sde_step(v, x, rec.sigma, rec.sigma_next, kind=sc.sde, eta=sc.eta, prev_sample=xn)

    def update(self, ro: Rollout, prompts: list[str], adv_rows: torch.Tensor, keep_rows: torch.Tensor,
               steps: set[int]) -> dict[str, float]:
        """Clipped-PG updates over the trained (row, step) pairs (or the DiffusionNFT objective); returns diagnostics.
        The strategy's ``after_update`` follows (the pool's explorer is re-quantized from the new weights)."""
        if self.cfg.train.loss == "nft":
            out = self.update_nft(ro, prompts, adv_rows, keep_rows)
        else:
            out = self.update_pg(ro, prompts, adv_rows, keep_rows, steps)
        self.strategy.after_update()
        return out

    def update_pg(self, ro: Rollout, prompts: list[str], adv_rows: torch.Tensor, keep_rows: torch.Tensor,
                  steps: set[int]) -> dict[str, float]:
        """Flow-GRPO's clipped surrogate on the SDE steps: per trained record, ``log pi_theta(x_{i+1} | x_i)``
        recomputed (``sde_step(prev_sample=)``), ratio to the rollout's ``log pi_old``, clipped loss + KL to the
        LoRA-disabled reference, one guarded step per chunk; every rank weighted by its share of the chunk's global
        rows (:class:`grpo.update.DistributedUpdate`)."""
        g, sc, upd = self.cfg.grpo, self.cfg.sampler, self.upd
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
        # the loss is the mean over the chunk's global (row, step) pairs, whatever the world size
        rows_global = upd.global_sum([sum(len(pl.idx) for pl in chunk) for chunk in chunks])
        nfe_mult = 2 if sc.cfg_scale != 1.0 else 1
        nfe, backward, gap = 0, 0, 0.0
        objective: list[float] = []
        # old log-probs: exact rollout values where the batch is reproduced; otherwise a pre-update forward pass
        # (a pass another rank runs in lockstep is run here too, on a stand-in row: upd.lockstep)
        needs = [float(bool(len(pl.idx)) and not pl.full and ci > 0) for ci, chunk in enumerate(chunks) for pl in chunk]
        others = upd.lockstep(needs, "max")
        for pl, n in zip(plans, upd.lockstep([len(pl.idx) for pl in plans], "sum")):
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
                    if not len(pl.idx):  # others may train this record: the same passes, weight 0
                        upd.zero_weight_pass(lambda: self._dummy_loss(pl, cond_all), pl.n_global > 0)
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
                        kl = flow_kl(out.mean, ref.mean, out.std) if g.kl_type == "flow" else k3_kl(out.log_prob, ref.log_prob)
                    adv = adv_rows[pl.rec.rows[pl.idx]]
                    lo = clipped_pg_loss(out.log_prob, old, adv, None, g.clip_low, g.clip_high, kl, g.kl_coef,
                                         g.loss_reduction)
                    upd.backward(lo.loss, len(pl.idx), rows_global[ci])
                    chunk_obj += float(lo.loss.detach()) * (len(pl.idx) / rows_global[ci])
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
        # diagnostics: means over ranks (the objective: summed, it is already globally weighted); costs: summed
        keys = [k for k in out if k != "grad_norm"]
        out.update(zip(keys, upd.mean_over_ranks([out[k] for k in keys])))
        objective = upd.global_sum(objective)
        backward, nfe = upd.global_sum([backward, nfe])
        out.update({"backward": backward, "nfe_train": nfe, "logp_recompute_gap": upd.global_max([gap])[0],
                    "loss/objective": sum(objective) / max(1, len(objective))})
        return out

    def update_nft(self, ro: Rollout, prompts: list[str], adv_rows: torch.Tensor,
                   keep_rows: torch.Tensor) -> dict[str, float]:
        """DiffusionNFT (:mod:`grpo.nft_loss`) on the final samples: ``x_t = (1 - t) x_0 + t eps``, ``t`` logit-normal,
        target ``eps - x_0``; ``r = optimality_probability(A)``; ``v_old`` is the velocity before this iteration's first
        update (one no-grad pass). The draws are keyed by (seed, iteration, global row), like the rollout noise."""
        from grpo.nft_loss import nft_loss, optimality_probability

        tc, g, sc, upd = self.cfg.train, self.cfg.grpo, self.cfg.sampler, self.upd
        rows = ro.final_rows
        idx = torch.nonzero(keep_rows[rows]).flatten()
        n_local = len(idx)
        n_global = upd.global_sum([n_local])[0]
        if n_global == 0:
            return {"backward": 0, "nfe_train": 0}
        if n_local == 0:  # no rows here: stand-in rows that run the other ranks' passes with weight 0 (FSDP), or none
            idx = torch.zeros(upd.stand_in_rows, dtype=torch.long, device="cpu")
        m = len(idx)  # rows computed here (n_local, or the stand-in's)
        T = tc.nft_timesteps
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
                    if n_local == 0:
                        upd.zero_weight_pass(lambda: lo.loss)
                        continue
                    # the mean over the chunk's timesteps and the global rows
                    upd.backward(lo.loss, n_local, n_global * len(chunk))
                    backward += n_local
                    stats["loss"].append(float(lo.loss.detach()))
                    stats["positive"].append(float(lo.positive.detach().mean()))
                    stats["negative"].append(float(lo.negative.detach().mean()))
                self._optimizer_step(stats)
        self.adapter.train(False)
        self._ema_update()
        out = {f"loss/nft_{k}" if k != "grad_norm" else k: sum(v) / max(1, len(v)) for k, v in stats.items()}
        backward, nfe = upd.global_sum([backward, nfe])
        out.update({"backward": backward, "nfe_train": nfe})
        return out

    def _dummy(self, pl: _Plan) -> _Plan:
        """Row 0 of ``pl``'s record: the stand-in of a zero-weight pass that keeps FSDP's collectives in step."""
        return _Plan(pl.rec, torch.zeros(1, dtype=torch.long, device="cpu"), False)

    def _dummy_loss(self, pl: _Plan, cond_all) -> torch.Tensor:
        """The passes a trained record runs (policy, and the reference with KL), on its stand-in row."""
        dummy = self._dummy(pl)
        out = self._logp(dummy, cond_all, grad=True)
        if self.cfg.grpo.kl_coef > 0:
            with self.adapter.reference():
                self._logp(dummy, cond_all, grad=False)
        return out.log_prob.sum()

    def _optimizer_step(self, stats: dict[str, list[float]]) -> None:
        """One guarded step across ranks (skipped, and said, on a non-finite loss/grad on any rank)."""
        st = self.upd.step()
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
                     "tracker": self.strategy.state_dict(), "guard": self.guard.state_dict(),
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
        self.strategy.load_state_dict(state.get("tracker"))
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
        self.strategy.after_load()

    # ---- the loop -----------------------------------------------------------------------------
    def step(self, phase: Phase = no_phase) -> dict[str, float]:
        """One iteration, rollout -> reward -> credit -> update -> log (this rank's share, global credit); returns its
        scalars (logged on rank 0). ``phase`` labels the progress bar."""
        t0 = time.perf_counter()
        phase("rollout")
        prompts = self.prompts.sample(self.cfg.train.prompts_per_iter, self.rng)  # identical on every rank
        self.warm_prompts(prompts)
        ro = self.rollout(prompts, self.iteration)
        t_roll = time.perf_counter() - t0
        phase("reward")
        final_prompts = [prompts[i] for i in ro.final_prompt_idx.tolist()]
        out, _ = self.score(ro.final, final_prompts)
        rewards = out.total.detach().float().cpu()
        components = {k: v.detach().float().cpu() for k, v in (getattr(out, "components", None) or {}).items()} or None
        logps = torch.cat([r.log_prob for r in ro.records if r.stochastic]) if ro.records else torch.zeros(1, device="cpu")
        t1 = time.perf_counter()
        t_reward = t1 - t0 - t_roll
        phase("update")
        self.guard.check("reward", rewards)
        self.guard.check("log_prob", logps)
        all_rewards = gather_cpu(rewards)
        self.last_rewards = all_rewards
        # one rank's NaN skips the update everywhere
        if not agree_on_skip(self.guard, "non-finite reward or log-prob on another rank"):
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
        """The loop (:func:`grpo.loop.run_loop`); under a launcher every rank runs it. Returns ``{"eval_before",
        "eval_after", "seconds", "last", "stopped"}`` (evaluations are rank 0's; other ranks get NaN, except under FSDP,
        where every rank evaluates because the sharded forward is a collective; ``stopped`` names the signal that
        ended the run)."""
        cfg, main = self.cfg, self.dist.is_main
        ev = main or self.fsdp  # the ranks that run evaluate() (rank 0 alone logs)
        latest = resume_latest(self.out / "checkpoints", cfg.resume, self.load)
        if latest is not None and main:
            print(f"resumed from {latest} at iteration {self.iteration}")
        t0 = time.time()
        if self.eval_before is None and ev:
            self.eval_before = self.evaluate("samples/before", 0)
            self.eval_before_components = dict(self.last_eval_components)
            self.logger.log(0, {"eval/reward": self.eval_before})
        barrier()

        def evaluate(iteration: int) -> None:
            if ev:
                self.logger.log(iteration, {"eval/reward": self.evaluate(step=iteration)})
            barrier()

        res = run_loop(self.step, self.iteration, cfg.train.iterations, save=self.save, save_every=cfg.train.save_every,
                       evaluate=evaluate, eval_every=cfg.train.eval_every, desc="diffusion-rl", progress=progress,
                       postfix=lambda s: {"reward": f"{s['reward/mean']:.3f}", "nfe": int(s["cost/nfe_rollout"])})
        last, stopped = res.last, res.stopped
        after = float("nan")
        if stopped is None and ev:
            after = self.evaluate("samples/after", self.iteration)
            self.logger.log(self.iteration, {"eval/reward": after, "eval/reward_before": self.eval_before})
        barrier()
        self.logger.close()
        before = self.eval_before if self.eval_before is not None else float("nan")
        return {"eval_before": before, "eval_after": after, "seconds": time.time() - t0, "last": last, "stopped": stopped,
                "eval_components_before": self.eval_before_components, "eval_components_after": self.last_eval_components}

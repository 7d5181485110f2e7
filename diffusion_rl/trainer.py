"""The diffusion GRPO trainer: flat Flow-GRPO / DanceGRPO, BranchGRPO trees or pool-then-train, one loop (a TRL-like
config + trainer on :class:`grpo.trainer_base.TrainerBase`).

One iteration (:meth:`DiffusionGRPOTrainer.step`; the loop around it is :func:`grpo.loop.run_loop`)::

    rollout   the strategy's (diffusion_rl.strategies): flat P prompts x G samples, P BranchGRPO trees, pool, tree x
              pool
    reward    decode the final latents -> images [B, 3, H, W] in [0, 1] -> rewards.Reward -> total [B]
    credit    flat / pool: A_i = (r_i - mean_g) / (std_g + eps) (or the per-prompt stat tracker); tree: fused node
              rewards -> depth-wise advantages, width/depth pruning (BranchGRPO Eq. 7)
    update    per trained (row, step): log pi_theta(x_{i+1} | x_i) recomputed (grpo.flow_sde.sde_step, prev_sample),
              ratio r = exp(log pi_theta - log pi_old), loss -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)
              + beta KL(pi_theta || pi_ref) to the LoRA-disabled reference (grpo.loss; Flow-GRPO), a guarded step per
              chunk of records; or the DiffusionNFT objective (diffusion_rl.nft_update)

The exactness of the ratio before the first update, the scale-out over processes (sharded batches, DDP / FSDP
gradients, skips agreed by all ranks, world-size free checkpoints) and signals: docs/ARCHITECTURE.md, "The diffusion
trainer".
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import torch

from grpo.checkpoint import (
    capture_rng_state,
    random_state_from_json,
    random_state_to_json,
    restore_rng_state,
)
from grpo.config import config_to_dict
from grpo.distributed import all_reduce_floats, any_rank, barrier, gather_cpu, init_distributed
from grpo.flow_sde import flow_sigmas, sde_step
from grpo.fsdp import shard_like
from grpo.loop import Phase, StopRun, no_phase, resume_latest, run_loop
from grpo.loss import clipped_pg_loss, reference_kl
from grpo.metrics import MetricsLogger
from grpo.minibatch import Minibatches
from grpo.monitors import HackingAlarm, unarmed_alarm_note
from grpo.train_step import NonFiniteGuard, StepStats, as_float
from grpo.trainer_base import TrainerBase
from grpo.update import DistributedUpdate, agree_on_skip
from rewards.image_stats import build_monitor
from rewards.remote import RemoteRewardError

from .adapters import Cond, DiffusionAdapter, build_adapter, cond_select
from .config import DiffusionRLConfig
from .evaluation import AFTER, BEFORE, eval_everywhere, evaluate_ode
from .lora_files import checkpoint_lora_files
from .nft_update import update_nft
from .prompts import PromptSource
from .record_plans import Plan, dummy_loss, old_logps, pg_scalars, record_chunks, trained_steps
from .sampling import Rollout, guided_velocity
from .scoring import build_train_reward, reward_images, rollout_and_score
from .sharded_denoiser import full_trainable_state, load_full_trainable_state, shard_denoiser
from .strategies import check_strategy, make_strategy, projected_gpu_units


class DiffusionGRPOTrainer(TrainerBase):
    """Flat GRPO or BranchGRPO on any :class:`DiffusionAdapter` (see module docstring).

    ``reward_fn`` overrides ``cfg.reward`` with any callable ``batch -> object with .total [B]`` (and optional
    ``.components``); ``adapter`` overrides ``cfg.model`` (e.g. an adapter already built).
    """

    def __init__(self, cfg: DiffusionRLConfig, reward_fn: Callable | None = None,
                 adapter: DiffusionAdapter | None = None,
                 log: bool = True):
        if cfg.dist.mixed_precision != "fp32":  # dist.mixed_precision is vla-rl's switch (grpo.fsdp.DistConfig)
            raise ValueError(f"dist.mixed_precision={cfg.dist.mixed_precision!r} is not used by diffusion-rl train: "
                             "set model.dtype (e.g. model.dtype=bf16: bf16 base weights, fp32 LoRA weights and "
                             "log-probs) and leave dist.mixed_precision=fp32")
        self.cfg, self.loop = cfg, cfg.train
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
        self.fsdp = shard_denoiser(cfg, self.adapter, self.dist)
        self.reward_fn, self.remote, self.reward_name = build_train_reward(cfg.reward, reward_fn)
        # reward.overlap > 1: scores the rollout's parts in the background
        self.scorer: ThreadPoolExecutor | None = None
        # gold monitors on the evaluation samples, never trained on, and the reward-hacking alarm (grpo.monitors)
        self.monitors = {n: build_monitor(n) for n in cfg.eval.monitors}
        self.alarm = HackingAlarm(cfg.eval.patience, cfg.eval.action, cfg.eval.min_delta)
        self.params = self.adapter.trainable_parameters()
        if not self.params:
            raise ValueError("nothing to train: enable model.lora (or pass an adapter with trainable parameters)")
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        self.guard = NonFiniteGuard(cfg.grpo.max_nonfinite)
        self.upd = DistributedUpdate(self.params, self.optimizer, self.guard, cfg.grpo.max_grad_norm, self.fsdp,
                                     self.dist)
        self.ema = {n: p.detach().clone() for n, p in self._named_trainable()} if cfg.train.ema_decay > 0 else None
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.out = Path(cfg.output_dir)
        # opened by train() after the checkpoint it resumes from is loaded (a refused resume writes nothing), or by
        # the first log call
        self.logger = MetricsLogger(self.out, enabled=log and self.dist.is_main, config=config_to_dict(cfg),
                                    log=cfg.log, resume=cfg.resume, defer=True)
        self.iteration = 0
        self.eval_before: float | None = None
        self.best: dict[str, Any] | None = None  # {"metric", "value", "iteration", "mode"} of checkpoints/best
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
        :class:`grpo.retry.RetryError` whose ``.batch`` (and message) lists the batch's distinct prompts (a reward
        server retries each request itself, ``reward.remote.retries``, then raises
        :class:`rewards.remote.RemoteRewardError`)."""
        images = self.adapter.decode(latents)  # [B, 3, H, W] (video: [B, F, 3, H, W], the frames)
        return reward_images(self, images, prompts), images

    def credit(self, ro: Rollout, prompts: list[str], rewards: torch.Tensor,
               components) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantage and loss mask per *global* row id (flat: per sample; tree: per global node), computed over the
        rewards gathered from every rank; identical on all ranks."""
        adv, keep = self.strategy.credit(ro, prompts, rewards, components, self.iteration)
        self.last_advantages = adv.clone()
        return adv, keep

    def uncond(self, n: int) -> Cond | None:
        """The empty prompt's embeddings expanded to ``n`` rows when CFG is on (``sampler.cfg_scale != 1``), else
        None."""
        if self.cfg.sampler.cfg_scale == 1.0:
            return None
        return {k: v.expand(n, *v.shape[1:]) for k, v in self.adapter.encode_prompts([""]).items()}

    def logp(self, plan: Plan, cond_all, grad: bool, reference: bool = False):
        rec, idx = plan.rec, plan.idx
        x, xn = rec.x[idx], rec.x_next[idx]
        cond = cond_select(cond_all, rec.prompt_idx[idx])
        sc = self.cfg.sampler
        uncond = self.uncond(len(idx))
        with torch.set_grad_enabled(grad):
            v = guided_velocity(self.adapter, x, rec.sigma, cond, uncond, sc.cfg_scale)
            return sde_step(v, x, rec.sigma, rec.sigma_next, kind=sc.sde, eta=sc.eta,
                            sigma_max=float(flow_sigmas(sc.num_steps, sc.shift)[1]), prev_sample=xn)

    def update(self, ro: Rollout, prompts: list[str], adv_rows: torch.Tensor, keep_rows: torch.Tensor,
               steps: set[int]) -> dict[str, float]:
        """Clipped-PG updates over the trained (row, step) pairs (or the DiffusionNFT objective); returns diagnostics.
        The strategy's ``after_update`` follows (the pool's explorer is re-quantized from the new weights)."""
        if self.cfg.train.loss == "nft":
            out = update_nft(self, ro, prompts, adv_rows, keep_rows)
        else:
            out = self.update_pg(ro, prompts, adv_rows, keep_rows, steps)
        self.strategy.after_update()
        return out

    def update_pg(self, ro: Rollout, prompts: list[str], adv_rows: torch.Tensor, keep_rows: torch.Tensor,
                  steps: set[int]) -> dict[str, float]:
        """Flow-GRPO's clipped surrogate on the SDE steps: per trained record, ``log pi_theta(x_{i+1} | x_i)``
        recomputed (``sde_step(prev_sample=)``), ratio to the rollout's ``log pi_old``, clipped loss + KL to the
        LoRA-disabled reference, one guarded step per chunk of records (``train.updates_per_iter`` per epoch); the
        loss is the mean over the chunk's (row, step) pairs on every rank (:class:`grpo.minibatch.Minibatches`)."""
        g, cond = self.cfg.grpo, self.adapter.encode_prompts(prompts)
        adv_rows = adv_rows.to(self.adapter.device)  # the credit is computed on the CPU (from the gathered rewards)
        chunks = record_chunks(ro, keep_rows, steps, self.cfg.train.updates_per_iter)
        if not chunks:
            return {"backward": 0, "nfe_train": 0}
        batches = Minibatches(self.upd, lambda pl: (float(len(pl)),), lambda pl: dummy_loss(self, pl, cond), exact=True)
        nfe, backward, objective, nfe_row = 0, 0, [], 2 if self.cfg.sampler.cfg_scale != 1.0 else 1
        stats: dict[str, list[float]] = {k: [] for k in ("loss", "kl", "clip_frac", "approx_kl", "ratio_mean")}
        grad_norms: list[float] = []
        nfe += old_logps(self, chunks, batches, cond) * nfe_row
        self.adapter.train(True)
        for epoch in range(self.cfg.train.inner_epochs):
            for step in batches.steps(chunks, epoch):
                objective.append(0.0)
                for mb in step:
                    pl = mb.item
                    out = self.logp(pl, cond, grad=True)
                    if pl.old is None:  # the first update of the iteration, pruned batch: its own pre-update value
                        pl.old = out.log_prob.detach()
                    if mb.first:  # on-policy self-check: exactly 0 where the batch is the rollout's (grpo.onpolicy)
                        batches.onpolicy.add(out.log_prob, pl.rec.log_prob[pl.idx], exact=pl.full)
                    kl = None
                    if g.kl_coef > 0:
                        with self.adapter.reference():
                            ref = self.logp(pl, cond, grad=False)
                        nfe += len(pl) * nfe_row
                        kl = reference_kl(g.kl_type, out.log_prob, ref.log_prob, out.mean, ref.mean, out.std,
                                          out.std_dev_t)
                    lo = clipped_pg_loss(out.log_prob, pl.old, adv_rows[pl.rec.rows[pl.idx]], None, g.clip_low,
                                         g.clip_high, kl, g.kl_coef, g.loss_reduction)
                    mb.backward(lo.loss)
                    nfe, backward = nfe + len(pl) * nfe_row, backward + len(pl)
                    objective[-1] += float(lo.loss.detach()) * mb.share
                    for k, v in stats.items():
                        v.append(as_float(lo.loss if k == "loss" else getattr(lo, k)))
                self.note_step(step.apply(), grad_norms)
        self.adapter.train(False)
        self.ema_update()
        return pg_scalars(self, batches, stats, grad_norms, objective, backward, nfe)

    def note_step(self, st: StepStats, grad_norms: list[float]) -> None:
        """Keep a guarded step's gradient norm; say when it was skipped (a non-finite loss/grad on any rank)."""
        grad_norms.append(st.grad_norm)
        if st.skipped:
            print(f"iteration {self.iteration}: update skipped ({st.reason})")

    def ema_update(self) -> None:
        if self.ema is None:
            return
        d = self.cfg.train.ema_decay
        with torch.no_grad():
            for n, p in self._named_trainable():
                self.ema[n].mul_(d).add_(p.detach(), alpha=1 - d)

    # ---- evaluation ---------------------------------------------------------------------------
    def evaluate(self, tag: str | None = None, step: int = 0) -> float:
        """Mean reward of deterministic (ODE) samples on the fixed evaluation prompts (EMA weights if kept);
        :func:`diffusion_rl.evaluation.evaluate_ode`."""
        return evaluate_ode(self, tag, step)

    # ---- checkpoints (grpo.trainer_base.TrainerBase: save, load, keep_best) -------------------------------------
    @property
    def last_iteration(self) -> dict[str, torch.Tensor] | None:
        """The last iteration's global credit (checkpointed for diagnostics and tests)."""
        if self.last_advantages is None:
            return None
        return {"advantages": self.last_advantages, "rewards": self.last_rewards}

    def state_dict(self) -> dict[str, Any] | None:
        """The trainable (LoRA) weights, optimizer, EMA, strategy state (the stat tracker), sampling generators and
        counters; rank 0's, with the diffusers LoRA file (``__files__``). FSDP: every rank takes part in gathering the
        full trainable weights, optimizer state and EMA."""
        trainable, optim, ema = full_trainable_state(self)
        if not self.dist.is_main:
            return None
        state = {"trainable": trainable, "optimizer": optim, "tracker": self.strategy.state_dict(),
                 "generator": self.gen.get_state(), "data_rng": random_state_to_json(self.rng.getstate()),
                 "iteration": self.iteration, "eval_before": self.eval_before, "best": self.best,
                 "__files__": checkpoint_lora_files(ema if ema is not None else trainable, self.cfg.model,
                                                    self.adapter.pipe)}
        if ema is not None:
            state["ema"] = ema
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_full_trainable_state(self, state)
        self.strategy.load_state_dict(state.get("tracker"))
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
        self.best = state.get("best")

    def after_load(self, state: dict[str, Any]) -> None:
        self.strategy.after_load()

    # ---- the loop -----------------------------------------------------------------------------
    def step(self, phase: Phase = no_phase) -> dict[str, float]:
        """One iteration, rollout -> reward -> credit -> update -> log (this rank's share, global credit); returns its
        scalars (logged on rank 0). ``phase`` labels the progress bar."""
        t0 = time.perf_counter()
        phase("rollout")
        before = (self.rng.getstate(), capture_rng_state())  # restored when the reward server fails (StopRun)
        prompts = self.prompts.sample(self.cfg.train.prompts_per_iter, self.rng)  # identical on every rank
        self.warm_prompts(prompts)
        failed = None
        try:
            ro, out, t_roll = rollout_and_score(self, prompts, phase)
        except RemoteRewardError as e:
            failed = str(e)
        if any_rank(failed is not None):  # every rank stops in the same iteration, nothing of it applied
            self.rng.setstate(before[0])
            restore_rng_state(before[1])
            raise StopRun(failed or "the reward server failed on another rank")
        rewards = out.total.detach().float().cpu()
        components = {k: v.detach().float().cpu() for k, v in (getattr(out, "components", None) or {}).items()} or None
        logps = (torch.cat([r.log_prob for r in ro.records if r.stochastic]) if ro.records
                 else torch.zeros(1, device="cpu"))
        t1 = time.perf_counter()
        t_reward = t1 - t0 - t_roll
        phase("update")
        self.guard.check("reward", rewards)
        self.guard.check("log_prob", logps)
        all_rewards = gather_cpu(rewards)
        self.last_rewards = all_rewards
        self.set_lr(self.iteration)  # train.lr_schedule's value for this iteration's update
        # one rank's NaN skips the update everywhere
        if not agree_on_skip(self.guard, "non-finite reward or log-prob on another rank"):
            adv, keep = self.credit(ro, prompts, rewards, components)
            upd = self.update(ro, prompts, adv, keep, trained_steps(self.cfg, ro, self.iteration))
        else:
            reason = self.guard.end_step()  # raises NonFiniteError after max_nonfinite in a row
            if self.dist.is_main:
                print(f"iteration {self.iteration}: rollout skipped ({reason}); no update applied")
            upd = {"backward": 0, "nfe_train": 0}
        self.iteration += 1
        t_roll_max = all_reduce_floats([t_roll], "max")[0]
        # lowp: the quantized copy's
        nfe_roll, nfe_lowp = all_reduce_floats([ro.nfe, float(ro.extra.get("nfe_pool", 0))])
        backward = upd.pop("backward")
        scalars = {"reward/mean": float(all_rewards.nan_to_num().mean()),
                   "reward/std": float(all_rewards.nan_to_num().std()),
                   "cost/nfe_rollout": nfe_roll, "cost/backward": backward, "cost/nfe_train": upd.pop("nfe_train"),
                   "cost/nfe_policy": nfe_roll - nfe_lowp, "cost/nfe_lowp": nfe_lowp,
                   "cost/gpu_units": projected_gpu_units(self.cfg, nfe_roll - nfe_lowp, nfe_lowp, backward),
                   "time/rollout_s": t_roll_max, "time/reward_s": t_reward, "time/update_s": time.perf_counter() - t1,
                   "time/iter_s": time.perf_counter() - t0,
                   "throughput/rollout_samples_per_s": len(all_rewards) / max(t_roll_max, 1e-9),
                   "skipped_updates": self.guard.total_skipped, **upd}
        self.logger.log(self.iteration, scalars)
        return scalars

    def train(self, progress: bool = True) -> dict[str, Any]:
        """The loop (:func:`grpo.loop.run_loop`); under a launcher every rank runs it. Returns ``{"eval_before",
        "eval_after", "seconds", "last", "stopped"}`` (evaluations are rank 0's; other ranks get NaN, except under FSDP,
        where every rank evaluates because the sharded forward is a collective; ``stopped`` names the signal that
        ended the run)."""
        cfg, main = self.cfg, self.dist.is_main
        latest = resume_latest(self.out / "checkpoints", cfg.resume, self.load)
        self.logger.open()  # after the checkpoint's weights and state passed their checks
        if latest is not None and main:
            print(f"resumed from {latest} at iteration {self.iteration}")
        t0 = time.time()
        note = unarmed_alarm_note(cfg.eval.patience, cfg.train.iterations, cfg.train.eval_every)
        if self.monitors and note and main:
            print(note)
        if self.eval_before is None:  # a fresh run (a resumed one holds rank 0's)
            eval_everywhere(self, BEFORE, 0)
        res = run_loop(self.step, self.iteration, cfg.train.iterations, save=self.save, save_every=cfg.train.save_every,
                       evaluate=lambda i: eval_everywhere(self, None, i), eval_every=cfg.train.eval_every,
                       desc="diffusion-rl", progress=progress,
                       postfix=lambda s: {"reward": f"{s['reward/mean']:.3f}", "nfe": int(s["cost/nfe_rollout"])})
        last, stopped = res.last, res.stopped
        if self.scorer is not None:
            self.scorer.shutdown(wait=True)
            self.scorer = None
        after = eval_everywhere(self, AFTER, self.iteration) if stopped is None else float("nan")
        barrier()  # every rank returns together
        self.logger.close()
        before = self.eval_before if self.eval_before is not None else float("nan")
        return {"eval_before": before, "eval_after": after, "seconds": time.time() - t0, "last": last,
                "stopped": stopped,
                "error": res.error,
                "eval_components_before": self.eval_before_components,
                "eval_components_after": self.last_eval_components}

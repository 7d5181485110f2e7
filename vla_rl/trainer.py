"""TRL-style config + trainer (on :class:`grpo.trainer_base.TrainerBase`): supervised warm-up on a few demos, then
GRPO over environment groups.

    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", ["rl.iterations=10"])
    result = VLARLTrainer(cfg).train()          # SFT -> eval (held-out) -> GRPO(+SRPO) -> eval

One RL iteration (:meth:`VLARLTrainer.step`; the loop around it is :func:`grpo.loop.run_loop`)::

    for each task, rl.groups_per_task initial states s: G = grpo.group_size stochastic episodes from s
    rewards      binary success, or SRPO (success 1, failures graded by latent distance to successes)
    keep         dynamic sampling (DAPO, Yu et al. 2025): a group iff band_low < success_rate < band_high
    advantages   over the kept groups (GRPO mean/std, MC-GRPO or GDPO); an episode's A is shared by all its
                 decision points and their stochastic denoising steps ("tokens")
    update       at lr rl.lr_at(it), inner_epochs x minibatches of decision points: log-probs of the stored chunk
                 records recomputed, ratio r, loss -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) (+ beta KL;
                 grpo.loss: PPO Eq. 7 with DAPO's clip-higher)

Evaluation, devices and the scale-out over processes (global episode list, gathered rewards, weighted minibatches,
FSDP, bf16, rank 0's SFT and evaluation): docs/ARCHITECTURE.md, "The VLA trainer".
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from grpo.checkpoint import (
    capture_rng_state,
    restore_rng_state,
)
from grpo.config import config_to_dict
from grpo.device import check_rank_device, resolve_device
from grpo.distributed import (
    barrier,
    broadcast_module,
    broadcast_object,
    check_in_sync,
    gather_cpu,
    init_distributed,
    keyed_generator,
    shard_range,
)
from grpo.fsdp import full_optimizer_state_dict
from grpo.loop import Phase, StopRun, no_phase, resume_latest, run_loop
from grpo.loss import clipped_pg_loss, reference_kl
from grpo.metrics import MetricsLogger
from grpo.minibatch import Minibatches, local_index, local_minibatches
from grpo.monitors import HackingAlarm, unarmed_alarm_note
from grpo.onpolicy import OnPolicyGap
from grpo.train_step import NonFiniteGuard, as_float
from grpo.trainer_base import TrainerBase
from grpo.update import DistributedUpdate, agree_on_skip
from rewards.srpo import check_state_dims

from .config import VLARLConfig
from .credit import episode_advantages, group_keep_mask
from .episode_rewards import build_episode_reward, episode_rewards, rollout_scalars
from .fsdp_policy import shard_for_rl, sync_replica
from .heldout_eval import eval_everywhere, run_eval
from .policies import TrainablePolicy, make_policy
from .policies.base import load_checkpoint_weights, policy_vocabulary, restore_vocabulary
from .policy import batch_to
from .rollout import (
    EnvPool,
    EpisodeSpec,
    EvalResult,
    RolloutBatch,
    check_episode_split,
    episode_specs,
    global_rows,
    probe_envs,
    run_episodes,
)
from .sft_stage import run_sft_stage
from .trainer_protocol import EvalRecord


class VLARLTrainer(TrainerBase):
    """SFT on a few demos, then GRPO (+SRPO) over environment groups (module docstring)."""

    best_metric = "eval/success_rate"

    def __init__(self, cfg: VLARLConfig, quiet: bool = False):
        # device=cpu on a CUDA machine: gloo, which reduces CPU tensors (the default there, NCCL, cannot)
        self.dist = init_distributed("gloo") if cfg.device == "cpu" else init_distributed()
        ws = self.dist.world_size
        self.device = resolve_device(cfg.device)  # after init_distributed: "auto" / "cuda" is cuda:LOCAL_RANK
        check_rank_device(self.device, cfg.device, ws, self.dist.rank)
        check_episode_split(cfg, ws)
        self.cfg, self.loop = cfg, cfg.rl
        self.quiet = quiet or not self.dist.is_main
        self.last_iteration: dict[str, torch.Tensor] | None = None  # global credit of the last iteration (checkpointed)
        self.out = Path(cfg.output_dir)
        torch.manual_seed(cfg.seed)
        self.pool = EnvPool(cfg.env.kwargs, cfg.env.video_camera)
        self.instructions, sd, ad = self.probe()  # (vla_rl.robot_loop's trainer probes its robot instead)
        if cfg.rl.reward == "srpo":
            check_state_dims(cfg.srpo.state_dims, sd, "the environment's observation state")
        pcfg = copy.deepcopy(cfg.policy)
        pcfg.state_dim = pcfg.state_dim or sd
        pcfg.action_dim = pcfg.action_dim or ad
        if (pcfg.state_dim, pcfg.action_dim) != (sd, ad):
            raise ValueError(f"policy.state_dim/action_dim = {pcfg.state_dim}/{pcfg.action_dim} but the env has "
                             f"{sd}/{ad}")
        start = cfg.sft.base_policy or cfg.sft.init_policy  # a pretrained policy: its weights and vocabulary
        self.policy = make_policy(pcfg, self.instructions.values(), start, self.out).to(self.device)  # policy.kind/type
        # dist.mixed_precision=bf16: every network forward (rollouts, evaluation, SFT, the update, the sharded and
        # reference copies, which deepcopy it) under autocast; weights, AdamW state and log-prob math stay fp32
        self.policy.set_mixed_precision(cfg.dist.mixed_precision)
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=cfg.rl.lr, weight_decay=0.0)
        # dist.strategy=fsdp (more than one process): RL updates a sharded copy (``train_policy``, built by
        # ``shard_for_rl`` at the start of RL); ``policy`` stays a full replica for rollouts, SFT, evaluation and SRPO
        self.fsdp = cfg.dist.strategy == "fsdp" and ws > 1
        self.train_policy: torch.nn.Module = self.policy
        if cfg.dist.strategy == "fsdp" and ws == 1 and not quiet:
            print("dist.strategy=fsdp with one process: nothing to shard, the policy is not wrapped")
        self.guard = NonFiniteGuard(cfg.grpo.max_nonfinite)
        # the reward-hacking alarm (grpo.monitors): the training reward (SRPO progress / binary) rising while the
        # held-out real success falls for eval.patience evaluations
        if cfg.eval.monitors:
            raise ValueError(f"eval.monitors: vla-rl's gold monitor is the held-out real success rate (always on); "
                             f"got {cfg.eval.monitors}, expected []")
        self.alarm, self.rewards_since_eval = HackingAlarm(cfg.eval.patience, cfg.eval.action, cfg.eval.min_delta), []
        # backward passes and steps over the ranks (rebuilt on the sharded copy by ``shard_for_rl``)
        self.upd = DistributedUpdate(self.policy.parameters(), self.optimizer, self.guard, cfg.grpo.max_grad_norm,
                                     self.fsdp, self.dist)
        self.reference: TrainablePolicy | None = None
        # rl.reward: SRPO's encoder on the device, or a reward server checked before the first expensive step
        self.srpo, self.remote = build_episode_reward(cfg, self.policy, self.device)
        self.logger: MetricsLogger | None = None
        # the progress a checkpoint keeps (its ``trainer`` entry: :meth:`progress`)
        self.iteration = 0  # RL iterations done
        self.sft_done = False  # SFT ran, or was skipped for good (sft.init_policy, sft.steps=0): not rerun on resume
        self.sft_record: dict[str, Any] | None = None  # the SFT's {"demos", "demo_steps", "final_loss", "seconds"}
        self.evals: dict[str, EvalRecord] = {}  # tag ("sft", "iter_<i>", "final") -> its held-out evaluation
        self.best: dict[str, Any] | None = None  # {"metric", "value", "iteration", "mode"} of checkpoints/best
        self.eval_seeds = cfg.rl.heldout_seeds()  # the rl.eval_split split's states (validation or test)

    def probe(self) -> tuple[dict[str, str], int, int]:
        """The tasks' instructions, state dim and action dim (:func:`probe_envs` on ``env.tasks``)."""
        return probe_envs(self.pool, self.cfg.env.tasks)

    def report(self, *a) -> None:
        """One line to the console through tqdm (a progress bar stays intact); nothing when ``quiet`` (ranks > 0)."""
        if not self.quiet:
            tqdm.write(" ".join(str(x) for x in a))

    # ---- checkpoints (grpo.trainer_base.TrainerBase: save, load, keep_best) -------------------------------------
    def progress(self) -> dict[str, Any]:
        """The checkpoint's ``trainer`` entry: ``{"iteration", "sft_done", "eval"}``, ``"sft"`` once SFT ran and
        ``"best"`` once a best checkpoint was kept."""
        out: dict[str, Any] = {"iteration": self.iteration, "sft_done": self.sft_done, "eval": self.evals}
        out.update({k: v for k, v in (("sft", self.sft_record), ("best", self.best)) if v is not None})
        return out

    def restore_progress(self, trainer: dict[str, Any]) -> None:
        """Restore :meth:`progress` from a checkpoint's ``trainer`` entry."""
        self.iteration, self.sft_done = int(trainer["iteration"]), bool(trainer["sft_done"])
        self.evals, self.sft_record, self.best = trainer["eval"], trainer.get("sft"), trainer.get("best")

    def state_dict(self) -> dict[str, Any] | None:
        """The policy's weights, vocabulary and config, the optimizer and :meth:`progress`; rank 0's. FSDP: the
        optimizer state is gathered FULL (a collective; the unsharded ``state_dict()`` format); the weights are the
        full replica's, equal to the shards (``sync_replica`` after every update)."""
        sharded = self.train_policy is not self.policy
        optim = full_optimizer_state_dict(self.train_policy, self.optimizer) if sharded else None
        if not self.dist.is_main:
            return None
        st = {"model": self.policy.state_dict(), "optimizer": optim if sharded else self.optimizer.state_dict(),
              "trainer": self.progress(), "vocab": policy_vocabulary(self.policy),
              "policy_config": config_to_dict(self.policy.cfg)}
        srpo_state = self.srpo.state_dict() if self.srpo is not None else {}
        if srpo_state:  # srpo.reference=predicted: its success memory and frozen scene encoder
            st["srpo"] = srpo_state
        return st

    def maybe_resume(self) -> bool:
        """Load the latest checkpoint of ``output_dir`` when ``resume`` is on; whether one was loaded."""
        return resume_latest(self.ckpt_dir, self.cfg.resume, self.load) is not None

    def load_state_dict(self, st: dict[str, Any]) -> None:
        # load_state_dict copies the weights and the optimizer state onto the policy's device: a run resumes anywhere
        restore_vocabulary(self.policy, st.get("vocab"))
        load_checkpoint_weights(self.policy, st["model"], st.get("__path__"))
        self.optimizer.load_state_dict(st["optimizer"])  # full state; ``shard_for_rl`` shards it under FSDP
        self.restore_progress(st["trainer"])
        if self.srpo is not None:
            self.srpo.load_state_dict(st.get("srpo", {}))
        before = st["config"].get("rl", {})
        if self.cfg.rl.lr_schedule != "constant" and before.get("iterations") != self.cfg.rl.iterations:
            self.report(f"note: rl.iterations {before.get('iterations')} -> {self.cfg.rl.iterations} on resume: the "
                        f"{self.cfg.rl.lr_schedule} lr schedule now decays over {self.cfg.rl.iterations} iterations")
        self.report(f"resumed from {st.get('__path__')} (iteration {self.iteration}, sft_done={self.sft_done})")

    # ---- stages --------------------------------------------------------------------------------
    def run_sft(self) -> None:
        """SFT on the demos (:func:`vla_rl.sft_stage.run_sft_stage`)."""
        run_sft_stage(self)

    def run_eval(self, tag: str, step: int, videos: bool = True) -> EvalResult:
        """Evaluate on the held-out states (:func:`vla_rl.heldout_eval.run_eval`; rank 0)."""
        return run_eval(self, tag, step, videos)

    def make_specs(self, it: int) -> list[EpisodeSpec]:
        """Iteration ``it``'s global episode list (:func:`vla_rl.rollout.episode_specs`)."""
        return episode_specs(self.cfg, it)

    def rewards(self, batch: RolloutBatch, specs: list[EpisodeSpec] | None = None):
        """The reward of every episode of the *global* batch ``specs`` (``RewardOutput``, ``[E]``), identical on every
        rank; ``batch`` holds this rank's episodes (with ``specs=None``: the whole batch, one process);
        :func:`vla_rl.episode_rewards.episode_rewards`."""
        return episode_rewards(self, batch, specs)

    def update(self, batch: RolloutBatch, adv: torch.Tensor, keep: torch.Tensor, it: int,
               first_episode: int = 0) -> dict[str, float]:
        """Clipped PG over the decision points of kept episodes (module docstring; processes: docs/ARCHITECTURE.md).

        ``adv[E]``, ``keep[E]`` (bool): global per-episode advantages and keep mask; ``batch`` holds this rank's
        episodes, the first being global episode ``first_episode``."""
        g, cfg = self.cfg.grpo, self.cfg.rl
        gid, ep_of_global = global_rows(batch, first_episode)
        local_of = local_index(gid, ep_of_global.numel())
        row_adv = adv[ep_of_global]  # [M_global]
        rows = torch.nonzero(keep[ep_of_global]).flatten()
        if rows.numel() == 0 or (g.kl_coef == 0 and not bool((row_adv[rows] != 0).any())):
            # no row carries signal: skip the update (an optimizer step on zero gradients still moves Adam's momentum)
            return {"loss/rows": 0.0}
        mask = batch.step_mask.bool()
        gen = keyed_generator(self.cfg.seed, it, 99)
        model = self.train_policy  # the FSDP-sharded copy under dist.strategy=fsdp, else the policy
        model.zero_grad(set_to_none=True)  # SFT's last gradients must not leak into the first RL step
        model.train()
        # each micro-batch's loss is weighted by its share of the global minibatch's denominator (tokens or samples);
        # the diagnostics by its share of the global minibatch's tokens
        batches = Minibatches(self.upd, lambda m: (self._loss_den(mask[m]), float(mask[m].sum())),
                              lambda m: self._minibatch_loss(batch, m.new_zeros(1), row_adv[gid[:1]]).loss)
        stats: dict[str, list[float]] = {k: [] for k in ("loss", "clip_frac", "approx_kl", "ratio", "kl", "grad_norm")}
        for epoch in range(cfg.inner_epochs):
            perm = rows[torch.randperm(rows.numel(), generator=gen, device="cpu")]  # the same on every rank
            # one step per minibatch: rl.grad_accum micro-batches of this rank's rows, one backward each
            for step in batches.steps(local_minibatches(perm, cfg.minibatch_size, local_of, cfg.grad_accum), epoch):
                diag = [0.0] * 5  # the minibatch's loss and token-weighted clip_frac, approx_kl, ratio, kl
                for micro in step:
                    out = self._minibatch_loss(batch, micro.item, row_adv[gid[micro.item]],
                                               batches.onpolicy if micro.first else None)
                    micro.backward(out.loss)
                    w = micro.weights[1] / max(micro.totals[1], 1.0)
                    diag = [a + b for a, b in zip(diag, [float(out.loss.detach()) * micro.share] + [
                        as_float(v) * w for v in (out.clip_frac, out.approx_kl, out.ratio_mean, out.kl)])]
                diag = batches.sum_over_ranks(diag) + [step.apply().grad_norm]
                for k, v in zip(stats, diag):
                    stats[k].append(float(v))
        model.eval()
        sync_replica(self)
        onp_scal = batches.check_onpolicy(cfg.onpolicy_tol, cfg.onpolicy_action, it + 1, "rl.onpolicy_tol")
        return {**{f"loss/{k}": float(np.mean(v)) for k, v in stats.items() if v}, "loss/rows": float(rows.numel()),
                **onp_scal}

    def _loss_den(self, mask: torch.Tensor) -> float:
        """The loss denominator of decision points with step mask ``mask [m, S]``: tokens or samples
        (``grpo.loss_reduction``)."""
        return float(mask.sum()) if self.cfg.grpo.loss_reduction == "token_mean" else float(mask.any(1).sum())

    def _minibatch_loss(self, batch: RolloutBatch, mb: torch.Tensor, adv: torch.Tensor, onp: OnPolicyGap | None = None):
        """``clipped_pg_loss`` (+ KL) over this rank's decision points ``mb`` (local row indices), advantages
        ``adv[|mb|]``; the CPU rollout rows are moved to the policy's device here. ``onp``: also compare the
        recomputed log-probs with the rollout's (the on-policy self-check, before the first optimizer step)."""
        g, dev = self.cfg.grpo, self.device
        obs = batch_to(batch.select(mb), dev)
        rec = {k: v[mb].to(dev) for k, v in batch.record.items()}
        lp = self.train_policy.chunk_log_prob(obs, rec)
        if onp is not None:
            onp.add(lp.logp, batch.old_logp[mb], batch.step_mask[mb])
        kl = None
        if g.kl_coef > 0 and self.reference is not None:
            with torch.no_grad():
                ref = self.reference.chunk_log_prob(obs, rec)
            kl = reference_kl(g.kl_type, lp.logp, ref.logp, lp.mean, ref.mean, lp.std, lp.std_dev_t)
        return clipped_pg_loss(lp.logp, batch.old_logp[mb].to(dev), adv.to(dev), batch.step_mask[mb].to(dev),
                               g.clip_low, g.clip_high, kl, g.kl_coef, g.loss_reduction)

    # ---- main ----------------------------------------------------------------------------------
    def rollout(self, it: int) -> tuple[list[EpisodeSpec], range, RolloutBatch]:
        """Iteration ``it``'s global episode list, this rank's share ``[start, stop)`` of it, and its rollout."""
        specs = self.make_specs(it)
        mine = shard_range(len(specs), self.dist)
        batch = run_episodes(self.policy, self.pool, specs[mine.start:mine.stop], self.cfg.env.max_episode_steps,
                             stochastic=True, noise_key=(self.cfg.seed, it),
                             stop_on_success=self.cfg.env.stop_on_success)
        return specs, mine, batch

    def step(self, phase: Phase = no_phase) -> dict[str, float]:
        """One RL iteration (module docstring): rollout -> reward -> dynamic sampling + advantages -> update -> log;
        returns its scalars (logged on rank 0). ``phase`` labels the progress bar."""
        cfg, it = self.cfg, self.iteration
        t0 = time.time()
        phase("rollout")
        before = capture_rng_state()
        specs, mine, batch = self.rollout(it)
        t_roll = time.time() - t0
        phase("reward")
        try:
            rew = self.rewards(batch, specs)  # global [E], identical on every rank
        except StopRun:  # a reward server stayed down: nothing of this iteration is applied (the loop saves)
            restore_rng_state(before)
            raise
        t_rew = time.time() - t0 - t_roll
        gids = torch.tensor([s.group_id for s in specs], dtype=torch.long, device="cpu")
        succ = gather_cpu(batch.success)
        keep, kept = (group_keep_mask(succ, gids, cfg.rl.success_band) if cfg.rl.dynamic_sampling
                      else (torch.ones_like(succ), int(gids.unique().numel())))
        scal = rollout_scalars(self, batch, specs, rew, succ, kept, t_roll, t_rew)
        if not self._finite(rew, batch):  # the update is skipped (logged) on every rank
            self.report(f"iteration {it + 1}: update skipped ({self.guard.end_step()}); no update applied")
            kept = 0
        scal["skipped_updates"] = self.guard.total_skipped
        adv = torch.zeros(len(specs), device="cpu")
        scal["rl/lr"] = self.set_lr(it)  # rl.lr_schedule's value for this iteration's update
        if kept > 0:
            adv, keep = self.advantages(rew, gids, keep)
            phase("update")
            t_up = time.time()
            scal.update(self.update(batch, adv, keep, it, mine.start))
            scal["time/update_s"] = time.time() - t_up
        self.last_iteration = {"rewards": rew.total.clone(), "advantages": adv,
                               "keep": (keep & (kept > 0)).to(torch.uint8), "success": succ.to(torch.uint8)}
        scal["time/iteration_s"] = time.time() - t0
        self.rewards_since_eval.append(scal["reward/mean"])
        self.iteration = it + 1
        if self.logger is not None:
            self.logger.log(it + 1, scal)
        return scal

    def _finite(self, rew, batch: RolloutBatch) -> bool:
        """Whether the update may run: a NaN/inf reward (component) or stored log-prob on any rank skips it (the
        rewards are global; :class:`grpo.train_step.NonFiniteGuard` aborts after ``grpo.max_nonfinite`` in a row)."""
        self.guard.check("reward", rew.total)
        for name, comp in rew.components.items():
            self.guard.check(f"reward component {name!r}", comp)
        self.guard.check("rollout log-prob", batch.old_logp)
        return not agree_on_skip(self.guard, "non-finite rollout log-prob on another rank")

    def advantages(self, rew, gids: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(adv [E], keep [E])`` over the kept groups (:func:`vla_rl.credit.episode_advantages`)."""
        return episode_advantages(self.cfg.grpo, rew, gids, keep)

    def _postfix(self, scal: dict[str, float]) -> dict[str, Any]:
        last_eval = max(self.evals.values(), key=lambda e: e["iteration"])["success_rate"]
        return {"succ": f"{scal['rollout/success_rate']:.2f}", "kept": scal["rollout/groups_kept"],
                "eval": f"{last_eval:.2f}", "t": f"{scal['time/iteration_s']:.1f}s"}

    def train(self) -> dict[str, Any]:
        cfg, main = self.cfg, self.dist.is_main
        t_start = time.time()
        resumed = self.maybe_resume()  # first: a checkpoint refused (its weights, its state) leaves no log files
        self.logger = MetricsLogger(self.out, enabled=main, config=config_to_dict(cfg), log=cfg.log, resume=cfg.resume)
        if not self.sft_done:
            if cfg.sft.init_policy:
                self.sft_done = True
                self.report(f"initialized the policy from {cfg.sft.init_policy}; SFT skipped")
            elif cfg.sft.steps > 0:
                if main:  # rank 0 collects the demos (one file) and trains; the weights are broadcast
                    self.run_sft()
                broadcast_module(self.policy)
                self.sft_done, self.sft_record = broadcast_object((self.sft_done, self.sft_record))
            else:
                self.sft_done = True
            self.save()
        if "sft" not in self.evals:
            self.report(cfg.rl.split_line())  # which held-out states every evaluation below uses
            eval_everywhere(self, "sft", 0)
            self.save()
        if cfg.grpo.kl_coef > 0:
            self.reference = copy.deepcopy(self.policy).requires_grad_(False)
        shard_for_rl(self)  # after SFT (rank 0, broadcast) and any resume: the RL copy is sharded under FSDP
        check_in_sync(self.policy, "at the start of RL")
        note = unarmed_alarm_note(cfg.eval.patience, cfg.rl.iterations, cfg.rl.eval_every, "rl", before=False)
        if note and self.iteration < cfg.rl.iterations:  # (the alarm watches the held-out success: always on)
            self.report(note.replace("the monitors are still logged", "monitor/success_rate is still logged"))
        res = run_loop(self.step, self.iteration, cfg.rl.iterations, save=self.save,
                       save_every=cfg.rl.save_every, save_last=False,  # (the final save follows the final evaluation)
                       evaluate=lambda i: eval_everywhere(self, f"iter_{i}", i, videos=False),
                       eval_every=cfg.rl.eval_every, desc="grpo", progress=not self.quiet, postfix=self._postfix)
        stopped = res.stopped
        if res.error is not None:  # a reward server stayed down: the checkpoint is saved, a rerun resumes
            barrier()
            self.logger.close()
            return {"iterations": self.iteration, "stopped": stopped, "error": res.error,
                    "policy": self.policy, "world_size": self.dist.world_size}
        check_in_sync(self.policy, f"after RL iteration {self.iteration}")
        if stopped is None and self.evals.get("final", {}).get("iteration") != self.iteration:
            eval_everywhere(self, "final", cfg.rl.iterations)
        self.save()
        if main:
            self.policy.save_pretrained(self.out / "policy")
        barrier()
        self.logger.close()
        ev = self.evals
        summary = {"sft_success": ev["sft"]["success_rate"], "final_success": ev.get("final", {}).get("success_rate"),
                   "iterations": self.iteration, "wall_s": round(time.time() - t_start, 1), "resumed": resumed,
                   "stopped": stopped, "policy": self.policy, "world_size": self.dist.world_size,
                   "eval_split": cfg.rl.eval_split, "eval_states": self.eval_seeds[0]}
        final_success = summary["final_success"]
        self.report(f"held-out success ({cfg.rl.split_line()}): after SFT {summary['sft_success']:.3f} -> after GRPO "
                    f"{final_success if final_success is None else round(final_success, 3)} "
                    f"({summary['wall_s']}s this run, {self.dist.world_size} process(es)); outputs in "
                    f"{self.out.resolve()}")
        return summary

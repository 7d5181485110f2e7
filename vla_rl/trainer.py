"""TRL-style config + trainer: supervised warm-up on a few demos, then GRPO over environment groups.

    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", ["rl.iterations=10"])
    result = VLARLTrainer(cfg).train()          # SFT -> eval (held-out) -> GRPO(+SRPO) -> eval

One RL iteration::

    for each task, rl.groups_per_task initial states s (fresh, from the training seed range):
        G = grpo.group_size episodes from s, stochastic policy (SDE steps / Gaussian noise), chunked actions
    rewards:     binary success, or SRPO (success 1, failures graded by latent distance to successes)
    dynamic sampling (DAPO, Yu et al. 2025): keep a group iff  band_low < success_rate < band_high
    advantages:  grpo.train_step.compute_advantages over the kept groups (GRPO mean/std, MC-GRPO, or GDPO
                 over the reward components)
    update:      inner_epochs x minibatches of decision points: recompute log-probs of the stored chunk
                 records, grpo.loss.clipped_pg_loss (asymmetric clip), no KL by default

The episode's advantage is shared by all its decision points and all their stochastic denoising steps
("tokens"). Evaluation runs the deterministic policy (ODE / Gaussian mean) on held-out initial states
(``rl.eval_seed_offset + i``; training states are drawn below ``rl.train_seed_range``, demo states from
``sft.demo_seed_offset``) and reports success rate and mean episode length.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from grpo.checkpoint import capture_rng_state, latest_checkpoint, load_checkpoint, restore_rng_state, save_checkpoint
from grpo.config import check_resume_config, config_to_dict
from grpo.distributed import keyed_generator, launched_world_size
from grpo.loss import clipped_pg_loss, flow_kl, k3_kl
from grpo.metrics import MetricsLogger
from grpo.signals import GracefulExit
from grpo.train_step import GRPOConfig, NonFiniteGuard, backward_if_finite, compute_advantages, guarded_step

from .policy import PolicyConfig, SmallVLA
from .rollout import EnvPool, EpisodeSpec, EvalResult, RolloutBatch, evaluate, run_episodes, tile_videos
from .sft import SFTConfig, train_sft
from .srpo import SRPOConfig, SRPOReward, binary_reward
from .tokenizer import WordTokenizer


@dataclass
class EnvConfig:
    tasks: list[str] = field(default_factory=lambda: ["tabletop/reach"])
    max_episode_steps: int = 60
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed to sims.make
    video_camera: str = "agentview"
    stop_on_success: bool = True

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("env.tasks is empty")
        if self.max_episode_steps < 1:
            raise ValueError(f"env.max_episode_steps must be >= 1, got {self.max_episode_steps}")


@dataclass
class RLConfig:
    iterations: int = 30
    groups_per_task: int = 4  # initial states per task per iteration
    lr: float = 3e-4
    inner_epochs: int = 2
    minibatch_size: int = 256  # decision points per optimizer step
    reward: Literal["binary", "srpo"] = "srpo"
    dynamic_sampling: bool = True
    success_band: tuple[float, float] = (0.0, 1.0)  # keep a group iff low < success rate < high
    train_seed_range: int = 100_000
    train_seeds: list[int] = field(default_factory=list)  # fixed training initial states (cycled); empty: draw below train_seed_range
    eval_seed_offset: int = 1_000_000
    eval_episodes: int = 32  # held-out initial states per task
    eval_every: int = 10
    num_videos: int = 4
    save_every: int = 5
    keep_last: int = 2

    def __post_init__(self) -> None:
        lo, hi = self.success_band
        if not lo < hi:
            raise ValueError(f"rl.success_band must be (low, high) with low < high, got {self.success_band}")
        if self.iterations < 0 or self.groups_per_task < 1 or self.inner_epochs < 1 or self.minibatch_size < 1:
            raise ValueError("rl.iterations >= 0, groups_per_task >= 1, inner_epochs >= 1, minibatch_size >= 1 required")


@dataclass
class VLARLConfig:
    seed: int = 0
    output_dir: str = "runs/vla_rl"
    resume: bool = True
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    srpo: SRPOConfig = field(default_factory=SRPOConfig)
    grpo: GRPOConfig = field(default_factory=lambda: GRPOConfig(group_size=8, clip_low=0.2, clip_high=0.28, adv_clip=None))


def cost_per_iteration(cfg: VLARLConfig) -> dict[str, int]:
    """Upper bounds per RL iteration: env steps, policy calls, NFE (network evaluations), backward passes."""
    episodes = len(cfg.env.tasks) * cfg.rl.groups_per_task * cfg.grpo.group_size
    calls = episodes * math.ceil(cfg.env.max_episode_steps / cfg.policy.n_action_steps)
    per_call = cfg.policy.flow.num_steps if cfg.policy.head == "flow" else 1
    return {"episodes": episodes, "env_steps": episodes * cfg.env.max_episode_steps, "policy_calls": calls,
            "nfe_rollout": calls * per_call, "nfe_update": cfg.rl.inner_epochs * calls * per_call,
            "backward_passes": cfg.rl.inner_epochs * math.ceil(calls / cfg.rl.minibatch_size)}


def group_keep_mask(success: torch.Tensor, group_ids: torch.Tensor, band: tuple[float, float]) -> tuple[torch.Tensor, int]:
    """Dynamic sampling: ``[N]`` bool, True for episodes whose group's success rate lies strictly inside ``band``;
    returns ``(mask, number of kept groups)``. The default band (0, 1) drops all-fail and all-success groups."""
    keep = torch.zeros_like(success, dtype=torch.bool)
    kept = 0
    for g in torch.unique(group_ids):
        m = group_ids == g
        rate = float(success[m].float().mean())
        if band[0] < rate < band[1]:
            keep |= m
            kept += 1
    return keep, kept


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Rank correlation of two ``[N]`` tensors (average ranks for ties); 0 when either is constant."""
    from scipy.stats import spearmanr

    if a.unique().numel() < 2 or b.unique().numel() < 2:
        return 0.0
    return float(spearmanr(a.numpy(), b.numpy()).statistic)


def probe_envs(pool: EnvPool, tasks: list[str]) -> tuple[dict[str, str], int, int]:
    """Reset one env per task: instructions, state dim, action dim."""
    instructions, dims = {}, set()
    for name in tasks:
        env = pool.get(name, 1)[0]
        obs, _ = env.reset(seed=0, options={"init_seed": 0})
        instructions[name] = obs["instruction"]
        dims.add((int(np.asarray(obs["state"]).shape[-1]), int(env.action_space.shape[0])))
    if len(dims) != 1:
        raise ValueError(f"tasks {tasks} have different (state_dim, action_dim): {sorted(dims)}; train them separately")
    state_dim, action_dim = dims.pop()
    return instructions, state_dim, action_dim


class VLARLTrainer:
    def __init__(self, cfg: VLARLConfig, quiet: bool = False):
        world = launched_world_size()
        if world > 1:  # every rank would run the whole job and write the same checkpoints: refuse, say why
            raise RuntimeError(f"vla-rl runs as one process (launched with WORLD_SIZE={world}): rank-sharded rollouts "
                               "are not implemented yet; run `vla-rl train ...` without torchrun/accelerate")
        self.cfg = cfg
        self.quiet = quiet
        self.out = Path(cfg.output_dir)
        self.ckpt_dir = self.out / "checkpoints"
        torch.manual_seed(cfg.seed)
        self.pool = EnvPool(cfg.env.kwargs, cfg.env.video_camera)
        self.instructions, sd, ad = probe_envs(self.pool, cfg.env.tasks)
        pcfg = copy.deepcopy(cfg.policy)
        pcfg.state_dim = pcfg.state_dim or sd
        pcfg.action_dim = pcfg.action_dim or ad
        if (pcfg.state_dim, pcfg.action_dim) != (sd, ad):
            raise ValueError(f"policy.state_dim/action_dim = {pcfg.state_dim}/{pcfg.action_dim} but the env has {sd}/{ad}")
        self.policy = SmallVLA(pcfg, WordTokenizer.build(self.instructions.values()))
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=cfg.rl.lr, weight_decay=0.0)
        self.guard = NonFiniteGuard(cfg.grpo.max_nonfinite)
        self.reference: SmallVLA | None = None
        self.logger: MetricsLogger | None = None
        self.state: dict[str, Any] = {"iteration": 0, "sft_done": False, "eval": {}}
        self.eval_seeds = [cfg.rl.eval_seed_offset + i for i in range(cfg.rl.eval_episodes)]

    # ---- bookkeeping ---------------------------------------------------------------------------
    def _print(self, *a) -> None:
        if not self.quiet:
            tqdm.write(" ".join(str(x) for x in a))

    def save(self) -> Path:
        return save_checkpoint(self.ckpt_dir, int(self.state["iteration"]), {
            "model": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(), "guard": self.guard.state_dict(),
            "rng": capture_rng_state(), "trainer": self.state, "vocab": self.policy.tokenizer.vocab,
            "policy_config": config_to_dict(self.policy.cfg), "config": config_to_dict(self.cfg),
        }, keep_last=self.cfg.rl.keep_last)

    def maybe_resume(self) -> bool:
        latest = latest_checkpoint(self.ckpt_dir) if self.cfg.resume else None
        if latest is None:
            return False
        st = load_checkpoint(latest)
        check_resume_config(st["config"], self.cfg, str(latest),
                            ignore=("rl.iterations", "resume", "rl.eval_every", "rl.save_every", "rl.num_videos"))
        self.policy.tokenizer = WordTokenizer(st["vocab"])
        self.policy.load_state_dict(st["model"])
        self.optimizer.load_state_dict(st["optimizer"])
        self.guard.load_state_dict(st["guard"])
        restore_rng_state(st["rng"])
        self.state = st["trainer"]
        self._print(f"resumed from {latest} (iteration {self.state['iteration']}, sft_done={self.state['sft_done']})")
        return True

    # ---- stages --------------------------------------------------------------------------------
    def load_demos(self):
        from .demos import collect_demos, load_demo_file

        if self.cfg.sft.demo_path:
            return load_demo_file(self.cfg.sft.demo_path, self.cfg.policy.cameras, self.cfg.sft.demos_per_task)
        path = self.out / "demos.hdf5"
        return collect_demos(self.cfg.env.tasks, self.cfg.sft.demos_per_task, path, self.cfg.env.kwargs,
                             self.cfg.policy.cameras, self.cfg.sft.demo_seed_offset, self.cfg.env.max_episode_steps)

    def run_sft(self) -> None:
        t0 = time.time()
        demos = self.load_demos()
        bar = tqdm(total=self.cfg.sft.steps, desc="sft", disable=self.quiet, leave=False)

        def prog(step: int, loss: float) -> None:
            bar.update(1)
            if (step + 1) % self.cfg.sft.log_every == 0:
                bar.set_postfix(loss=f"{loss:.4f}")
                if self.logger:
                    self.logger.log(step + 1, {"sft/loss": loss})

        losses = train_sft(self.policy, demos, self.cfg.sft, self.cfg.seed, prog)
        bar.close()
        self.state["sft_done"] = True
        self.state["sft"] = {"demos": len(demos), "demo_steps": int(sum(len(d.actions) for d in demos)),
                             "final_loss": float(np.mean(losses[-50:])) if losses else float("nan"),
                             "seconds": round(time.time() - t0, 1)}
        self._print(f"sft: {len(demos)} demos, {self.state['sft']['demo_steps']} steps, "
                    f"loss {self.state['sft']['final_loss']:.4f}, {self.state['sft']['seconds']}s")

    def run_eval(self, tag: str, step: int, videos: bool = True) -> EvalResult:
        t0 = time.time()
        res = evaluate(self.policy, self.pool, self.cfg.env.tasks, self.eval_seeds, self.cfg.env.max_episode_steps,
                       record_frames=videos and self.cfg.rl.num_videos > 0)
        self.state["eval"][tag] = {"iteration": int(self.state["iteration"]), "success_rate": res.success_rate, "mean_length": res.mean_length,
                                   "per_task": res.per_task, "episodes": len(res.episodes)}
        if self.logger:
            scal = {"eval/success_rate": res.success_rate, "eval/episode_length": res.mean_length}
            scal.update({f"eval/success_rate/{k}": v for k, v in res.per_task.items()})
            self.logger.log(step, scal)
            if videos and self.cfg.rl.num_videos > 0:
                picks = res.episodes[: self.cfg.rl.num_videos]
                self.logger.log_video(step, f"rollouts/{tag}", tile_videos([e.frames for e in picks]), fps=15)
        self._print(f"eval[{tag}] success {res.success_rate:.3f} ({len(res.episodes)} held-out episodes), "
                    f"mean length {res.mean_length:.1f}, {time.time() - t0:.1f}s")
        return res

    def make_specs(self, it: int) -> list[EpisodeSpec]:
        rng = np.random.default_rng([self.cfg.seed, it, 7])
        specs, gid = [], 0
        for name in self.cfg.env.tasks:
            fixed, n = self.cfg.rl.train_seeds, self.cfg.rl.groups_per_task
            seeds = ([fixed[(it * n + j) % len(fixed)] for j in range(n)] if fixed
                     else rng.choice(self.cfg.rl.train_seed_range, n, replace=False))
            for s in seeds:
                for _ in range(self.cfg.grpo.group_size):
                    specs.append(EpisodeSpec(name, int(s), gid, int(rng.integers(2**31))))
                gid += 1
        return specs

    def rewards(self, batch: RolloutBatch):
        tasks = [e.spec.env_name for e in batch.episodes]
        videos = [np.stack(e.frames) for e in batch.episodes]
        if self.cfg.rl.reward == "srpo":
            return self.srpo(videos, tasks, batch.success, batch.group_ids.tolist())
        return binary_reward(videos, tasks, batch.success)

    def update(self, batch: RolloutBatch, adv: torch.Tensor, keep: torch.Tensor, it: int) -> dict[str, float]:
        """Clipped PG over the decision points of kept episodes (module docstring)."""
        g, cfg = self.cfg.grpo, self.cfg.rl
        row_adv = adv[batch.episode_of]
        rows = torch.nonzero(keep[batch.episode_of]).flatten()
        if rows.numel() == 0 or (g.kl_coef == 0 and not bool((row_adv[rows] != 0).any())):
            # no row carries signal: skip the update (an optimizer step on zero gradients still moves Adam's momentum)
            return {"loss/rows": 0.0}
        gen = keyed_generator(self.cfg.seed, it, 99)
        stats: dict[str, list[float]] = {k: [] for k in ("loss", "clip_frac", "approx_kl", "ratio", "grad_norm", "kl")}
        self.policy.train()
        for _ in range(cfg.inner_epochs):
            perm = rows[torch.randperm(rows.numel(), generator=gen)]
            for mb in perm.split(cfg.minibatch_size):
                obs = batch.select(mb)
                rec = {k: v[mb] for k, v in batch.record.items()}
                lp = self.policy.chunk_log_prob(obs, rec)
                kl = None
                if g.kl_coef > 0 and self.reference is not None:
                    with torch.no_grad():
                        ref = self.reference.chunk_log_prob(obs, rec)
                    if g.kl_type == "flow" and self.policy.cfg.head == "flow":
                        s = lp.logp.shape
                        kl = flow_kl(lp.mean.flatten(0, 1), ref.mean.flatten(0, 1), lp.std.flatten(0, 1)).reshape(s)
                    else:
                        kl = k3_kl(lp.logp, ref.logp)
                out = clipped_pg_loss(lp.logp, batch.old_logp[mb], row_adv[mb], batch.step_mask[mb], g.clip_low,
                                      g.clip_high, kl, g.kl_coef, g.loss_reduction)
                backward_if_finite(out.loss, self.guard)
                st = guarded_step(self.policy.parameters(), self.optimizer, g.max_grad_norm, self.guard)
                for k, v in (("loss", out.loss), ("clip_frac", out.clip_frac), ("approx_kl", out.approx_kl),
                             ("ratio", out.ratio_mean), ("grad_norm", st.grad_norm), ("kl", out.kl)):
                    stats[k].append(float(v.detach()) if isinstance(v, torch.Tensor) else float(v))
        self.policy.eval()
        return {**{f"loss/{k}": float(np.mean(v)) for k, v in stats.items() if v}, "loss/rows": float(rows.numel())}

    # ---- main ----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        cfg = self.cfg
        t_start = time.time()
        self.logger = MetricsLogger(self.out, config=config_to_dict(cfg))
        resumed = self.maybe_resume()
        if not self.state["sft_done"]:
            if cfg.sft.init_policy:
                self.policy.load_state_dict(SmallVLA.from_pretrained(cfg.sft.init_policy).state_dict())
                self.state["sft_done"] = True
                self._print(f"initialized the policy from {cfg.sft.init_policy}; SFT skipped")
            elif cfg.sft.steps > 0:
                self.run_sft()
            else:
                self.state["sft_done"] = True
            self.save()
        if "sft" not in self.state["eval"]:
            self.run_eval("sft", 0)
            self.save()
        self.srpo = SRPOReward(cfg.srpo, policy=self.policy) if cfg.rl.reward == "srpo" else None
        if cfg.grpo.kl_coef > 0:
            self.reference = copy.deepcopy(self.policy).requires_grad_(False)
        start = int(self.state["iteration"])
        bar = tqdm(range(start, cfg.rl.iterations), initial=start, total=cfg.rl.iterations, desc="grpo", disable=self.quiet)
        stopped = None
        with GracefulExit() as stop:
            for it in bar:
                t0 = time.time()
                bar.set_description("grpo[rollout]")
                batch = run_episodes(self.policy, self.pool, self.make_specs(it), cfg.env.max_episode_steps, stochastic=True,
                                     generator=keyed_generator(cfg.seed, it), stop_on_success=cfg.env.stop_on_success)
                t_roll = time.time() - t0
                bar.set_description("grpo[reward]")
                rew = self.rewards(batch)
                t_rew = time.time() - t0 - t_roll
                gids, succ = batch.group_ids, batch.success
                keep, kept = (group_keep_mask(succ, gids, cfg.rl.success_band) if cfg.rl.dynamic_sampling
                              else (torch.ones_like(succ), int(gids.unique().numel())))
                scal: dict[str, float] = {
                    "rollout/success_rate": float(succ.float().mean()), "reward/mean": float(rew.total.nan_to_num().mean()),
                    "rollout/episode_length": float(np.mean([e.length for e in batch.episodes])),
                    "rollout/groups_kept": kept, "rollout/env_steps": batch.env_steps, "time/rollout_s": t_roll,
                    "time/reward_s": t_rew,
                }
                if self.srpo is not None and self.srpo.last is not None:
                    fail = ~succ
                    if fail.any():
                        scal["reward/srpo_failure_mean"] = float(rew.total[fail].mean())
                    if int(fail.sum()) >= 3:  # diagnostic only: does SRPO's latent progress agree with the env's?
                        env_prog = torch.tensor([e.progress for e in batch.episodes])[fail]
                        scal["reward/srpo_vs_env_progress_spearman"] = spearman(rew.total[fail], env_prog)
                # a NaN/inf reward or stored log-prob skips this iteration's update (logged), never reaches the
                # advantages; grpo.train_step.NonFiniteGuard aborts after grpo.max_nonfinite skips in a row
                finite = self.guard.check("reward", rew.total) & self.guard.check("rollout log-prob", batch.old_logp)
                for name, comp in rew.components.items():
                    finite &= self.guard.check(f"reward component {name!r}", comp)
                if not finite:
                    reason = self.guard.end_step()
                    self._print(f"iteration {it + 1}: update skipped ({reason}); no update applied")
                    kept = 0
                scal["skipped_updates"] = self.guard.total_skipped
                if kept > 0:
                    idx = torch.nonzero(keep).flatten()
                    comps = {k: v[idx] for k, v in rew.components.items()}
                    a = compute_advantages(cfg.grpo, rew.total[idx], gids[idx], comps)
                    adv = torch.zeros(len(batch.episodes))
                    adv[idx] = torch.where(a.mask, a.values, torch.zeros_like(a.values))
                    keep = keep.clone()
                    keep[idx] &= a.mask
                    bar.set_description("grpo[update]")
                    t_up = time.time()
                    scal.update(self.update(batch, adv, keep, it))
                    scal["time/update_s"] = time.time() - t_up
                scal["time/iteration_s"] = time.time() - t0
                self.state["iteration"] = it + 1
                self.logger.log(it + 1, scal)
                last_eval = max(self.state["eval"].values(), key=lambda e: e["iteration"])["success_rate"]
                bar.set_postfix(succ=f"{scal['rollout/success_rate']:.2f}", kept=kept, eval=f"{last_eval:.2f}",
                                t=f"{scal['time/iteration_s']:.1f}s")
                if cfg.rl.eval_every > 0 and (it + 1) % cfg.rl.eval_every == 0 and it + 1 < cfg.rl.iterations:
                    bar.set_description("grpo[eval]")
                    self.run_eval(f"iter_{it + 1}", it + 1, videos=False)
                if stop.requested:
                    self.save()
                    stopped = stop.requested
                    self._print(f"stopped by {stopped} after iteration {it + 1}; checkpoint saved, rerun to resume")
                    break
                if (it + 1) % cfg.rl.save_every == 0:
                    self.save()
        bar.close()
        if stopped is None and self.state["eval"].get("final", {}).get("iteration") != self.state["iteration"]:
            self.run_eval("final", cfg.rl.iterations)
        self.save()
        self.policy.save_pretrained(self.out / "policy")
        self.logger.close()
        ev = self.state["eval"]
        summary = {"sft_success": ev["sft"]["success_rate"], "final_success": ev.get("final", {}).get("success_rate"),
                   "iterations": self.state["iteration"], "wall_s": round(time.time() - t_start, 1), "resumed": resumed,
                   "stopped": stopped, "policy": self.policy}
        self._print(f"held-out success: after SFT {summary['sft_success']:.3f} -> after GRPO "
                    f"{summary['final_success'] if summary['final_success'] is None else round(summary['final_success'], 3)} "
                    f"({summary['wall_s']}s this run); outputs in {self.out.resolve()}")
        return summary

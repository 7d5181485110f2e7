"""A complete, tiny GRPO run of the core, end to end, in about 20 s of CPU (200 iterations).

The "policy" is a conditional flow-matching model on 2-D points: ``v_theta(x, sigma, c)``, a small MLP
with one embedding per *prompt* ``c``. It is first pretrained by flow matching on a ring of ``num_modes``
Gaussian modes (the same for every prompt), so a prompt's samples land on any mode. Prompt ``c`` is then
rewarded for landing on *its* mode ``g_c`` (``r = exp(-||x - g_c||^2 / (2 * 0.3^2))``): initially about
``1 / num_modes`` of the samples do. GRPO with the Flow-GRPO SDE, group-relative advantages, the clipped
loss and the KL to the pretrained model moves the mass onto the rewarded mode.

Every piece comes from ``grpo/``: ``flow_sde.flow_chain`` (sampling with log-probs), ``flow_sde.sde_step``
(recomputation via ``prev_sample=``), ``train_step.compute_advantages`` / ``guarded_step``, ``loss.clipped_pg_loss`` and
``reference_kl``, ``checkpoint`` (atomic, resumable with RNG), ``metrics`` (TensorBoard + JSONL).

    diffusion-rl toy configs/grpo/toy_flow.yaml [key=value ...] [--dry-run]     # main() below is its entry point
"""

from __future__ import annotations

import copy
import math
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from torch import nn

from .checkpoint import capture_rng_state, load_checkpoint, restore_rng_state, save_checkpoint
from .config import (
    MAX_BATCH,
    MAX_INNER_EPOCHS,
    MAX_LR,
    MAX_WIDTH,
    ConfigError,
    check_resume_config,
    config_to_dict,
    dump_config,
    load_config,
    require_at_least,
    require_at_most,
    require_positive,
)
from .distributed import (
    all_reduce_mean,
    barrier,
    gathered_advantages,
    init_distributed,
    keyed_generator,
    keyed_randn,
    shard_range,
)
from .flow_sde import SDEKind, flow_chain, flow_sigmas, sde_step
from .loop import Phase, resume_latest, run_loop
from .loss import clipped_pg_loss, reference_kl
from .metrics import MetricsLogger
from .trackers import LogConfig
from .train_step import GRPOConfig, NonFiniteGuard, compute_advantages
from .update import DistributedUpdate


@dataclass
class ToyModelConfig:
    hidden: int = 128  # MLP width of the toy velocity model
    num_prompts: int = 4  # prompts (each rewards one mode)
    num_modes: int = 8  # modes on the ring the model is pretrained on
    radius: float = 2.0  # ring radius
    mode_std: float = 0.15  # spread of each mode
    pretrain_steps: int = 1500  # flow-matching pretraining steps
    pretrain_lr: float = 3e-3  # pretraining learning rate

    def __post_init__(self) -> None:
        require_at_least("model", self, hidden=1, num_prompts=1, num_modes=1, pretrain_steps=0)
        require_at_most("model", self, hidden=MAX_WIDTH,  # (1e9 prompts: a 128 GB embedding table, a traceback)
                        num_prompts=MAX_BATCH, num_modes=MAX_BATCH)
        require_positive("model", self, "radius", "mode_std", "pretrain_lr")
        # (was: pretrain_lr=1e300 AdamW's overflow traceback; radius / mode_std=1e300 a ring of inf, non-finite rewards
        # after the pretraining and the run's first files)
        require_at_most("model", self, pretrain_lr=MAX_LR, radius=100.0, mode_std=100.0)


@dataclass
class ToySamplerConfig:
    num_steps: int = 10  # denoising steps
    sde: SDEKind = "flow_grpo"  # SDE step kind (grpo.flow_sde)
    eta: float = 0.7  # SDE noise level

    def __post_init__(self) -> None:
        require_at_least("sampler", self, num_steps=1, eta=0.0)
        require_at_most("sampler", self, num_steps=10_000)  # (as diffusion-rl's sampler.num_steps)


@dataclass
class ToyTrainConfig:
    iterations: int = 200  # GRPO iterations
    prompts_per_iter: int = 4  # prompts per iteration
    lr: float = 2e-3  # Adam learning rate
    inner_epochs: int = 2  # passes over each iteration's rollouts
    eval_samples: int = 256  # ODE samples per evaluation
    save_every: int = 20  # iterations between checkpoints
    keep_last: int = 2  # checkpoints kept

    def __post_init__(self) -> None:
        require_at_least("train", self, iterations=0, prompts_per_iter=1, inner_epochs=1, eval_samples=1, save_every=1,
                         keep_last=1)
        require_at_most("train", self, prompts_per_iter=MAX_BATCH, eval_samples=10 * MAX_BATCH, lr=MAX_LR,
                        inner_epochs=MAX_INNER_EPOCHS)
        require_positive("train", self, "lr")


@dataclass
class ToyConfig:
    seed: int = 0  # seeds everything
    output_dir: str = "runs/grpo_toy"  # where checkpoints and metrics go
    resume: bool = True  # continue from the latest checkpoint in output_dir
    model: ToyModelConfig = field(default_factory=ToyModelConfig)  # the toy flow model
    sampler: ToySamplerConfig = field(default_factory=ToySamplerConfig)  # the rollout sampler
    grpo: GRPOConfig = field(  # GRPO settings
        default_factory=lambda: GRPOConfig(group_size=16, clip_low=0.2, kl_coef=0.01))
    train: ToyTrainConfig = field(default_factory=ToyTrainConfig)  # iterations and cadence
    log: LogConfig = field(default_factory=LogConfig)  # trackers besides metrics.jsonl (grpo.trackers)

    def __post_init__(self) -> None:
        sc = self.sampler
        if sc.sde == "ode" or sc.eta == 0:  # no step draws noise: every log-prob is 0 (as diffusion-rl train refuses)
            what = "sampler.sde=ode" if sc.sde == "ode" else "sampler.eta=0"
            raise ValueError(f"{what}: no step draws noise, so every log-prob is 0 and GRPO has no gradient; expected "
                             "an SDE kind (e.g. flow_grpo) with sampler.eta > 0")


class ToyVelocity(nn.Module):
    """``v(x[B,2], sigma[B], c[B]) -> [B,2]``: an MLP on (x, Fourier(sigma), embedding(c))."""

    def __init__(self, hidden: int, num_prompts: int):
        super().__init__()
        self.embed = nn.Embedding(num_prompts, 32)
        self.net = nn.Sequential(nn.Linear(2 + 16 + 32, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, 2))

    def forward(self, x: torch.Tensor, sigma: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        freqs = torch.arange(8, device=x.device, dtype=x.dtype)
        ang = sigma[:, None] * (2.0 ** freqs)[None] * math.pi
        return self.net(torch.cat([x, ang.sin(), ang.cos(), self.embed(c)], dim=-1))


def mode_centers(cfg: ToyModelConfig) -> torch.Tensor:
    a = torch.arange(cfg.num_modes, dtype=torch.float32) * 2 * math.pi / cfg.num_modes
    return cfg.radius * torch.stack([a.cos(), a.sin()], dim=-1)


def target_of(c: torch.Tensor, cfg: ToyModelConfig) -> torch.Tensor:
    """Prompt ``c`` is rewarded on mode ``(c * num_modes) // num_prompts``."""
    return mode_centers(cfg)[(c * cfg.num_modes) // cfg.num_prompts]


def reward_fn(x: torch.Tensor, c: torch.Tensor, cfg: ToyModelConfig) -> torch.Tensor:
    return torch.exp(-((x - target_of(c, cfg)) ** 2).sum(-1) / (2 * 0.3**2))


def pretrain(model: ToyVelocity, cfg: ToyModelConfig, gen: torch.Generator) -> float:
    """Flow matching (Lipman et al. 2023): ``min E ||v(x_s, s) - (eps - x0)||^2``, ``x_s = (1-s) x0 + s eps``."""
    opt = torch.optim.Adam(model.parameters(), lr=cfg.pretrain_lr)
    centers = mode_centers(cfg)
    loss = torch.tensor(0.0)
    for _ in range(cfg.pretrain_steps):
        b = 256
        x0 = centers[torch.randint(cfg.num_modes, (b,),
                                   generator=gen)] + cfg.mode_std * torch.randn(b, 2, generator=gen)
        c = torch.randint(cfg.num_prompts, (b,), generator=gen)
        eps = torch.randn(b, 2, generator=gen)
        s = torch.rand(b, generator=gen)
        xs = (1 - s[:, None]) * x0 + s[:, None] * eps
        loss = ((model(xs, s, c) - (eps - x0)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss.detach())


@torch.no_grad()
def rollout(model: ToyVelocity, c: torch.Tensor, sc: ToySamplerConfig, noise: torch.Tensor, sde: bool = True):
    """Sample ``x`` for prompts ``c[B]`` from pre-drawn ``noise[B, T+1, 2]`` (initial noise + one draw per step).

    Returns final samples ``[B,2]``, per-step latents ``[T+1,B,2]`` and log-probs ``[T,B]``.
    """
    sigmas = flow_sigmas(sc.num_steps)
    x, steps = flow_chain(lambda i, z: model(z, sigmas[i].expand(c.shape[0]), c), noise[:, 0], sigmas,
                          kind=sc.sde if sde else "ode", eta=sc.eta, noise=lambda i: noise[:, i + 1])
    return x, torch.stack([noise[:, 0]] + [s.x_next for s in steps]), torch.stack([s.log_prob for s in steps])


def evaluate(model: ToyVelocity, cfg: ToyConfig) -> float:
    n = cfg.train.eval_samples
    c = torch.arange(n) % cfg.model.num_prompts
    x, _, _ = rollout(model, c, cfg.sampler, keyed_randn((cfg.sampler.num_steps + 1, 2), cfg.seed, -1, range(n)),
                      sde=False)
    return float(reward_fn(x, c, cfg.model).mean())


def train(cfg: ToyConfig) -> dict:
    """Pretrain (or resume), then GRPO; returns ``{"reward_before", "reward_after", "model", "stopped"}``.

    Runs as one process or under ``torchrun``/``accelerate launch``: each rank rolls out its contiguous
    share of the global batch (noise keyed by global sample index), advantages are computed on the
    gathered groups, gradients are averaged; rank 0 evaluates, logs and checkpoints.
    """
    info = init_distributed()
    out = Path(cfg.output_dir)
    ckpt_dir = out / "checkpoints"
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    model = ToyVelocity(cfg.model.hidden, cfg.model.num_prompts)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    guard = NonFiniteGuard(cfg.grpo.max_nonfinite)
    upd = DistributedUpdate(model.parameters(), optimizer, guard, cfg.grpo.max_grad_norm, info=info)
    start, ref_state, before = 0, None, None

    def load(latest: Path) -> None:
        nonlocal ref_state, start, before
        state = load_checkpoint(latest)
        check_resume_config(state["config"], cfg, str(latest), ignore=("train.iterations", "resume"))
        model.load_state_dict(state["model"])
        ref_state = state["reference"]
        optimizer.load_state_dict(state["optimizer"])
        guard.load_state_dict(state["guard"])
        restore_rng_state(state["rng"])
        start, before = int(state["iteration"]), float(state["reward_before"])

    latest = resume_latest(ckpt_dir, cfg.resume, load)
    # the logs open after the resume: a checkpoint refused (another config, damaged) leaves the run as it was
    logger = MetricsLogger(out, enabled=info.is_main, config=config_to_dict(cfg), log=cfg.log, resume=cfg.resume)
    if latest is not None:
        if info.is_main:
            print(f"resumed from {latest} at iteration {start}")
    if ref_state is None:
        t = time.time()
        loss = pretrain(model, cfg.model, gen)
        if info.is_main:
            print(f"pretrained the toy flow model in {time.time() - t:.1f}s (final flow-matching loss {loss:.3f})")
        ref_state = {k: v.clone() for k, v in model.state_dict().items()}
    reference = copy.deepcopy(model).requires_grad_(False)
    reference.load_state_dict(ref_state)
    if before is None:
        before = evaluate(model, cfg)
    if info.is_main:
        print(f"outputs: {out.resolve()} (metrics.jsonl, tb/, checkpoints/)")

    done = [start]  # iterations done

    def save() -> None:
        if info.is_main:
            save_checkpoint(ckpt_dir, done[0], {
                "model": model.state_dict(), "reference": ref_state, "optimizer": optimizer.state_dict(),
                "guard": guard.state_dict(), "rng": capture_rng_state(), "iteration": done[0],
                "reward_before": before, "config": config_to_dict(cfg),
            }, keep_last=cfg.train.keep_last)
        barrier()

    g, p, T = cfg.grpo.group_size, cfg.train.prompts_per_iter, cfg.sampler.num_steps
    mine = shard_range(p * g, info)  # this rank's global sample indices
    sigmas = flow_sigmas(T)

    def step(phase: Phase) -> dict[str, float]:
        it = done[0]
        # ---- rollout: P prompts x G samples (this rank's shard), SDE with stored latents/log-probs
        phase("rollout")
        c_all = torch.randint(cfg.model.num_prompts, (p,), generator=keyed_generator(cfg.seed, it)).repeat_interleave(g)
        c = c_all[mine.start:mine.stop]
        group_ids = torch.arange(p).repeat_interleave(g)[mine.start:mine.stop]  # global group labels
        noise = keyed_randn((T + 1, 2), cfg.seed, it, mine)
        x, lats, old_lp = rollout(model, c, cfg.sampler, noise)
        # ---- reward and group-relative advantages over the gathered groups
        rewards = reward_fn(x, c, cfg.model)
        adv = gathered_advantages(partial(compute_advantages, cfg.grpo), rewards, group_ids)
        # ---- update: recompute log-probs of the stored transitions, clipped loss + KL, guarded step
        phase("update")
        b = c.shape[0]
        x_t = lats[:-1].reshape(T * b, 2)
        x_next = lats[1:].reshape(T * b, 2)
        s = sigmas[:-1].repeat_interleave(b)
        s_next = sigmas[1:].repeat_interleave(b)
        cc = c.repeat(T)
        for _ in range(cfg.train.inner_epochs):
            step = sde_step(model(x_t, s, cc), x_t, s, s_next, kind=cfg.sampler.sde, eta=cfg.sampler.eta,
                            sigma_max=float(sigmas[1]), prev_sample=x_next)
            logp = step.log_prob.reshape(T, b).T
            kl = None
            if cfg.grpo.kl_coef > 0:
                with torch.no_grad():
                    ref = sde_step(reference(x_t, s, cc), x_t, s, s_next, kind=cfg.sampler.sde, eta=cfg.sampler.eta,
                                   sigma_max=float(sigmas[1]), prev_sample=x_next)
                kl = reference_kl(cfg.grpo.kl_type, step.log_prob, ref.log_prob, step.mean, ref.mean, step.std,
                                  step.std_dev_t).reshape(T, b).T
            lo = clipped_pg_loss(logp, old_lp.T, adv.values, adv.mask[:, None], cfg.grpo.clip_low, cfg.grpo.clip_high,
                                 kl, cfg.grpo.kl_coef, cfg.grpo.loss_reduction)
            upd.backward(lo.loss, b, p * g)  # this rank's b of the p * g samples
            st = upd.step()
        # ---- log
        mean_r = all_reduce_mean(rewards.mean())
        done[0] = it + 1
        scalars = {"reward/mean": mean_r, "loss/total": all_reduce_mean(lo.loss.detach()), "loss/kl": lo.kl,
                   "loss/clip_frac": lo.clip_frac, "loss/approx_kl": lo.approx_kl, "grad_norm": st.grad_norm,
                   "nfe": p * g * T, "skipped_updates": guard.total_skipped}
        logger.log(it + 1, scalars)
        return scalars

    res = run_loop(step, start, cfg.train.iterations, save=save, save_every=cfg.train.save_every, desc="grpo toy",
                   postfix=lambda sc: {"reward": f"{float(sc['reward/mean']):.3f}"})
    stopped = res.stopped
    after = evaluate(model, cfg) if stopped is None else float("nan")
    if info.is_main and stopped is None:
        logger.log(cfg.train.iterations, {"eval/reward_before": before, "eval/reward_after": after})
        print(f"eval reward (ODE samples, {cfg.train.eval_samples} per run): before {before:.3f} -> after {after:.3f}")
    logger.close()
    return {"reward_before": before, "reward_after": after, "model": model, "stopped": stopped}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    path = argv.pop(0) if argv and "=" not in argv[0] and not argv[0].startswith("-") else None
    dry = "--dry-run" in argv
    argv = [a for a in argv if a != "--dry-run"]
    try:
        cfg = load_config(ToyConfig, path, argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if dry:
        print(dump_config(cfg))
        print(f"per iteration: NFE {cfg.train.prompts_per_iter * cfg.grpo.group_size * cfg.sampler.num_steps} "
              f"(rollout) + backward over the same {cfg.train.inner_epochs}x")
        return 0
    train(cfg)
    return 0


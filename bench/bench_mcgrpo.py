"""MC-GRPO (Kim 2026, arXiv 2601.22582) vs mean-baseline GRPO at small group sizes, on the toy flow task (issue 25).

The paper's claim: at small rollout counts G the group *mean* is a noisy baseline that flips the sign of some
advantages; a *median* over G + 1 rollouts (the median sample, the pivot, gets advantage 0 and carries no gradient)
flips fewer and trains better, closing the gap between G = 2 and G = 8. Arms (``grpo.advantages.group_advantages``):

* ``mean``        GRPO: ``(r - mean_g) / (std_g + eps)`` over G rollouts per prompt;
* ``median``      MC-GRPO as its reference code: G + 1 rollouts, ``(r - median_g) / (MAD_g + 1e-3) * n / #nonzero``;
* ``median_std``  the ablation: G + 1 rollouts, median baseline, GRPO's std scale, pivot masked;
* ``mean_G+1``    the control a reviewer asks for: GRPO with MC-GRPO's G + 1 rollouts (all G + 1 carry gradient), to
                  tell the median's effect from that of the extra rollout.

Task: ``grpo/demo.py``'s 2-D flow model (pretrained on a ring of 8 modes) rewarded for prompt ``c``'s mode,
``q(x) = exp(-||x - g_c||^2 / (2 * 0.3^2))`` (the *clean* reward, in [0, 1]; the pretrained model hits the mode
~1/8 of the time). The training reward is ``r = q + noise``: ``--noise none`` (r = q), ``gauss`` (``scale * N(0,1)``)
or ``student`` (``scale * t_2``: Student-t with 2 degrees of freedom, heavy-tailed, infinite variance: a reward model
that is usually close and occasionally far off, the outlier regime the paper's argument is about). Default: both
``none`` and ``student`` at scale 0.03 (at 0.1 the noise swamps the signal and no arm learns: measured, every arm
stays within 0.05-0.47 of the 0.08 start with SE 0.03-0.07).

(a) Sign-flip rate. For a policy snapshot, each prompt's true value ``V(c) = E[q]`` is estimated from 4096 SDE
samples; groups of G (mean) or G + 1 (median) are drawn from those samples, given fresh observation noise, and a
sample's advantage is *flipped* when ``sign(A_i) != sign(q_i - V(c))``. Rate = flipped / samples that carry gradient
(``A_i != 0`` and in the loss mask); ``carry`` = that count / all samples. The sign of each arm's advantage is that
of ``r_i - baseline`` (its scale is positive), computed vectorised here; the test checks it against
``group_advantages`` itself. Snapshots: the pretrained start (success ~1/8, a skewed reward) and a policy after 40
iterations of G = 16 mean GRPO (success ~1/2).

(b) Final evaluation reward (clean q of 256 ODE samples, fixed noise) after ``--iterations`` of training, every arm
from the same pretrained start per seed, same lr / prompts per iteration / inner epochs / clip / KL
(``claims_toy.RunConfig`` and the demo's ``configs/grpo/toy_flow.yaml`` GRPO settings), mean +- standard error over
seeds.

    python bench/bench_mcgrpo.py                 # the full table (docs/RESULTS.md, "Seed claims"), ~6 min on 1 core
    python bench/bench_mcgrpo.py --small         # seconds: the test's mode
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from arm_runs import too_many_seeds  # noqa: E402
from claims_toy import RunConfig, fmt, keyed_generator, pretrained, sample_sde, target_mode, train_arm  # noqa: E402

from grpo.demo import ToyModelConfig, ToySamplerConfig  # noqa: E402
from grpo.train_step import GRPOConfig  # noqa: E402

ARMS = ("mean", "mean_G+1", "median", "median_std")
METHOD = {"mean": "mean_std", "mean_G+1": "mean_std", "median": "median", "median_std": "median_std"}
NOISES = ("none", "gauss", "student")


def clean_reward(x: torch.Tensor, c: torch.Tensor, model_cfg: ToyModelConfig) -> torch.Tensor:
    """The demo's reward ``q = exp(-||x - g_c||^2 / (2 * 0.3^2))``, ``[N]``."""
    return torch.exp(-((x - target_mode(c, model_cfg)) ** 2).sum(-1) / (2 * 0.3**2))


def observe(q: torch.Tensor, noise: str, scale: float, gen: torch.Generator) -> torch.Tensor:
    """The training reward ``r = q + noise`` (module docstring)."""
    if noise == "none":
        return q
    z = torch.randn(q.shape, generator=gen)
    if noise == "gauss":
        return q + scale * z
    u = torch.rand(q.shape, generator=gen).clamp_min(1e-12)
    return q + scale * z / torch.sqrt(-torch.log(u))  # t_2 = Z / sqrt(chi2_2 / 2), chi2_2 = -2 log U


def make_reward(noise: str, scale: float, model_cfg: ToyModelConfig):
    def reward(x, c, gen):
        q = clean_reward(x, c, model_cfg)
        return observe(q, noise, scale, gen), None, q
    return reward


def group_size_of(arm: str, g: int) -> int:
    """Rollouts per prompt: G for the mean, G + 1 for the median arms (MC-GRPO's extra pivot rollout) and for
    ``mean_G+1`` (the control with MC-GRPO's rollout count and the mean baseline)."""
    return g if arm == "mean" else g + 1


def advantage_signs(r: torch.Tensor, arm: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``r[K, n]`` equal-sized groups -> (sign of each arm's advantage ``[K, n]``, carries-gradient mask ``[K, n]``).

    mean: ``sign(r - mean)``; median / median_std: ``sign(r - lower median)`` with the first sample equal to the median
    (the pivot) zero and, for median_std, masked (``group_advantages``' rules; the positive scale does not change
    signs).
    """
    if METHOD[arm] == "mean_std":
        s = torch.sign(r - r.mean(1, keepdim=True))
        return s, s != 0
    med = r.median(1, keepdim=True).values
    s = torch.sign(r - med)
    return s, s != 0  # the pivot (and any tie with the median) has A = 0: no gradient in either median arm


def snapshot_rewards(state: dict, model_cfg: ToyModelConfig, sampler: ToySamplerConfig, seed: int,
                     pool: int) -> torch.Tensor:
    """``[P, pool]`` clean rewards of ``pool`` SDE samples per prompt of the policy ``state`` (the flip estimate's
    pool)."""
    c = torch.arange(model_cfg.num_prompts).repeat_interleave(pool)
    x = sample_sde(state, c, sampler, model_cfg, keyed_generator(seed, 5))
    return clean_reward(x, c, model_cfg).view(model_cfg.num_prompts, pool)


def sign_flips(q: torch.Tensor, arm: str, g: int, noise: str, scale: float, seed: int,
               groups: int) -> tuple[float, float]:
    """(flip rate among samples that carry gradient, fraction that carry gradient) for groups drawn from the
    snapshot's clean rewards ``q[P, pool]``, see the module docstring."""
    gen = keyed_generator(seed, 7, g, ARMS.index(arm))
    P, pool = q.shape
    value = q.mean(1)  # V(c), [P]
    n = group_size_of(arm, g)
    idx = torch.randint(pool, (P, groups, n), generator=gen)
    qq = torch.gather(q[:, None, :].expand(P, groups, pool), 2, idx)  # [P, K, n]
    r = observe(qq.reshape(-1), noise, scale, gen).view(P * groups, n)
    sign, carry = advantage_signs(r, arm)
    truth = torch.sign(qq - value[:, None, None]).view(P * groups, n)
    wrong = carry & (sign != truth)
    return float(wrong.sum() / carry.sum().clamp_min(1)), float(carry.float().mean())


def main(argv: list[str] | None = None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="seconds-long smoke mode (the test's)")
    ap.add_argument("--seeds", type=int, default=5, help="seeds per arm (each seed: its own pretrained start)")
    ap.add_argument("--group-sizes", default="2,3,4,8", help="G values (median arms sample G + 1)")
    ap.add_argument("--noises", default="none,student", help=f"training-reward noises, from {NOISES}")
    ap.add_argument("--noise-scale", type=float, default=0.03, help="scale of the reward noise")
    ap.add_argument("--iterations", type=int, default=150, help="GRPO iterations per run")
    ap.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate (every arm)")
    ap.add_argument("--prompts", type=int, default=4, help="prompts per iteration (every arm)")
    ap.add_argument("--flip-groups", type=int, default=4000, help="groups per prompt in the sign-flip estimate")
    args = ap.parse_args(argv)
    try:
        gs = [int(v) for v in args.group_sizes.split(",")]
    except ValueError:
        print(f"error: --group-sizes must be comma-separated integers, got {args.group_sizes!r}", file=sys.stderr)
        return 2
    noises = args.noises.split(",")
    bad = [n for n in noises if n not in NOISES]
    if too_many_seeds(args.seeds, None):  # (was: 1e9 seeds started)
        return 2
    twice = len(set(gs)) != len(gs) or len(set(noises)) != len(noises)  # (a G or noise twice: was run twice)
    if bad or twice or any(g < 2 for g in gs) or args.seeds < 1 or args.iterations < 1:
        print(f"error: need distinct --noises from {NOISES} (got {bad or noises}), distinct G >= 2 (got {gs}), "
              "--seeds >= 1, --iterations >= 1", file=sys.stderr)
        return 2
    # (was: a nan --lr's traceback after pretraining; a nan --noise-scale, --prompts 0 or --flip-groups 0 started)
    if not (0 < args.lr < math.inf and 0 <= args.noise_scale < math.inf and args.prompts >= 1
            and args.flip_groups >= 1):
        print(f"error: --lr {args.lr}, --noise-scale {args.noise_scale}, --prompts {args.prompts}, --flip-groups "
              f"{args.flip_groups}: expected a finite --lr > 0, a finite --noise-scale >= 0, --prompts >= 1 and "
              "--flip-groups >= 1", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    model_cfg, sampler = ToyModelConfig(), ToySamplerConfig()
    seeds, pool, groups, mid_iters = range(args.seeds), 4096, args.flip_groups, 40
    run = RunConfig(iterations=args.iterations, prompts_per_iter=args.prompts, lr=args.lr)
    if args.small:
        model_cfg = ToyModelConfig(hidden=32, pretrain_steps=100)
        seeds, pool, groups, mid_iters = range(min(args.seeds, 2)), 256, 50, 3
        gs = gs[:2]
        run = RunConfig(iterations=3, prompts_per_iter=2, lr=args.lr, eval_samples=32)
    grpo = GRPOConfig(group_size=2, clip_low=0.2, clip_high=0.28, kl_coef=0.01, adv_clip=5.0)  # toy_flow.yaml's
    t0 = time.time()
    starts = {s: pretrained(s, model_cfg) for s in seeds}
    print(f"MC-GRPO bench: G={gs}, arms {ARMS}, seeds {list(seeds)}, {run.iterations} iterations x "
          f"{run.prompts_per_iter} prompts, lr {run.lr}, noise {noises} (scale {args.noise_scale}); pretrained in "
          f"{time.time() - t0:.1f}s")

    # (a) sign flips at two snapshots of seed 0
    clean = make_reward("none", 0.0, model_cfg)
    gmid = GRPOConfig(group_size=16, clip_low=0.2, clip_high=0.28, kl_coef=0.01)
    snapshots = {"pretrained": starts[0], "mid": train_arm(starts[0], gmid, clean, RunConfig(
        iterations=mid_iters, eval_samples=run.eval_samples), model_cfg, sampler, 0, return_state=True)[1]}
    print("\n(a) sign-flip rate: flipped / samples with gradient (fraction with gradient), seed 0 snapshots")
    print("| snapshot | noise | G | " + " | ".join(ARMS) + " |")
    print("|---|---|---|" + "---|" * len(ARMS))
    for snap, state in snapshots.items():
        q = snapshot_rewards(state, model_cfg, sampler, 0, pool)
        for noise in noises:
            for g in gs:
                cells = []
                for arm in ARMS:
                    rate, carry = sign_flips(q, arm, g, noise, args.noise_scale, 0, groups)
                    cells.append(f"{rate:.3f} ({carry:.2f})")
                print(f"| {snap} | {noise} | {g} | " + " | ".join(cells) + " |")

    # (b) training: final clean evaluation reward per arm, mean +- SE over seeds
    before = [train_arm(starts[s], grpo, clean, RunConfig(iterations=0, eval_samples=run.eval_samples), model_cfg,
                        sampler, s)["reward"] for s in seeds]
    print(f"\n(b) final eval reward (clean, ODE), mean +- SE over {len(seeds)} seeds; pretrained start {fmt(before)}")
    print("| noise | G | " + " | ".join(ARMS) + " |")
    print("|---|---|" + "---|" * len(ARMS))
    finals: dict[tuple[str, int, str], list[float]] = {}
    for noise in noises:
        reward = make_reward(noise, args.noise_scale, model_cfg)
        for g in gs:
            for arm in ARMS:
                cfg = GRPOConfig(**{**grpo.__dict__, "group_size": group_size_of(arm, g), "advantage": METHOD[arm]})
                vals = [train_arm(starts[s], cfg, reward, run, model_cfg, sampler, s)["reward"] for s in seeds]
                finals[noise, g, arm] = vals
                print(f"  {noise} G={g} {arm}: " + " ".join(f"{v:.3f}" for v in vals), flush=True)
            print(f"| {noise} | {g} | " + " | ".join(fmt(finals[noise, g, arm]) for arm in ARMS) + " |", flush=True)
    pairs = [("median", "mean"), ("median", "mean_G+1"), ("median_std", "mean"), ("median_std", "mean_G+1")]
    print(f"\n(b') paired differences of the final eval reward (same seed, same start), mean +- SE over {len(seeds)} "
          "seeds")
    print("| noise | G | " + " | ".join(f"{a} - {b}" for a, b in pairs) + " |")
    print("|---|---|" + "---|" * len(pairs))
    for noise in noises:
        for g in gs:
            print(f"| {noise} | {g} | " + " | ".join(
                fmt([x - y for x, y in zip(finals[noise, g, a], finals[noise, g, b])]) for a, b in pairs) + " |")
    print(f"\ntotal {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

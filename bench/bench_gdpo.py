"""GDPO (Liu et al. 2026, group reward-decoupled normalization) vs GRPO on the summed reward, on the toy flow task
(issue 25).

The paper's claim: with several rewards, normalizing each component within its group and then summing
(``advantage: gdpo``, ``grpo.advantages.decoupled_advantages``: ``BN(sum_k w_k (r_k - mean_g r_k) / (std_g r_k +
eps))``) trains better than GRPO's advantage of the summed reward (``(R - mean_g R) / std_g R``, ``R = sum_k w_k r_k``),
whose normalization is dominated by the component with the largest within-group spread and which maps different
component combinations with equal sums to one advantage.

Tasks: ``grpo/demo.py``'s 2-D flow model (pretrained on a ring of radius 2 with 8 modes), prompt ``c``'s target mode
``g_c``, two reward components, total ``R = a + b`` (weights 1, 1 for both arms):

* ``dense_sparse`` (scales and variances differ): ``dist = -||x - g_c||``, dense, spread of order 1 within a group
  at the start (the modes are 1.5-4 apart); ``hit = 1[||x - g_c|| < 0.15]``, sparse binary (~3% of the pretrained
  samples). Both point the same way; the sum is continuous, so equal totals of different combinations are rare.
* ``two_binary`` (the paper's setting: binary rewards whose combinations tie under the sum): ``angle =
  1[angle(x, g_c) < pi/16]`` (in the target's sector, ~1/8 at the start) and ``radius = 1[| ||x|| - 1.8 | < 0.15]``
  (a ring inside the pretrained one, ~1/3 at the start; independent of the angle). Under the sum, (1, 0) and
  (0, 1) get the same advantage; GDPO tells them apart by each component's group frequency. Every arm runs from the
  same pretrained start per seed with the
same G, lr, prompts per iteration, clip and KL (the demo's ``configs/grpo/toy_flow.yaml``), at each of two learning
rates (1e-3 and the demo's 2e-3: the comparison turned on the learning rate, so both are in the table); evaluation is
256 ODE samples from fixed noise; each component and the total are reported, mean +- standard error over seeds.

    python bench/bench_gdpo.py               # both tasks (docs/RESULTS.md, "Seed claims"), ~6 min on 1 core
    python bench/bench_gdpo.py --small       # seconds: the test's mode
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from arm_runs import seeds_parser  # noqa: E402
from claims_toy import RunConfig, fmt, keyed_generator, pretrained, sample_sde, target_mode, train_arm  # noqa: E402

from grpo.demo import ToyModelConfig, ToySamplerConfig  # noqa: E402
from grpo.train_step import GRPOConfig  # noqa: E402

ARMS = {"GRPO (summed)": "mean_std", "GDPO": "gdpo"}


TASKS = {"dense_sparse": ("dist", "hit"), "two_binary": ("angle", "radius")}


def components(task: str, x: torch.Tensor, c: torch.Tensor, model_cfg: ToyModelConfig,
               hit_radius: float) -> dict[str, torch.Tensor]:
    """The task's two reward components, each ``[N]`` (module docstring)."""
    g = target_mode(c, model_cfg)
    if task == "dense_sparse":
        d = (x - g).norm(dim=-1)
        return {"dist": -d, "hit": (d < hit_radius).float()}
    cos = (x * g).sum(-1) / (x.norm(dim=-1) * g.norm(dim=-1)).clamp_min(1e-8)
    return {"angle": (cos > math.cos(math.pi / 16)).float(),
            "radius": ((x.norm(dim=-1) - 1.8).abs() < hit_radius).float()}


def make_reward(task: str, model_cfg: ToyModelConfig, hit_radius: float):
    """``reward(x, c, gen) -> (R = a + b [N], {a, b}, R)`` (noise-free: observed = clean)."""
    def reward(x, c, gen):
        comps = components(task, x, c, model_cfg, hit_radius)
        total = sum(comps.values())
        return total, comps, total
    return reward


def within_group_std(state: dict, task: str, model_cfg: ToyModelConfig, sampler: ToySamplerConfig, g: int,
                     hit_radius: float, seed: int, groups: int = 64) -> dict[str, float]:
    """Mean over ``groups`` SDE groups of size ``g`` (per prompt) of each component's within-group std: which
    component dominates the summed reward's normalization at that policy."""
    c = torch.arange(model_cfg.num_prompts).repeat_interleave(groups * g)
    x = sample_sde(state, c, sampler, model_cfg, keyed_generator(seed, 9))
    comps = components(task, x, c, model_cfg, hit_radius)
    return {k: float(v.view(-1, g).std(1, unbiased=False).mean()) for k, v in comps.items()}


def main(argv: list[str] | None = None) -> int:
    ap = seeds_parser(__doc__, 10, "seeds per arm (each seed: its own pretrained start)")
    ap.add_argument("--group-size", type=int, default=8, help="rollouts per prompt (both arms)")
    ap.add_argument("--iterations", type=int, default=150, help="GRPO iterations per run")
    ap.add_argument("--lrs", default="1e-3,2e-3", help="Adam learning rates, comma-separated (both arms at each)")
    ap.add_argument("--prompts", type=int, default=4, help="prompts per iteration (both arms)")
    ap.add_argument("--hit-radius", type=float, default=0.15, help="radius of the hit / radius-band rewards")
    ap.add_argument("--tasks", default="dense_sparse,two_binary", help=f"comma-separated, from {list(TASKS)}")
    args = ap.parse_args(argv)
    try:
        lrs = [float(v) for v in args.lrs.split(",")]
    except ValueError:
        lrs = []
    finite = all(math.isfinite(v) for v in [args.hit_radius, *lrs])  # (was: a nan lr's traceback, a nan radius ran)
    if (args.seeds < 1 or args.group_size < 2 or args.iterations < 1 or args.prompts < 1 or not finite
            or args.hit_radius <= 0 or not lrs or min(lrs) <= 0 or len(set(lrs)) != len(lrs)):
        print(f"error: need --seeds >= 1, --group-size >= 2, --iterations >= 1, --prompts >= 1, a finite --hit-radius "
              f"> 0, --lrs finite positive numbers, each once; got {args.seeds}, {args.group_size}, {args.iterations}, "
              f"{args.prompts}, {args.hit_radius}, {args.lrs!r}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    model_cfg, sampler = ToyModelConfig(), ToySamplerConfig()
    seeds = range(args.seeds)
    run = RunConfig(iterations=args.iterations, prompts_per_iter=args.prompts)
    if args.small:
        model_cfg = ToyModelConfig(hidden=32, pretrain_steps=100)
        seeds = range(min(args.seeds, 2))
        run = RunConfig(iterations=3, prompts_per_iter=2, eval_samples=32)
    tasks = args.tasks.split(",")
    if any(t not in TASKS for t in tasks) or len(set(tasks)) != len(tasks):  # (a task twice: was run twice)
        print(f"error: --tasks must be distinct names from {list(TASKS)}, got {args.tasks!r}", file=sys.stderr)
        return 2
    t0 = time.time()
    starts = {s: pretrained(s, model_cfg) for s in seeds}
    print(f"GDPO bench: G={args.group_size}, seeds {list(seeds)}, {run.iterations} iterations x {run.prompts_per_iter} "
          f"prompts, lr {lrs}, tasks {tasks}; pretrained in {time.time() - t0:.1f}s")
    base = GRPOConfig(group_size=args.group_size, clip_low=0.2, clip_high=0.28, kl_coef=0.01, adv_clip=5.0)
    for task, lr in ((t, lr) for t in tasks for lr in lrs):
        run.lr = lr
        reward, keys = make_reward(task, model_cfg, args.hit_radius), TASKS[task] + ("total",)
        rows: dict[str, dict[str, list[float]]] = {}
        spread: dict[str, dict[str, list[float]]] = {}
        ev0 = [train_arm(starts[s], base, reward, RunConfig(iterations=0, eval_samples=run.eval_samples), model_cfg,
                         sampler, s) for s in seeds]
        rows["pretrained start"] = {k: [e["reward" if k == "total" else k] for e in ev0] for k in keys}
        spread["pretrained start"] = {k: [within_group_std(starts[s], task, model_cfg, sampler, args.group_size,
                                                           args.hit_radius, s)[k] for s in seeds] for k in keys[:2]}
        for name, adv in ARMS.items():
            cfg = GRPOConfig(**{**base.__dict__, "advantage": adv})
            res = [train_arm(starts[s], cfg, reward, run, model_cfg, sampler, s, return_state=True) for s in seeds]
            rows[name] = {k: [e["reward" if k == "total" else k] for e, _ in res] for k in keys}
            stds = [within_group_std(st, task, model_cfg, sampler, args.group_size, args.hit_radius, s)
                    for s, (_, st) in zip(seeds, res)]
            spread[name] = {k: [d[k] for d in stds] for k in keys[:2]}
            print(f"  {task} lr {lr} {name}: total per seed " + " ".join(f"{v:.3f}" for v in rows[name]["total"]),
                  flush=True)
        print(f"\n{task}, lr {lr}: final eval (ODE, clean), mean +- SE over {len(seeds)} seeds; last columns: each "
              f"component's within-group std of SDE rollouts (G={args.group_size}) at that policy")
        print(f"| {task} lr {lr} arm | " + " | ".join(keys) + " | " + " | ".join(f"std {k}" for k in keys[:2]) + " |")
        print("|---|" + "---|" * (len(keys) + 2))
        for name, r in rows.items():
            print(f"| {name} | " + " | ".join(fmt(r[k]) for k in keys) + " | "
                  + " | ".join(fmt(spread[name][k]) for k in keys[:2]) + " |")
        diffs = {k: [a - b for a, b in zip(rows["GDPO"][k], rows["GRPO (summed)"][k])] for k in keys}
        print(f"{task}, lr {lr}: GDPO - summed GRPO, paired over seeds: "
              + ", ".join(f"{k} {fmt(v)}" for k, v in diffs.items())
              + "\n", flush=True)
    print(f"\ntotal {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

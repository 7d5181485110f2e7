"""GDPO (Liu et al. 2026, group reward-decoupled normalization) vs GRPO on the summed reward, on the toy flow task
(issue 25).

The paper's claim: with several rewards, normalizing each component within its group and then summing
(``advantage: gdpo``, ``grpo.advantages.decoupled_advantages``: ``BN(sum_k w_k (r_k - mean_g r_k) / (std_g r_k + eps))``)
trains better than GRPO's advantage of the summed reward (``(R - mean_g R) / std_g R``, ``R = sum_k w_k r_k``),
whose normalization is dominated by the component with the largest within-group spread and which maps different
component combinations with equal sums to one advantage.

Task: ``grpo/demo.py``'s 2-D flow model (pretrained on a ring of 8 modes), prompt ``c`` rewarded on its mode ``g_c``
by two components of different scale and variance (``d = ||x - g_c||``):

* ``dist = -d``: dense, spread of order 1 within a group (the ring's modes are 1.5-4 apart);
* ``hit = 1[d < hit_radius]``: sparse binary (radius 0.15, the modes' std: ~5% of the pretrained samples hit).

Total ``R = dist + hit`` (weights 1, 1 for both arms). Every arm runs from the same pretrained start per seed with the
same G, lr, prompts per iteration, clip and KL (the demo's ``configs/grpo/toy_flow.yaml``); evaluation is 256 ODE
samples from fixed noise; each component and the total are reported, mean +- standard error over seeds.

    python bench/bench_gdpo.py               # the full table (docs/RESULTS.md, "Seed claims"), ~3 min on 1 core
    python bench/bench_gdpo.py --small       # seconds: the test's mode
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from claims_toy import RunConfig, fmt, pretrained, target_mode, train_arm  # noqa: E402
from grpo.demo import ToyModelConfig, ToySamplerConfig  # noqa: E402
from grpo.train_step import GRPOConfig  # noqa: E402

ARMS = {"GRPO (summed)": "mean_std", "GDPO": "gdpo"}
KEYS = ("dist", "hit", "total")


def make_reward(model_cfg: ToyModelConfig, hit_radius: float):
    """``reward(x, c, gen) -> (R = dist + hit [N], {"dist", "hit"}, R)`` (noise-free: observed = clean)."""
    def reward(x, c, gen):
        d = (x - target_mode(c, model_cfg)).norm(dim=-1)
        comps = {"dist": -d, "hit": (d < hit_radius).float()}
        total = comps["dist"] + comps["hit"]
        return total, comps, total
    return reward


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="seconds-long smoke mode (the test's)")
    ap.add_argument("--seeds", type=int, default=5, help="seeds per arm (each seed: its own pretrained start)")
    ap.add_argument("--group-size", type=int, default=8, help="rollouts per prompt (both arms)")
    ap.add_argument("--iterations", type=int, default=150, help="GRPO iterations per run")
    ap.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate (both arms)")
    ap.add_argument("--prompts", type=int, default=4, help="prompts per iteration (both arms)")
    ap.add_argument("--hit-radius", type=float, default=0.15, help="radius of the sparse hit reward")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.group_size < 2 or args.iterations < 1 or args.hit_radius <= 0 or args.lr <= 0:
        print(f"error: need --seeds >= 1, --group-size >= 2, --iterations >= 1, --hit-radius > 0, --lr > 0; got "
              f"{args.seeds}, {args.group_size}, {args.iterations}, {args.hit_radius}, {args.lr}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    model_cfg, sampler = ToyModelConfig(), ToySamplerConfig()
    seeds = range(args.seeds)
    run = RunConfig(iterations=args.iterations, prompts_per_iter=args.prompts, lr=args.lr)
    if args.small:
        model_cfg = ToyModelConfig(hidden=32, pretrain_steps=100)
        seeds = range(min(args.seeds, 2))
        run = RunConfig(iterations=3, prompts_per_iter=2, lr=args.lr, eval_samples=32)
    reward = make_reward(model_cfg, args.hit_radius)
    t0 = time.time()
    starts = {s: pretrained(s, model_cfg) for s in seeds}
    print(f"GDPO bench: G={args.group_size}, seeds {list(seeds)}, {run.iterations} iterations x {run.prompts_per_iter} "
          f"prompts, lr {run.lr}, components dist=-||x-g_c|| and hit=1[||x-g_c||<{args.hit_radius}]; "
          f"pretrained in {time.time() - t0:.1f}s")
    base = GRPOConfig(group_size=args.group_size, clip_low=0.2, clip_high=0.28, kl_coef=0.01, adv_clip=5.0)
    rows: dict[str, dict[str, list[float]]] = {}
    ev0 = [train_arm(starts[s], base, reward, RunConfig(iterations=0, eval_samples=run.eval_samples), model_cfg,
                     sampler, s) for s in seeds]
    rows["pretrained start"] = {k: [e["reward" if k == "total" else k] for e in ev0] for k in KEYS}
    for name, adv in ARMS.items():
        cfg = GRPOConfig(**{**base.__dict__, "advantage": adv})
        evs = [train_arm(starts[s], cfg, reward, run, model_cfg, sampler, s) for s in seeds]
        rows[name] = {k: [e["reward" if k == "total" else k] for e in evs] for k in KEYS}
        print(f"  {name}: total per seed " + " ".join(f"{v:.3f}" for v in rows[name]["total"]), flush=True)
    print(f"\nfinal eval (ODE, clean), mean +- SE over {len(seeds)} seeds")
    print("| arm | dist (-distance, higher better) | hit rate | total |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(fmt(r[k]) for k in KEYS) + " |")
    diff = [a - b for a, b in zip(rows["GDPO"]["total"], rows["GRPO (summed)"]["total"])]
    print(f"GDPO - summed GRPO, total, paired over seeds: {fmt(diff)}")
    print(f"\ntotal {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

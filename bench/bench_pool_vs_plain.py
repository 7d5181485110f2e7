"""Pool-and-select (Sol-RL-style low-precision exploration) vs plain flat GRPO on the shapes task, over seeds (issue \
25).

The claim (Sol-RL): roll out many cheap candidates with a low-precision copy of the model, regenerate and train only a
contrastive subset in full precision, and converge faster than plain GRPO. Arms, each run as its own
``python -m diffusion_rl.cli train`` process from the shipped shapes base (``builtin:shapes_sd3``), same seed per pair:

* ``pool``  ``configs/diffusion/shapes_pool_fp8.yaml``: per prompt 16 FP8 candidates, the 2 best + 2 worst
  regenerated in full precision and trained;
* ``plain`` the same file with ``pool.enabled=false``: flat GRPO on 4 full-precision rollouts per prompt.

Both train the same number of samples per iteration (4 prompts x 4) for the same iterations, lr and LoRA: equal
iterations, equal backward work; the pool arm spends 16 extra (emulated-FP8, slower on a CPU) rollouts per prompt on
choosing them. Reported per arm: the final evaluation reward and all-correct accuracy (ODE samples on the config's
64 fixed eval prompts; the pretrained model's value is the same for both arms of a seed), the wall time, mean +- SE
over seeds, and the paired difference pool - plain.

    python bench/bench_pool_vs_plain.py [--seeds 3] [--out runs/bench_pool_vs_plain]   # ~10 min on 2 cores
    python bench/bench_pool_vs_plain.py --small --out /tmp/x                           # seconds: the test's mode
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from arm_runs import bad_args, bad_out, run_jobs, seeds_parser, train_cli  # noqa: E402
from claims_toy import fmt  # noqa: E402

CONFIG = "configs/diffusion/shapes_pool_fp8.yaml"
ARMS = {"pool": [], "plain": ["pool.enabled=false"]}
SMALL = ["train.iterations=1", "train.prompts_per_iter=1", "prompts.num_eval=2", "pool.pool_size=4"]


def final_eval(metrics: Path) -> dict[str, float]:
    """The last ``eval/*`` values of a run's ``metrics.jsonl`` (reward, reward_before, accuracy, ...)."""
    out: dict[str, float] = {}
    for line in metrics.read_text().splitlines():
        rec = json.loads(line)
        out.update({k: float(v) for k, v in rec.items() if k.startswith("eval/")})
    return out


def run_arm(arm: str, seed: int, out: Path, extra: list[str]) -> dict[str, float]:
    """One training run in a fresh process; returns its final evaluation and ``wall_s``."""
    run_dir = out / f"{arm}_seed{seed}"
    wall = train_cli(f"{arm} seed {seed}", "diffusion_rl.cli", CONFIG, seed, run_dir, [*ARMS[arm], *extra])
    ev = final_eval(run_dir / "metrics.jsonl")
    ev["wall_s"] = wall
    print(f"  {arm} seed {seed}: reward {ev['eval/reward_before']:.3f} -> {ev['eval/reward']:.3f}, all-correct "
          f"{ev.get('eval/accuracy', float('nan')):.3f}, {wall:.0f}s", flush=True)
    return ev


def main(argv: list[str] | None = None) -> int:
    args = seeds_parser(__doc__, 3, "seeds per arm", out="runs/bench_pool_vs_plain").parse_args(argv)
    if bad_out(args.out) or bad_args(args, seeds=1, jobs=1):
        return 2
    out = Path(args.out).resolve()
    extra = SMALL if args.small else []
    seeds = range(min(args.seeds, 1) if args.small else args.seeds)
    jobs = [(arm, s) for s in seeds for arm in ARMS]
    print(f"pool-and-select vs plain GRPO: {CONFIG} {' '.join(extra)}, seeds {list(seeds)}, {args.jobs} at once")
    t0 = time.time()
    results = run_jobs(jobs, lambda j: run_arm(j[0], j[1], out, extra), args.jobs)
    if results is None:
        return 1
    keys = [("eval/reward_before", "reward before"), ("eval/reward", "reward after"),
            ("eval/accuracy", "all-correct after"), ("wall_s", "wall s")]
    print(f"\nmean +- SE over {len(seeds)} seeds (eval: ODE samples on the fixed eval prompts)")
    print("| arm | " + " | ".join(name for _, name in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for arm in ARMS:
        print(f"| {arm} | " + " | ".join(fmt([results[arm, s].get(k, float("nan")) for s in seeds],
                                              1 if k == "wall_s" else 3) for k, _ in keys) + " |")
    for k, name in keys[1:3]:
        d = [results["pool", s].get(k, float("nan")) - results["plain", s].get(k, float("nan")) for s in seeds]
        print(f"pool - plain, {name}, paired over seeds: {fmt(d)}")
    print(f"\ntotal {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""SRPO's progress reward vs a binary success reward on the VLA demo task, over seeds (issue 25).

The claim (SRPO, "Self-Referential Policy Optimization for VLA"): on LIBERO, RL from a one-demo SFT start rises from
48.9 % to 99.2 % success in 200 steps, and the progress reward (failures graded by their latent distance to the
batch's successes) beats a binary success reward. Arms, each a ``python -m vla_rl.cli train`` process of
``configs/vla/tabletop_reach_one.yaml`` (the ``make demo-vla`` recipe), same seed per pair:

* ``srpo``    ``rl.reward=srpo``: success 1, failures graded by SRPO's latent progress;
* ``binary``  ``rl.reward=binary``: success 1, failure 0.
* ``srpo_proprio`` (``--arms``)  ``srpo`` with the robot's own state as SRPO's latent (``srpo.encoder=proprio``,
  ``srpo.state_dims=[0,1,2]``: the grip point) instead of ``random_conv``; the recipe's ``group`` rule.
* ``srpo_proprio_task`` (``--arms``)  ``srpo_proprio`` with SRPO's own ``task`` rule (issue 32 item 3: the shipped
  rule is SRPO's unless a measured table on the test states shows the named option better).

Everything else is the same file: the same SFT (seeded by ``seed``, so both arms of a seed start RL from the same
weights: their held-out success after SFT is equal, which this bench checks), the same training states, evaluation
states, iterations, lr schedule and clip. Held-out success is the deterministic policy on the file's 64 held-out
initial states, every ``rl.eval_every`` iterations (``--eval-split test``: the test states, which nothing was
chosen on). Reported: every run's curve, mean +- SE over seeds per arm at each evaluation point, the paired
differences of :data:`PAIRS` whose arms both ran at each point and of the curve's mean over the RL evaluation
points (the area under it), and the wall time.

``--reuse``: a run directory that already holds a finished run of the same config (its ``run_info.json`` config
equal to this arm's, except ``output_dir`` / ``resume``, and an evaluation at the last iteration) is read, not
rerun: e.g. the SRPO arm's runs are the recipe's seed runs (``vla-rl train ... seed=S output_dir=OUT/srpo_seedS``).

    python bench/bench_srpo_vs_binary.py [--seeds 3] [--jobs 2] [--out runs/bench_srpo_vs_binary] [--reuse]
        # 6 runs of 200 iterations: ~7-11 min each on 2 free cores, more on busy ones
    python bench/bench_srpo_vs_binary.py --seeds 5 --iterations 50 --eval-every 25 --eval-split test \
        --arms srpo,srpo_proprio,srpo_proprio_task,binary --out runs/srpo_recipe    # the recipe's latent and rule
    python bench/bench_srpo_vs_binary.py --small --out /tmp/x    # seconds: the test's mode
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from arm_runs import bad_args, bad_out, parse_arms, run_jobs, seeds_parser, train_cli  # noqa: E402
from claims_toy import fmt, mean_se  # noqa: E402

CONFIG = "configs/vla/tabletop_reach_one.yaml"
PROPRIO = ["srpo.encoder=proprio", "srpo.state_dims=[0,1,2]"]  # the tabletop state's grip point
ARMS = {"srpo": ["rl.reward=srpo"], "binary": ["rl.reward=binary"],
        "srpo_proprio": ["rl.reward=srpo", *PROPRIO],
        "srpo_proprio_task": ["rl.reward=srpo", *PROPRIO, "srpo.reference=task"]}
DEFAULT_ARMS = ("srpo", "binary")
PAIRS = (("srpo", "binary"), ("srpo_proprio", "binary"), ("srpo_proprio_task", "binary"), ("srpo_proprio", "srpo"),
         ("srpo_proprio", "srpo_proprio_task"))  # paired differences reported when both arms ran
# seconds: SFT from scratch on 1 demo, 2 iterations of 2 groups x 2 episodes, 2 held-out episodes, tiny network
SMALL = ["sft.base_policy=null", "env.max_episode_steps=8", "policy.ctx_dim=32", "policy.flow.hidden=32",
         "policy.flow.num_steps=2", "sft.demos_per_task=1", "sft.steps=5", "sft.batch_size=8", "rl.iterations=2",
         "rl.groups_per_task=2", "grpo.group_size=2", "rl.minibatch_size=16", "rl.eval_episodes=2", "rl.eval_every=1",
         "rl.num_videos=0", "rl.success_band=[-0.5,1.5]", "srpo.num_frames=3"]
IGNORED = ("output_dir", "resume")  # run_info keys that may differ between a reused run and this bench's arm


def expected_config(arm: str, seed: int, extra: list[str]) -> dict:
    """The resolved config of ``arm`` at ``seed`` (as ``run_info.json`` stores it), without :data:`IGNORED`."""
    from grpo.config import config_to_dict, load_config
    from vla_rl.config import VLARLConfig

    cfg = config_to_dict(load_config(VLARLConfig, str(ROOT / CONFIG), [f"seed={seed}", *ARMS[arm], *extra]))
    return {k: v for k, v in cfg.items() if k not in IGNORED}


def eval_curve(metrics: Path) -> dict[int, float]:
    """``{iteration: held-out success}`` from a run's ``metrics.jsonl`` (iteration 0: after SFT)."""
    curve: dict[int, float] = {}
    for line in metrics.read_text().splitlines():
        rec = json.loads(line)
        if "eval/success_rate" in rec:
            curve[int(rec["step"])] = float(rec["eval/success_rate"])
    return curve


def without_added_keys(want: dict, got: dict, base: dict) -> dict:
    """``want`` less the keys ``got`` (a saved run's config) lacks where ``want`` holds ``base``'s value: config
    fields added to the code after that run was saved, at the value every run had before they existed (``base``:
    the config without the arm's overrides). A key the arm sets to another value stays, so the run is not reused."""
    out = {}
    for k, v in want.items():
        if k not in got:
            if k in base and base[k] == v:
                continue
        elif isinstance(v, dict) and isinstance(got[k], dict) and isinstance(base.get(k), dict):
            v = without_added_keys(v, got[k], base[k])
        out[k] = v
    return out


def finished(run_dir: Path, want: dict, base: dict | None = None) -> bool:
    """Whether ``run_dir`` holds a finished run of config ``want`` (its evaluation at the last iteration); with
    ``base``, config fields added after the run at their base value are not held against it
    (:func:`without_added_keys`)."""
    info, metrics = run_dir / "run_info.json", run_dir / "metrics.jsonl"
    if not (info.is_file() and metrics.is_file() and (run_dir / "policy").is_dir()):
        return False
    got = {k: v for k, v in json.loads(info.read_text())["config"].items() if k not in IGNORED}
    want = without_added_keys(want, got, base) if base is not None else want
    return json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True) and \
        want["rl"]["iterations"] in eval_curve(metrics)


def train_run(label: str, config: str, seed: int, run_dir: Path, args: list[str]) -> tuple[dict[int, float], float]:
    """``vla-rl train config`` at ``seed`` into ``run_dir`` in a fresh process (one core); its curve and wall."""
    wall = train_cli(label, "vla_rl.cli", config, seed, run_dir, args)
    curve = eval_curve(run_dir / "metrics.jsonl")
    print(f"  {label}: {_curve_str(curve)}, {wall:.0f}s", flush=True)
    return curve, wall


def run_arm(arm: str, seed: int, out: Path, extra: list[str], reuse: bool) -> dict:
    """One training run in a fresh process (or a finished one read back, ``reuse``); its curve, wall and origin."""
    run_dir = out / f"{arm}_seed{seed}"
    want = expected_config(arm, seed, extra)
    if reuse and finished(run_dir, want):
        curve = eval_curve(run_dir / "metrics.jsonl")
        wall = float(json.loads((run_dir / "run_info.json").read_text()).get("wall_s", float("nan")))
        wall = wall if wall == wall else _wall_from_metrics(run_dir / "metrics.jsonl")
        print(f"  {arm} seed {seed}: reused {run_dir}: " + _curve_str(curve), flush=True)
        return {"curve": curve, "wall_s": wall, "reused": True}
    curve, wall = train_run(f"{arm} seed {seed}", CONFIG, seed, run_dir, [*ARMS[arm], *extra])
    return {"curve": curve, "wall_s": wall, "reused": False}


def _wall_from_metrics(metrics: Path) -> float:
    """A reused run's wall: the ``time`` of its last logged record (seconds since the run started)."""
    last = [json.loads(line) for line in metrics.read_text().splitlines()][-1]
    return float(last.get("time", float("nan")))


def _curve_str(curve: dict[int, float]) -> str:
    return " / ".join(f"{curve[k]:.3f}@{k}" for k in sorted(curve))


def mean_table(results: dict, arms: list[str], seeds: list[int], points: list[int]) -> dict[str, list[float]]:
    """Print the table of mean +- SE over seeds per arm at each evaluation point, of the curve's mean over the RL
    points (> 0: the area under it) and of the wall; returns that mean per arm and seed."""
    rl_points = [p for p in points if p > 0]
    print(f"\nmean +- SE over {len(seeds)} seeds")
    print("| arm | " + " | ".join(f"@{p}" for p in points) + " | mean over RL points | wall s |")
    print("|---|" + "---|" * (len(points) + 2))
    auc = {arm: [sum(results[arm, s]["curve"][p] for p in rl_points) / max(len(rl_points), 1) for s in seeds]
           for arm in arms}
    for arm in arms:
        print(f"| {arm} | " + " | ".join(fmt([results[arm, s]["curve"][p] for s in seeds]) for p in points)
              + f" | {fmt(auc[arm])} | {fmt([results[arm, s]['wall_s'] for s in seeds], 0)} |")
    return auc


def same_start(results: dict, seeds: list[int], arms: list[str], what: str) -> bool:
    """Whether every arm of each seed starts RL from the same SFT policy (equal ``what`` success at iteration 0); if
    not, one line on stderr."""
    for s in seeds:
        starts = {arm: results[arm, s]["curve"].get(0) for arm in arms}
        if len(set(starts.values())) != 1:
            print(f"error: seed {s}: the arms start RL from different SFT policies ({what} {starts})", file=sys.stderr)
            return False
    return True


def paired_rows(results: dict, pairs: list[tuple[str, str]], seeds: list[int], points: list[int],
                auc: dict[str, list[float]]) -> None:
    """The mean table's paired rows: per pair ``a - b``, mean +- SE over seeds of the per-seed difference at each
    evaluation point and of the curve's mean over the RL points (``auc``, :func:`mean_table`)."""
    for a, b in pairs:
        diff = {p: [results[a, s]["curve"][p] - results[b, s]["curve"][p] for s in seeds] for p in points}
        print(f"| {a} - {b} (paired) | " + " | ".join(fmt(diff[p]) for p in points)
              + f" | {fmt([x - y for x, y in zip(auc[a], auc[b])])} | |")


def main(argv: list[str] | None = None) -> int:
    ap = seeds_parser(__doc__, 3, out="runs/bench_srpo_vs_binary", reuse=True)
    ap.add_argument("--iterations", type=int, default=0, help="rl.iterations of every arm (0: the config's)")
    ap.add_argument("--eval-every", type=int, default=0, help="rl.eval_every of every arm (0: the config's)")
    ap.add_argument("--eval-split", choices=("validation", "test"), default=None,
                    help="rl.eval_split of every arm (default: the config's)")
    ap.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                    help=f"comma-separated arms, of {', '.join(ARMS)} (default: {','.join(DEFAULT_ARMS)})")
    args = ap.parse_args(argv)
    if bad_out(args.out) or bad_args(args, seeds=1, jobs=1, iterations=0, eval_every=0):
        return 2
    arms = parse_arms(args.arms, ARMS)
    if arms is None:
        return 2
    out = Path(args.out).resolve()
    extra = ((SMALL if args.small else []) + ([f"rl.iterations={args.iterations}"] if args.iterations else [])
             + ([f"rl.eval_every={args.eval_every}"] if args.eval_every else [])
             + ([f"rl.eval_split={args.eval_split}"] if args.eval_split else []))
    seeds = list(range(min(args.seeds, 1) if args.small else args.seeds))
    jobs = [(arm, s) for s in seeds for arm in arms]
    print(f"SRPO vs binary reward: {CONFIG} {' '.join(extra)}, arms {', '.join(arms)}, seeds {seeds}, "
          f"{args.jobs} at once")
    t0 = time.time()
    results = run_jobs(jobs, lambda j: run_arm(j[0], j[1], out, extra, args.reuse), args.jobs)
    if results is None:
        return 1
    if not same_start(results, seeds, arms, "held-out"):
        return 1
    points = sorted(set.intersection(*(set(r["curve"]) for r in results.values())))
    print("\nheld-out success per run (iteration 0: after SFT)")
    print("| arm | seed | " + " | ".join(f"@{p}" for p in points) + " | wall s |")
    print("|---|---|" + "---|" * (len(points) + 1))
    for arm in arms:
        for s in seeds:
            r = results[arm, s]
            print(f"| {arm} | {s} | " + " | ".join(f"{r['curve'][p]:.3f}" for p in points)
                  + f" | {r['wall_s']:.0f}{' (reused)' if r['reused'] else ''} |")
    auc = mean_table(results, arms, seeds, points)
    pairs = [(a, b) for a, b in PAIRS if a in arms and b in arms]
    last = points[-1]
    paired_rows(results, pairs, seeds, points, auc)
    print()
    for a, b in pairs:
        d = [results[a, s]["curve"][last] - results[b, s]["curve"][last] for s in seeds]
        m, se = mean_se(d)
        print(f"final (@{last}) {a} - {b}, paired over seeds: {m:+.3f} +- {se:.3f} ({a} ahead in "
              f"{sum(x > 0 for x in d)} of {len(seeds)} seeds)")
    print(f"total {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

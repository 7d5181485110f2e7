"""Tree x pool against its parents on a task with headroom: time to flat GRPO's target in projected GPU cost and in
CPU wall clock, and the reward at equal projected GPU cost (issue 35, item 5).

``--task big`` (the default): ``bench/big_shapes_task.py``, the verifier times a size credit; ``--task layout``: issue
35's second task, ``bench/layout_shapes_task.py``, the verifier times a centred-composition credit (the task of
``bench_branch_headroom.py --task layout``; the reward comes from the same ``task_reward``).

Arms (one process per seed holds the four trainers, built from the same base and LoRA initialisation (checked),
evaluated on the same fixed prompts with the same noise; their iterations interleaved by spent cost, so the shared
machine's load falls on all alike). Every arm trains ``--train`` samples per prompt, 1 prompt per update, same lr,
eta, clip, steps:

* ``flat GRPO``      ``--train`` full-precision samples per prompt;
* ``tree+prune``     BranchGRPO, splits ``--splits`` (factor 2: ``--train`` leaves), top-1 leaf per last-split parent
                     trained on a sliding window of 2 depths (the best parent of the headroom bench);
* ``pool``           ``--pool`` candidates per prompt from the ``--format`` rollout copy, the best and worst
                     ``--train`` regenerated in full precision (Sol-RL; flat credit);
* ``tree x pool``    a tree of ``--pool`` leaves (the same splits, the last factor widened) grown by the ``--format``
                     copy, the best and worst ``--train`` leaves' pruned tree regenerated in full precision,
                     BranchGRPO's credit on it (diffusion_rl/tree_pool.py), every regenerated node trained;
* ``tree x pool+prune`` the same rollout, BranchGRPO's width / depth pruning on top of the selection
                     (``--txp-width`` / ``--txp-k`` among the present leaves, a sliding ``--txp-window`` of depths):
                     the backward rows of tree+prune for the rollout of tree x pool.
* ``lookahead@1``    BranchGRPO (factor 2, every node trained) whose first split keeps the best and worst of ``--cands``
                     candidate children previewed to a leaf by the ``--format`` copy (diffusion_rl/lookahead.py);
* ``lookahead@1+prune`` the same rollout with tree+prune's width / depth pruning: compared with ``tree+prune`` (paired
                     per seed: units to target and reward @ B minus tree+prune's).
* ``Prune-parent``   tree+prune with the parent credit (``branch.adv_baseline=parent``, ``adv_scale=leaf``: a node's
                     advantage is its reward minus its parent's, so an edge is credited only with what its own
                     segment's noise changed; ``bench_branch_headroom.py``'s arm of that name);
* ``lookahead@1+prune-parent`` lookahead@1+prune with the parent credit: compared with ``Prune-parent``. The first
                     split's selection widens the gap between the kept subtrees; under the depth credit every deeper
                     edge's advantage carries that gap, under the parent credit only the first split's edges do.
* ``tree x pool+prune-parent`` tree x pool+prune with the parent credit: the same selection question for the
                     pool's leaves (best and worst of the low-precision tree), compared with the best parent run,
                     ``Prune-parent`` included when it is among ``--arms``.

Cost: each iteration's logged ``cost/gpu_units`` (full-precision forward passes: policy NFE + low-precision NFE /
the format's published throughput ratio + 3 x trained rows; ``diffusion_rl.strategies.projected_gpu_units``). Every
arm gets ``--overrun`` x flat's budget of units (flat: ``--flat-iters`` iterations) and is evaluated every
``--eval-every`` flat iterations' worth of units. Target: ``before + --target-frac x flat's final gain``; time to
target: the first (interpolated) crossing of the evaluation curve, in units and in CPU seconds (units x the arm's
median s per unit in this run: emulated low precision is SLOWER than fp32 on a CPU, so the CPU column cannot show the
method's point; the unit column is what it would cost where the format has kernels). Reward at equal cost: each
arm's curve read at flat's budget ``B``.

    python bench/bench_tree_pool.py --seed-list 0 --json-out /tmp/tp/s0.json      # one seed per process
    python bench/bench_tree_pool.py --report-from /tmp/tp/s0.json,/tmp/tp/s1.json  # the table of docs/RESULTS.md
    python bench/bench_tree_pool.py --task layout --seed-list 0 --json-out /tmp/tp/L0.json   # the second task
    python bench/bench_tree_pool.py --small                                        # seconds: the test's mode
    python bench/bench_tree_pool.py --arms "flat GRPO,tree+prune,lookahead@1+prune" --seed-list 0 --json-out \
        /tmp/tp/la0.json          # the lookahead arm; joins the other arms' files of the same seed in --report-from
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

from arm_runs import bad_arm_fields, join_seeds, missing_arms  # noqa: E402
from bench_branch_headroom import TASKS, check_same_start, crossing, fmt, make_trainer, reward_at, run_seeds  # noqa: E402
from big_shapes_task import TARGET_AREA  # noqa: E402
from claims_toy import mean_se  # noqa: E402

from diffusion_rl.branch import BranchConfig  # noqa: E402
from diffusion_rl.pool_config import PoolConfig  # noqa: E402
from diffusion_rl.quant import QuantConfig  # noqa: E402
from diffusion_rl.trainer import DiffusionGRPOTrainer  # noqa: E402
from grpo.cli import ArgumentParser  # noqa: E402

ARMS = ("flat GRPO", "tree+prune", "pool", "tree x pool", "tree x pool+prune", "lookahead@1", "lookahead@1+prune",
        "Prune-parent", "lookahead@1+prune-parent", "tree x pool+prune-parent")
# the numbers run_seed writes per arm (u_target / t_target: null when the target was not reached; curve: a list)
ARM_NUMBERS = ("iters", "units_per_iter", "s_per_iter", "nfe_policy", "nfe_lowp", "backward", "spent", "reward_B",
               "acc_B", "s_per_unit")
MAX_CANDS = 64  # --cands: the most lookahead@1 candidates (each previewed to a leaf every iteration)
COMBOS = ("tree x pool", "tree x pool+prune", "tree x pool+prune-parent")  # compared with the best parent
LOOKAHEAD = {"lookahead@1": "tree+prune", "lookahead@1+prune": "tree+prune",  # each compared with its tree
             "lookahead@1+prune-parent": "Prune-parent"}


def arm_settings(name: str, args) -> tuple[BranchConfig, PoolConfig, int]:
    """``(branch section, pool section, grpo.group_size)`` of an arm."""
    q = QuantConfig(format=args.format)
    splits = list(args.splits)
    tree = dict(enabled=True, split_steps=splits, fusion="mean")
    wide = [2] * (len(splits) - 1) + [2 * args.pool // args.train]  # the last split widened to --pool leaves
    off = PoolConfig(enabled=False)
    prune = dict(width_prune="topk_per_parent", prune_k=1, depth_window=min(2, len(splits)))  # tree+prune's
    parent = dict(adv_baseline="parent", adv_scale="leaf")  # the parent credit (bench_branch_headroom's Prune-parent)
    la = dict(**tree, branch=[2], lookahead_candidates=getattr(args, "cands", 4))
    previews = PoolConfig(enabled=False, quant=q)  # the pool's rollout copy, for the previews only
    select = PoolConfig(enabled=True, pool_size=args.pool, train_size=args.train, select="best_worst", quant=q)
    txp_prune = dict(**tree, branch=wide, width_prune=args.txp_width, prune_k=args.txp_k, depth_window=args.txp_window)
    return {
        "flat GRPO": (BranchConfig(enabled=False), off, args.train),
        "tree+prune": (BranchConfig(**tree, branch=[2], **prune), off, args.train),
        "pool": (BranchConfig(enabled=False), select, args.train),
        "tree x pool": (BranchConfig(**tree, branch=wide), select, args.train),
        "tree x pool+prune": (BranchConfig(**txp_prune), select, args.train),
        "lookahead@1": (BranchConfig(**la), previews, args.train),
        "lookahead@1+prune": (BranchConfig(**la, **prune), previews, args.train),
        "Prune-parent": (BranchConfig(**tree, branch=[2], **prune, **parent), off, args.train),
        "lookahead@1+prune-parent": (BranchConfig(**la, **prune, **parent), previews, args.train),
        "tree x pool+prune-parent": (BranchConfig(**txp_prune, **parent), select, args.train),
    }[name]


@dataclass
class Arm:
    name: str
    trainer: DiffusionGRPOTrainer
    budget: float  # projected GPU units
    eval_units: float  # units between evaluations
    units: list[float] = field(default_factory=list)  # per iteration
    walls: list[float] = field(default_factory=list)
    nfe_policy: list[float] = field(default_factory=list)
    nfe_lowp: list[float] = field(default_factory=list)
    backward: list[float] = field(default_factory=list)
    curve: list[tuple[float, float, float]] = field(default_factory=list)  # (units spent, eval reward, all-correct)
    next_eval: float = 0.0

    @property
    def spent(self) -> float:
        return sum(self.units)

    def evaluate(self) -> None:
        r = self.trainer.evaluate()
        self.curve.append((self.spent, r, self.trainer.last_eval_components.get("eval/accuracy", float("nan"))))

    def step(self) -> None:
        s = self.trainer.step()
        self.units.append(s["cost/gpu_units"])
        self.walls.append(s["time/iter_s"])
        self.nfe_policy.append(s["cost/nfe_policy"])
        self.nfe_lowp.append(s["cost/nfe_lowp"])
        self.backward.append(s["cost/backward"])
        if self.spent >= self.next_eval or self.spent >= self.budget:
            self.next_eval = self.spent + self.eval_units
            self.evaluate()
            u, r, acc = self.curve[-1]
            print(f"    {self.name:<11} it {len(self.units):3d}: {u:8.0f} units, eval reward {r:.4f}, all-correct "
                  f"{acc:.3f} ({sum(self.walls):.0f} s)", flush=True)

    @property
    def s_per_unit(self) -> float:
        return statistics.median(w / u for w, u in zip(self.walls, self.units))


def build(args, name: str, seed: int) -> DiffusionGRPOTrainer:
    bc, pc, g = arm_settings(name, args)
    return make_trainer(args, name, seed, branch=bc, pool=pc, group_size=g, prompts_per_iter=1)


def run_seed(args, seed: int) -> dict:
    trainers = {name: build(args, name, seed) for name in args.arms}
    check_same_start(trainers)
    cost = {n: t.cost_per_iteration() for n, t in trainers.items()}
    B = args.flat_iters * cost["flat GRPO"]["gpu_units"]
    every = args.eval_every * cost["flat GRPO"]["gpu_units"]
    arms = {n: Arm(n, t, B if n == "flat GRPO" else args.overrun * B, every, next_eval=every)
            for n, t in trainers.items()}
    for a in arms.values():
        a.evaluate()
    t0 = time.perf_counter()
    while True:
        todo = [a for a in arms.values() if a.spent < a.budget]
        if not todo:
            break
        min(todo, key=lambda a: (a.spent / a.budget, ARMS.index(a.name))).step()
    flat = arms["flat GRPO"]
    before = flat.curve[0][1]
    final = sum(r for _, r, _ in flat.curve[-2:]) / len(flat.curve[-2:])
    target = before + args.target_frac * (final - before)
    out = {"seed": seed, "task": args.task, "before": before, "before_acc": flat.curve[0][2], "target": target, "B": B,
           "wall_run": time.perf_counter() - t0, "arms": {}}
    for n, a in arms.items():
        u = crossing(a.curve, target) if final > before else None
        spu = a.s_per_unit
        out["arms"][n] = {
            "iters": len(a.units), "units_per_iter": statistics.fmean(a.units),
            "s_per_iter": statistics.median(a.walls),
            "nfe_policy": statistics.fmean(a.nfe_policy), "nfe_lowp": statistics.fmean(a.nfe_lowp),
            "backward": statistics.fmean(a.backward), "u_target": u, "t_target": None if u is None else u * spu,
            "spent": a.spent, "reward_B": reward_at(a.curve, B), "acc_B": reward_at(a.curve, B, 2),
            "curve": a.curve, "s_per_unit": spu}
    return out


def merge_runs(runs: list[dict]) -> list[dict]:
    """One run per seed from several ``--json-out`` files (e.g. seed 0's four arms from one run and a fifth arm from
    another), an arm in two runs of a seed with the same evaluation curve in both, else ``ValueError``
    (:func:`arm_runs.join_seeds`)."""
    return join_seeds(runs, "curve", "evaluation curves", agree=("task", "before", "target", "B"))


def report(args, runs: list[dict]) -> int:
    """Print the table of ``runs`` (joined per seed, :func:`merge_runs`); 2 (one line on stderr) for runs that cannot
    be joined or lack an arm of ``--arms``, else 0."""
    bad = bad_arm_fields(runs, ARM_NUMBERS, ("u_target", "t_target"), ("curve",))
    if bad:
        print(f"bench_tree_pool: --report-from: {bad}", file=sys.stderr)
        return 2
    try:
        runs = merge_runs(runs)
    except ValueError as e:
        print(f"bench_tree_pool: {e}", file=sys.stderr)
        return 2
    if getattr(args, "all_arms", False):
        args.arms = [a for a in ARMS if all(a in r["arms"] for r in runs)]
    if missing_arms("bench_tree_pool", runs, args.arms):
        return 2
    other = sorted({f"{r.get('task', 'big')} (seed {r['seed']})" for r in runs if r.get("task", "big") != args.task})
    if other:
        print(f"bench_tree_pool: runs of another task than --task {args.task}: {', '.join(other)}", file=sys.stderr)
        return 2
    n = len(runs)
    task = "big-shapes task" if args.task == "big" else "layout task"
    print(f"\ntree x pool on the {task}: {args.steps} steps, {args.train} trained samples per prompt, pool "
          f"{args.pool} ({args.format}), splits {args.splits}, lr {args.lr:g}, {args.eval_prompts} eval prompts; flat "
          f"{args.flat_iters} iterations = budget B; tree x pool+prune: {args.txp_width} k={args.txp_k}, depth window "
          f"{args.txp_window}; lookahead@1: {getattr(args, 'cands', 4)} candidates -> 2 at the first split; "
          f"target = before + {args.target_frac:g} x flat's gain; {n} "
          f"seed(s), mean +- SE\n")
    hdr = ("| mode        | NFE bf16/iter | NFE lowp/iter | backward/iter | units/iter | CPU s/iter | units to target "
           "| CPU s to target | units ratio flat/mode | CPU ratio flat/mode | reward @ B | all-correct @ B |")
    print(hdr)
    print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
    for name in args.arms:
        arms = [r["arms"][name] for r in runs]
        flats = [r["arms"]["flat GRPO"] for r in runs]
        pairs = [(f, a) for f, a in zip(flats, arms) if a["u_target"] is not None and f["u_target"] is not None]
        got = len(pairs)
        miss = f" ({got}/{n} reached)" if got < n else ""
        u_cell = fmt([a["u_target"] for _, a in pairs], 0) + miss if got else "not reached"
        t_cell = fmt([a["t_target"] for _, a in pairs], 0) + miss if got else "-"
        ur = fmt([f["u_target"] / a["u_target"] for f, a in pairs]) if got else "-"
        tr = fmt([f["t_target"] / a["t_target"] for f, a in pairs]) if got else "-"
        m = statistics.fmean
        print(f"| {name:<11} | {m(a['nfe_policy'] for a in arms):13.0f} | {m(a['nfe_lowp'] for a in arms):13.0f} "
              f"| {m(a['backward'] for a in arms):13.0f} | {m(a['units_per_iter'] for a in arms):10.0f} "
              f"| {fmt([a['s_per_iter'] for a in arms]):>10} | {u_cell} | {t_cell} | {ur} | {tr} "
              f"| {fmt([a['reward_B'] for a in arms], 3)} | {fmt([a['acc_B'] for a in arms], 3)} |")
    print(f"\nstart: reward {fmt([r['before'] for r in runs], 3)}; flat's target "
          f"{fmt([r['target'] for r in runs], 3)}; budget B = {fmt([r['B'] for r in runs], 0)} units; a run per seed "
          f"{fmt([r['wall_run'] for r in runs], 0)} s")
    print("paired differences (same seed, same start), units to target (mode - best parent) and reward @ B - flat:")
    for name in args.arms[1:]:
        d = [r["arms"][name]["reward_B"] - r["arms"]["flat GRPO"]["reward_B"] for r in runs]
        print(f"  {name:<11} reward @ B - flat {fmt(d, 3)}")
    parents = [p for p in ("flat GRPO", "tree+prune", "Prune-parent", "pool") if p in args.arms]  # every parent run
    for combo in (c for c in COMBOS if c in args.arms):
        # reward @ B minus the parents' highest, every seed; the units line below pairs only seeds where all reached
        best_r = [r["arms"][combo]["reward_B"] - max(r["arms"][p]["reward_B"] for p in parents) for r in runs]
        diffs, dr = [], []
        for r, d_r in zip(runs, best_r):
            us = {p: r["arms"][p]["u_target"] for p in parents + [combo]}
            if all(v is not None for v in us.values()):
                best = min(parents, key=lambda p: us[p])
                diffs.append(us[combo] - us[best])
                dr.append(d_r)
        print(f"  {combo} reward @ B - the best parent's (per seed, the parents' highest reward @ B), all {n} "
              f"seed(s): {fmt(best_r, 3)}; behind on {sum(d < 0 for d in best_r)} of {n}")
        if diffs:
            m, se = mean_se(diffs)
            print(f"  {combo} - best parent, units to target: {m:.0f} +- {se:.0f} over {len(diffs)} seed(s) "
                  f"(the claim holds when below -2 SE: {'yes' if len(diffs) > 1 and m < -2 * se else 'no'}); "
                  f"reward @ B - best parent's {fmt(dr, 3)}")
    for la, base in ((a, b) for a, b in LOOKAHEAD.items() if a in args.arms and b in args.arms):
        du = [r["arms"][la]["u_target"] - r["arms"][base]["u_target"] for r in runs
              if r["arms"][la]["u_target"] is not None and r["arms"][base]["u_target"] is not None]
        dr = [r["arms"][la]["reward_B"] - r["arms"][base]["reward_B"] for r in runs]
        if du:
            m, se = mean_se(du)
            units = (f"{m:.0f} +- {se:.0f} over {len(du)} seed(s) where both reached (ahead when below -2 SE: "
                     f"{'yes' if len(du) > 1 and m < -2 * se else 'no'})")
        else:
            units = "no seed where both reached the target"
        print(f"  {la} units to target - {base}'s: {units}; reward @ B - {base}'s, all {n} seed(s): "
              f"{fmt(dr, 3)}")
    print("\nevaluation curves (units:reward/all-correct):")
    for r in runs:
        for name in args.arms:
            a = r["arms"][name]
            print(f"  seed {r['seed']} {name:<11} ({a['s_per_iter']:.2f} s/iter) "
                  + " ".join(f"{u:.0f}:{v:.4f}/{acc:.3f}" for u, v, acc in a["curve"]))
    return 0


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n")[0])  # (grpo.cli's: an argparse error is one line)
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 (or --seed-list)")
    ap.add_argument("--seed-list", default=None, help="comma-separated seeds instead of 0..N-1")
    ap.add_argument("--flat-iters", type=int, default=24, help="flat GRPO's iterations: the budget B in units")
    ap.add_argument("--overrun", type=float, default=1.25, help="the other arms' budget as a multiple of B")
    ap.add_argument("--eval-every", type=int, default=4, help="flat iterations' worth of units between evaluations")
    ap.add_argument("--target-frac", type=float, default=0.8, help="flat's target: before + this x flat's final gain")
    ap.add_argument("--steps", type=int, default=10, help="denoising steps of every arm")
    ap.add_argument("--splits", default="0,2,4", help="tree split steps (factor 2 each, the last widened for the pool)")
    ap.add_argument("--train", type=int, default=8, help="trained samples per prompt, every arm (= 2^len(splits))")
    ap.add_argument("--pool", type=int, default=32, help="low-precision candidates per prompt (pool, tree x pool)")
    ap.add_argument("--format", default="nvfp4", choices=("fp8", "nvfp4"), help="the rollout copy's format")
    ap.add_argument("--txp-width", default="topk_per_parent", choices=("none", "topk_per_parent", "best_worst"),
                    help="tree x pool+prune: width pruning among the regenerated (present) leaves")
    ap.add_argument("--txp-k", type=int, default=1, help="tree x pool+prune: k of the width pruning")
    ap.add_argument("--txp-window", type=int, default=2, help="tree x pool+prune: sliding depth window (0: all)")
    ap.add_argument("--cands", type=int, default=4, help="lookahead@1: candidate children previewed at the first split "
                    "(2 kept: the best and the worst preview)")
    ap.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate of the LoRA, every arm")
    ap.add_argument("--eta", type=float, default=0.7, help="SDE noise level, every arm")
    ap.add_argument("--eval-prompts", type=int, default=64, help="fixed evaluation prompts")
    ap.add_argument("--eval-steps", type=int, default=10, help="ODE steps of the evaluation")
    ap.add_argument("--task", default="big",
                    help="the reward: " + "; ".join(f"{k} = {v}" for k, v in TASKS.items()))
    ap.add_argument("--target-area", type=float, default=TARGET_AREA, help="the big task's object area in px^2")
    ap.add_argument("--arms", default=None, help=f"comma-separated subset of {', '.join(ARMS)} (flat first; default: "
                    "all, or with --report-from the arms every seed has)")
    ap.add_argument("--model-path", default="builtin:shapes_sd3")
    ap.add_argument("--out", default="/tmp/bench_tree_pool", help="trainer output dirs (nothing is written)")
    ap.add_argument("--json-out", default=None, help="also write the per-seed results to this JSON file")
    ap.add_argument("--report-from", default=None, help="comma-separated --json-out files: print their table only")
    ap.add_argument("--small", action="store_true", help="seconds: 4 steps, 4 trained of 8, 2 flat iterations")
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--small" in argv:
        ap.set_defaults(steps=4, splits="0,2", train=4, pool=8, flat_iters=2, eval_every=1, eval_prompts=4,
                        eval_steps=3, seeds=1)
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    problems = []
    try:
        args.splits = [int(s) for s in args.splits.split(",")]
    except ValueError:
        problems.append(f"--splits {args.splits!r}: expected comma-separated step indices like 0,2,4")
        args.splits = [0]
    args.all_arms = args.arms is None
    args.arms = list(ARMS) if args.arms is None else [a.strip() for a in args.arms.split(",")]
    if len(set(args.arms)) != len(args.arms):
        problems.append(f"--arms {','.join(args.arms)!r}: names an arm more than once (expected distinct arms)")
    if [a for a in args.arms if a not in ARMS] or not args.arms or args.arms[0] != "flat GRPO":
        problems.append(f"--arms {','.join(args.arms)!r}: expected 'flat GRPO' first, then any of "
                        f"{', '.join(ARMS[1:])}")
    if not (args.model_path.startswith("builtin:") or args.model_path.strip() and Path(args.model_path).is_dir()):
        problems.append(f"--model-path {args.model_path!r}: expected builtin:<name> or a saved diffusers pipeline "
                        "directory")
    if args.task not in TASKS:
        problems.append(f"--task {args.task!r}: expected one of {', '.join(TASKS)}")
    if args.splits != sorted(set(args.splits)) or args.splits[0] < 0 or args.splits[-1] >= args.steps:
        problems.append(f"--splits {args.splits}: expected increasing steps in [0, --steps {args.steps})")
    if args.train != 2 ** len(args.splits):
        problems.append(f"--train {args.train}: must be 2^(number of splits) = {2 ** len(args.splits)}")
    if args.pool < args.train or (2 * args.pool) % args.train:
        problems.append(f"--pool {args.pool}: must be >= --train {args.train} and a multiple of --train / 2")
    for flag, v, ok, want in (
            ("--seeds", args.seeds, args.seeds >= 1, ">= 1"),
            ("--flat-iters", args.flat_iters, args.flat_iters >= 2, ">= 2"),
            ("--eval-every", args.eval_every, args.eval_every >= 1, ">= 1"), ("--lr", args.lr, args.lr > 0, "> 0"),
            ("--eta", args.eta, args.eta > 0, "> 0 (the SDE noise the trees branch on)"),
            ("--txp-k", args.txp_k, args.txp_k >= 1, ">= 1"),
            ("--txp-window", args.txp_window, 0 <= args.txp_window <= len(args.splits),
             f"in [0, {len(args.splits)}] (the number of splits)"),
            ("--overrun", args.overrun, 1 <= args.overrun < math.inf, "finite and >= 1"),
            ("--eval-prompts", args.eval_prompts, args.eval_prompts >= 1, ">= 1"),
            ("--eval-steps", args.eval_steps, args.eval_steps >= 1, ">= 1"),
            ("--target-area", args.target_area, 0 < args.target_area < math.inf, "an area in px^2, finite and > 0"),
            ("--cands", args.cands, 2 < args.cands <= MAX_CANDS, f"in [3, {MAX_CANDS}] (more than the 2 kept)"),
            ("--target-frac", args.target_frac, 0 < args.target_frac <= 1, "in (0, 1]")):
        if not ok:
            problems.append(f"{flag} {v}: out of range (expected {want})")
    if not problems:  # the tree x pool+prune arm's pruning (was: a traceback at its first run, or no pruning at all)
        wide = [2] * (len(args.splits) - 1) + [2 * args.pool // args.train]
        try:
            BranchConfig(enabled=True, split_steps=list(args.splits), branch=wide, width_prune=args.txp_width,
                         prune_k=args.txp_k).make_tree(args.steps)
        except ValueError as e:
            problems.append(f"--txp-k {args.txp_k} / --txp-width {args.txp_width}: {e}")
    return run_seeds("bench_tree_pool", args, problems, run_seed, report)


if __name__ == "__main__":
    raise SystemExit(main())

"""BranchGRPO's claim on a task with headroom: wall clock to flat GRPO's target reward, flat over tree, one run per \
seed.

Issue 25's BranchGRPO row. The paper (Li et al. 2025, arXiv 2509.06040) reports higher alignment than DanceGRPO
(flat GRPO) with ~50% less training time. On the demo's verifier the shipped shapes model leaves RL about +0.04
all-correct, the size of seed noise, so speed of convergence cannot be told apart there; this bench uses the
task of ``bench/big_shapes_task.py`` (the demo's prompts, model and verifier, times a size credit the base is far
from: evaluation reward ~0.44 at the start); ``--task layout`` uses issue 35's second task,
``bench/layout_shapes_task.py`` (the verifier times a centred-composition credit, fixed before any tree tuning).

Per seed, ONE process holds four trainers built from the same base and the same LoRA initialisation (checked) and
evaluated on the same fixed prompts with the same noise: flat GRPO, BranchGRPO, BranchGRPO + pruning (top-1 leaf per
last-split parent, a sliding window of 2 trained depths) and BranchGRPO-Mix (a 4-step sliding SDE window; split steps
always SDE). Every arm uses the same settings (lr, prompts per update, SDE eta, clip, group = 16 leaves / samples); the
tree arms branch at steps 0, 2, 4, 6 of the demo's 10 (factor 2, ``--splits``; the reference's 0, 3, 6, 9 of 20:
early splits, where the leaves still diverge -- with the late splits of ``bench_branch.py`` (10, 13, 16, 18 of 20) a
tree's 16 leaves differ by a within-group reward std of ~0.01-0.02 against flat's ~0.1, so its advantages are mostly
noise; the table's ``leaf std`` column shows the spread each arm learns from). Their iterations are
interleaved (the arm with the least progress steps next), so the load of a shared machine falls on all arms alike.

Budgets are iterations, so a rerun reproduces every reward: flat GRPO runs ``--flat-iters`` iterations; a tree arm runs
``ceil(overrun * flat_iters * cost_flat / cost_arm)`` with ``cost = rollout NFE + 3 x backward row-steps`` per
iteration (``DiffusionGRPOTrainer.cost_per_iteration``, deterministic), enough to cover flat's wall clock. Each arm is
evaluated (ODE samples, ``--eval-prompts`` fixed prompts) every ``--eval-every`` of flat's iterations' worth of cost.
Wall clock is measured: each arm's median seconds per iteration in this run (evaluation excluded) times its iterations.

Target and ratio: flat's target is ``before + target_frac * (flat's final gain)`` (final: the mean of flat's last two
evaluations); an arm's time to target is the first crossing of its evaluation curve, linearly interpolated between
evaluations, in iterations, NFE (rollout) and seconds. ``ratio = t_flat / t_arm`` (> 2: the claim's "half the wall
clock" holds). An arm that never reaches the target within its budget is censored: its ratio is below
``t_flat / t_budget`` (printed with ``<``; its lower bound enters the mean). Reward at equal wall clock: each arm's
evaluation curve read (interpolated) at flat's total wall clock ``T``.

    python bench/bench_branch_headroom.py --seeds 3                # 3 seeds in one process
    python bench/bench_branch_headroom.py --seed-list 0 --json-out /tmp/s0.json   # one seed per process (0..4), then
    python bench/bench_branch_headroom.py --report-from /tmp/s0.json,/tmp/s1.json,/tmp/s2.json,/tmp/s3.json,/tmp/s4.json
                                                                   # the table of docs/RESULTS.md (Seed claims)
    python bench/bench_branch_headroom.py --task layout --seed-list 0 --json-out /tmp/l0.json   # the second task
    python bench/bench_branch_headroom.py --small                  # seconds: 6 steps, 8 leaves, 2 flat iterations
"""

from __future__ import annotations

import argparse
import json
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

from arm_runs import missing_arms, parse_seed_list, read_json_runs  # noqa: E402
from big_shapes_task import TARGET_AREA, BigShapesReward  # noqa: E402
from claims_toy import mean_se  # noqa: E402
from layout_shapes_task import LayoutShapesReward  # noqa: E402

from diffusion_rl.adapters import LoraSettings, ModelConfig  # noqa: E402
from diffusion_rl.branch import BranchConfig  # noqa: E402
from diffusion_rl.config import DiffusionRLConfig, RewardConfig, TrainConfig  # noqa: E402
from diffusion_rl.prompts import PromptConfig  # noqa: E402
from diffusion_rl.sampling import SamplerConfig  # noqa: E402
from diffusion_rl.trainer import DiffusionGRPOTrainer  # noqa: E402
from grpo.train_step import GRPOConfig  # noqa: E402

ARMS = ("flat GRPO", "BranchGRPO", "Branch+prune", "Branch-Mix")  # the default arms
# named options (issue 35 item 1), run only when --arms names them: the trees with the parent/leaf credit
# (branch.adv_baseline=parent, adv_scale=leaf; docs/RESULTS.md "Tree credit options")
EXTRA_ARMS = ("Branch-parent", "Prune-parent")
ALL_ARMS = ARMS + EXTRA_ARMS
TASKS = {"big": "bench/big_shapes_task.py: the verifier times a size credit (issue 25)",
         "layout": "bench/layout_shapes_task.py: the verifier times a placement credit (issue 35's second task)"}


def task_reward(args):
    """The reward of ``args.task`` (``big``, the default, also for benches without the flag; or ``layout``)."""
    if getattr(args, "task", "big") == "layout":
        return LayoutShapesReward()
    return BigShapesReward(args.target_area)


def arm_settings(name: str, splits: list[int]) -> tuple[BranchConfig, dict]:
    """``(branch section, extra sampler settings)`` of an arm; the tree arms share ``splits`` (factor 2)."""
    tree = dict(enabled=True, split_steps=list(splits), branch=[2], fusion="mean")
    window = min(2, len(splits))  # 2 depths (all of them on a tree of fewer)
    return {
        "flat GRPO": (BranchConfig(enabled=False), {}),
        "BranchGRPO": (BranchConfig(**tree), {}),
        "Branch+prune": (BranchConfig(**tree, width_prune="topk_per_parent", prune_k=1, depth_window=window), {}),
        "Branch-Mix": (BranchConfig(**tree), {"mix_window": 4}),
        "Branch-parent": (BranchConfig(**tree, adv_baseline="parent", adv_scale="leaf"), {}),
        "Prune-parent": (BranchConfig(**tree, width_prune="topk_per_parent", prune_k=1, depth_window=window,
                                      adv_baseline="parent", adv_scale="leaf"), {}),
    }[name]


@dataclass
class Arm:
    """One arm of one seed: its trainer, budget and measured curve."""

    name: str
    trainer: DiffusionGRPOTrainer
    iters: int  # iteration budget
    eval_every: int  # iterations between evaluations
    walls: list[float] = field(default_factory=list)  # seconds per iteration (evaluation excluded)
    nfe: list[float] = field(default_factory=list)  # rollout NFE per iteration
    nfe_train: list[float] = field(default_factory=list)  # training forward passes per iteration
    curve: list[tuple[int, float, float]] = field(default_factory=list)  # (iteration, eval reward, all-correct)
    leaf_std: list[float] = field(default_factory=list)  # within-group std of the training rewards per iteration
    move: list[float] = field(default_factory=list)  # ||theta_t - theta_{t-1}|| of the LoRA per update
    theta0: torch.Tensor | None = None  # the LoRA at the start (net displacement = ||theta_T - theta_0||)

    def evaluate(self) -> None:
        r = self.trainer.evaluate()
        self.curve.append((len(self.walls), r, self.trainer.last_eval_components.get("eval/accuracy", float("nan"))))

    def theta(self) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in self.trainer.params])

    def step(self) -> None:
        before = self.theta()
        if self.theta0 is None:
            self.theta0 = before.clone()
        s = self.trainer.step()
        self.move.append(float((self.theta() - before).norm()))
        self.walls.append(s["time/iter_s"])
        self.nfe.append(s["cost/nfe_rollout"])
        self.nfe_train.append(s["cost/nfe_train"])
        r = self.trainer.last_rewards.view(-1, self.trainer.cfg.grpo.group_size)
        self.leaf_std.append(float(r.std(dim=1).mean()))
        if len(self.walls) % self.eval_every == 0 or len(self.walls) == self.iters:
            self.evaluate()
            i, r, acc = self.curve[-1]
            print(f"    {self.name:<13} it {i:3d}/{self.iters}: eval reward {r:.4f}, all-correct {acc:.3f} "
                  f"({sum(self.walls):.0f} s)", flush=True)

    @property
    def s_per_iter(self) -> float:
        return statistics.median(self.walls)


def crossing(curve: list[tuple[int, float, float]], target: float) -> float | None:
    """First iteration (linearly interpolated between evaluations) at which ``curve`` reaches ``target``."""
    for (i0, r0, _), (i1, r1, _) in zip(curve, curve[1:]):
        if r1 >= target:
            return i0 + (i1 - i0) * (target - r0) / (r1 - r0) if r1 > r0 else float(i1)
    return None


def reward_at(curve: list[tuple[int, float, float]], it: float, col: int = 1) -> float:
    """Evaluation value (``col`` 1: reward, 2: all-correct) interpolated at iteration ``it`` (clamped to the curve)."""
    if it <= curve[0][0]:
        return curve[0][col]
    for a, b in zip(curve, curve[1:]):
        if it <= b[0]:
            return a[col] + (b[col] - a[col]) * (it - a[0]) / (b[0] - a[0])
    return curve[-1][col]


def peak_within(arm: dict, T: float) -> float:
    """Best evaluation reward of an arm's result within wall ``T`` s: its curve's points at ``it * s_per_iter <= T``
    and the curve read at ``T`` (the alignment reached by equal wall clock, not only at it)."""
    it_T = T / arm["s_per_iter"]
    return max([r for i, r, _ in arm["curve"] if i <= it_T] + [reward_at(arm["curve"], it_T)])


def make_trainer(args, name: str, seed: int, *, branch: BranchConfig, group_size: int, prompts_per_iter: int,
                 sampler_kw: dict | None = None, pool=None) -> DiffusionGRPOTrainer:
    """One arm of a big-shapes bench (this one and bench_tree_pool.py): the shipped shapes model with a fresh rank-8
    LoRA (the same for every arm of a seed), ``args.steps`` sampler steps, the task's reward; no checkpoints."""
    cfg = DiffusionRLConfig(
        seed=seed, output_dir=f"{args.out}/seed{seed}/{name.replace(' ', '_').replace('+', '_')}", resume=False,
        model=ModelConfig(kind="sd3", path=args.model_path, height=32, width=32, max_sequence_length=1,
                          lora=LoraSettings(rank=8, alpha=16)),
        sampler=SamplerConfig(num_steps=args.steps, eta=args.eta, **(sampler_kw or {})), branch=branch,
        **({} if pool is None else {"pool": pool}),
        grpo=GRPOConfig(group_size=group_size, clip_low=0.2, adv_clip=5.0),
        train=TrainConfig(iterations=10**6, prompts_per_iter=prompts_per_iter, lr=args.lr, eval_steps=args.eval_steps,
                          log_images=False, save_every=10**9, onpolicy_action="off"),
        reward=RewardConfig(name="shapes_verifier"),  # replaced by the task's reward below
        prompts=PromptConfig(source="shapes", num_eval=args.eval_prompts))
    return DiffusionGRPOTrainer(cfg, reward_fn=task_reward(args), log=False)


def check_same_start(trainers: dict[str, DiffusionGRPOTrainer]) -> None:
    """Every arm starts from the same LoRA weights (a paired comparison), or ``RuntimeError``."""
    states = [t.adapter.trainable_state_dict() for t in trainers.values()]
    if not all(torch.equal(states[0][k], s[k]) for s in states[1:] for k in states[0]):
        raise RuntimeError("the arms do not start from the same LoRA weights")


def build(args, name: str, seed: int) -> DiffusionGRPOTrainer:
    bc, samp = arm_settings(name, args.splits)
    return make_trainer(args, name, seed, branch=bc, group_size=args.leaves, prompts_per_iter=args.prompts,
                        sampler_kw=samp)


def run_seed(args, seed: int) -> dict:
    trainers = {name: build(args, name, seed) for name in args.arms}
    check_same_start(trainers)
    cost = {n: t.cost_per_iteration() for n, t in trainers.items()}
    units = {n: c["nfe"] + 3 * c["backward"] for n, c in cost.items()}  # a trained row-step ~ forward + backward
    flat_units = units["flat GRPO"]
    arms = {}
    for n, t in trainers.items():
        scale = 1.0 if n == "flat GRPO" else args.overrun * flat_units / units[n]
        iters = max(1, math.ceil(args.flat_iters * scale))
        arms[n] = Arm(n, t, iters, max(1, round(args.eval_every * flat_units / units[n])))
    for a in arms.values():  # the same start: every arm's first evaluation is the same number
        a.evaluate()
    t0 = time.perf_counter()
    while True:
        todo = [a for a in arms.values() if len(a.walls) < a.iters]
        if not todo:
            break
        a = min(todo, key=lambda a: (len(a.walls) / a.iters, ALL_ARMS.index(a.name)))
        a.step()
    wall_run = time.perf_counter() - t0
    flat = arms["flat GRPO"]
    before = flat.curve[0][1]
    final = sum(r for _, r, _ in flat.curve[-2:]) / len(flat.curve[-2:])
    target = before + args.target_frac * (final - before)
    T = flat.iters * flat.s_per_iter
    out = {"seed": seed, "task": getattr(args, "task", "big"), "before": before, "before_acc": flat.curve[0][2],
           "target": target, "T": T,
           "wall_run": wall_run, "arms": {}}
    for n, a in arms.items():
        it = crossing(a.curve, target) if final > before else None
        spi = a.s_per_iter
        nfe_it = statistics.fmean(a.nfe)
        out["arms"][n] = {
            "iters": a.iters, "s_per_iter": spi, "nfe_per_iter": nfe_it,
            "nfe_train_per_iter": statistics.fmean(a.nfe_train),
            "it_target": it, "t_target": None if it is None else it * spi,
            "nfe_target": None if it is None else it * nfe_it,
            "t_budget": a.iters * spi, "reward_T": reward_at(a.curve, T / spi), "acc_T": reward_at(a.curve, T / spi, 2),
            "covered_T": a.iters * spi >= T, "leaf_std": statistics.fmean(a.leaf_std[:5]),
            "move_per_iter": statistics.fmean(a.move), "move_net": float((a.theta() - a.theta0).norm()),
            "move_path": sum(a.move),
            "curve": [(i, r, acc) for i, r, acc in a.curve]}
    ft = out["arms"]["flat GRPO"]["t_target"]
    for n, r in out["arms"].items():
        if ft is None:
            r["ratio"], r["censored"] = None, False
        elif r["t_target"] is not None:
            r["ratio"], r["censored"] = ft / r["t_target"], False
        else:
            r["ratio"], r["censored"] = ft / r["t_budget"], True  # an upper bound: the arm never got there
    return out


def fmt(vals: list[float], digits: int = 2) -> str:
    """``mean +- SE`` of ``vals`` (the mean alone for one value)."""
    m, se = mean_se(vals)
    return f"{m:.{digits}f}" if len(vals) == 1 else f"{m:.{digits}f} +- {se:.{digits}f}"


def report(args, runs: list[dict]) -> int | None:
    if missing_arms("bench_branch_headroom", runs, args.arms):  # --report-from files with other --arms: exit 2
        return 2
    n = len(runs)
    task = f"big-shapes task (target area {args.target_area:g} px^2)" if args.task == "big" else "layout task"
    print(f"\nBranchGRPO on the {task}: {args.steps} steps, "
          f"{args.leaves} leaves / samples per prompt, tree splits {args.splits} x2, {args.prompts} prompt(s) per "
          f"update, lr {args.lr:g}, {args.eval_prompts} eval prompts; flat GRPO {args.flat_iters} iterations; target = "
          f"before + {args.target_frac:g} x flat's gain; {n} seed(s), mean +- SE\n")
    print("per seed: before -> flat's target; each arm: time to target s (iterations) / ratio t_flat / t_arm")
    for r in runs:
        cells = []
        for name in args.arms:
            a = r["arms"][name]
            if a["ratio"] is None:
                cells.append(f"{name}: -")
            elif a["censored"]:
                cells.append(f"{name}: > {a['t_budget']:.0f} s ({a['iters']} it, not reached) / < {a['ratio']:.2f}")
            else:
                cells.append(f"{name}: {a['t_target']:.0f} s ({a['it_target']:.1f} it) / {a['ratio']:.2f}")
        print(f"  seed {r['seed']}: {r['before']:.3f} -> {r['target']:.3f}; " + "; ".join(cells))
    print()
    hdr = ("| mode          | NFE/iter | train fwd/iter | s/iter | leaf std | time to target s | NFE to target "
           "| ratio t_flat/t_mode | reward @ T | all-correct @ T |")
    print(hdr)
    print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
    for name in args.arms:
        arms = [r["arms"][name] for r in runs]
        got = [a for a in arms if a["t_target"] is not None]
        ratios = [a["ratio"] for a in arms if a["ratio"] is not None]
        cens = sum(a["censored"] for a in arms)
        t_cell = (fmt([a["t_target"] for a in got], 0)
                  + (f" ({len(got)}/{n} reached)" if len(got) < n else "")) if got else "not reached"
        nfe_cell = fmt([a["nfe_target"] for a in got], 0) if got else "-"
        ratio_cell = (fmt(ratios) + (f" ({cens} censored: upper bounds)" if cens else "")) if ratios else "-"
        print(f"| {name:<13} | {statistics.fmean(a['nfe_per_iter'] for a in arms):8.0f} "
              f"| {statistics.fmean(a['nfe_train_per_iter'] for a in arms):14.0f} "
              f"| {fmt([a['s_per_iter'] for a in arms]):>6} | {statistics.fmean(a['leaf_std'] for a in arms):8.3f} "
              f"| {t_cell} | {nfe_cell} | {ratio_cell} | {fmt([a['reward_T'] for a in arms], 3)} "
              f"| {fmt([a['acc_T'] for a in arms], 3)} |")
    print(f"\nstart (every arm, same LoRA, same eval prompts): reward {fmt([r['before'] for r in runs], 3)}, "
          f"all-correct {fmt([r['before_acc'] for r in runs], 3)}; flat's wall T = {fmt([r['T'] for r in runs], 0)} "
          f"s; a run per seed {fmt([r['wall_run'] for r in runs], 0)} s (evaluations included)")
    print("\nbest evaluation reward within flat's wall T (the curve's points up to T and its reading at T), and each "
          "tree arm's reward @ T minus flat's (paired: same seed, same start):")
    for name in args.arms:
        peaks = [peak_within(r["arms"][name], r["T"]) for r in runs]
        diff = [r["arms"][name]["reward_T"] - r["arms"]["flat GRPO"]["reward_T"] for r in runs]
        print(f"  {name:<13} best {fmt(peaks, 3)}" + ("" if name == "flat GRPO" else f"; @ T - flat {fmt(diff, 3)}"))
    if all("move_per_iter" in r["arms"][name] for r in runs for name in args.arms):
        print("\npolicy movement (LoRA, all iterations of the arm's budget): ||delta theta|| per update; net "
              "displacement / path length (1: every update in the same direction); iterations to target")
        for name in args.arms:
            arms = [r["arms"][name] for r in runs]
            its = [a["it_target"] for a in arms if a["it_target"] is not None]
            print(f"  {name:<13} {fmt([a['move_per_iter'] for a in arms], 4)} per update; net/path "
                  f"{fmt([a['move_net'] / a['move_path'] for a in arms], 3)}; iterations to target "
                  + (fmt(its, 1) + (f" ({len(its)}/{len(arms)} reached)" if len(its) < len(arms) else "")
                     if its else "not reached"))
    uncovered = [(r["seed"], n) for r in runs for n, a in r["arms"].items() if not a["covered_T"]]
    if uncovered:
        print(f"(arms whose budget ended before flat's T, read at their last evaluation: {uncovered})")
    print("\nevaluation curves (iteration:reward/all-correct; seconds = iterations x the arm's s/iter):")
    for r in runs:
        for name in args.arms:
            a = r["arms"][name]
            print(f"  seed {r['seed']} {name:<13} ({a['s_per_iter']:.2f} s/iter) "
                  + " ".join(f"{i}:{v:.4f}/{acc:.3f}" for i, v, acc in a["curve"]))


def _splits(text: str) -> list[int]:
    try:
        out = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--splits {text!r}: expected comma-separated step indices like "
                                         "0,3,6,9") from None
    if out != sorted(set(out)) or out[0] < 0:
        raise argparse.ArgumentTypeError(f"--splits {text!r}: expected increasing step indices >= 0")
    return out


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (or --seed-list), one interleaved run each")
    ap.add_argument("--seed-list", default=None, help="comma-separated seeds instead of 0..N-1")
    ap.add_argument("--flat-iters", type=int, default=30, help="flat GRPO's budget in iterations (its wall is T)")
    ap.add_argument("--overrun", type=float, default=1.25,
                    help="a tree arm's budget in flat's cost units, as a multiple of flat's (> 1 so it covers T)")
    ap.add_argument("--eval-every", type=int, default=4, help="flat iterations (their cost) between evaluations")
    ap.add_argument("--target-frac", type=float, default=0.8, help="flat's target: before + this x flat's final gain")
    ap.add_argument("--steps", type=int, default=10, help="denoising steps of every arm (the demo's 10)")
    ap.add_argument("--splits", type=_splits, default=[0, 2, 4, 6],
                    help="tree split steps (factor 2 each): the reference's 0,3,6,9 of 20 (every ~0.15 of the "
                         "trajectory from the start) at 10 steps")
    ap.add_argument("--prompts", type=int, default=1, help="prompts per update, every arm")
    ap.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate of the LoRA, every arm")
    ap.add_argument("--eta", type=float, default=0.7, help="SDE noise level, every arm")
    ap.add_argument("--eval-prompts", type=int, default=64, help="fixed evaluation prompts (the same for every arm)")
    ap.add_argument("--eval-steps", type=int, default=10, help="ODE steps of the evaluation")
    ap.add_argument("--task", default="big", help="the reward: " + "; ".join(f"{k} = {v}" for k, v in TASKS.items()))
    ap.add_argument("--target-area", type=float, default=TARGET_AREA, help="the big task's object area in px^2")
    ap.add_argument("--arms", default=",".join(ARMS),
                    help=f"comma-separated subset of {', '.join(ALL_ARMS)} (flat first; default: the first four)")
    ap.add_argument("--model-path", default="builtin:shapes_sd3")
    ap.add_argument("--out", default="/tmp/bench_branch_headroom", help="trainer output dirs (nothing is written)")
    ap.add_argument("--json-out", default=None, help="also write the per-seed results to this JSON file")
    ap.add_argument("--report-from", default=None,
                    help="comma-separated --json-out files (e.g. seeds run as separate processes): print their "
                         "combined table and run nothing (the other flags must be the runs' own, for the header)")
    ap.add_argument("--small", action="store_true",
                    help="seconds: 6 steps, splits 0,2,4 (8 leaves), 2 flat iterations, 8 eval prompts, 1 seed")
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--small" in argv:  # the small mode's values are defaults: flags given with it still win
        ap.set_defaults(steps=6, splits=[0, 2, 4], flat_iters=2, eval_every=1, eval_prompts=8, eval_steps=4, seeds=1)
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    args.arms = [a.strip() for a in args.arms.split(",")]
    bad = [a for a in args.arms if a not in ALL_ARMS]
    problems = []
    if bad or not args.arms or args.arms[0] != "flat GRPO" or len(set(args.arms)) < len(args.arms):
        problems.append(f"--arms {','.join(args.arms)!r}: expected 'flat GRPO' first, then any of "
                        f"{', '.join(ALL_ARMS[1:])} (each once)")
    if args.task not in TASKS:
        problems.append(f"--task {args.task!r}: expected one of {', '.join(TASKS)}")
    if args.splits[-1] >= args.steps:
        problems.append(f"--splits {args.splits}: every split step must be < --steps {args.steps}")
    args.leaves = 2 ** len(args.splits)
    for flag, v, ok in (("--seeds", args.seeds, args.seeds >= 1),
                        ("--flat-iters", args.flat_iters, args.flat_iters >= 2),
                        ("--eval-every", args.eval_every, args.eval_every >= 1),
                        ("--prompts", args.prompts, args.prompts >= 1),
                        ("--eval-steps", args.eval_steps, args.eval_steps >= 1),  # (was: a config's traceback)
                        ("--eval-prompts", args.eval_prompts, args.eval_prompts >= 1),
                        ("--lr", args.lr, args.lr > 0), ("--overrun", args.overrun, args.overrun >= 1),
                        ("--eta", args.eta, args.eta > 0),
                        ("--target-frac", args.target_frac, 0 < args.target_frac <= 1),
                        ("--target-area", args.target_area, args.target_area > 0)):
        if not ok:
            problems.append(f"{flag} {v}: out of range")
    return run_seeds("bench_branch_headroom", args, problems, run_seed, report)


def run_seeds(prog: str, args, problems: list[str], run_seed, report) -> int:
    """The seed driver both tree benches share: ``--seed-list`` (or ``range(--seeds)``) checked with the other flags'
    ``problems`` (the first is printed, exit 2), then either the report of earlier runs
    (``--report-from A.json,B.json``)
    or one ``run_seed(args, seed)`` per seed (``--json-out`` rewritten after each seed, so a killed bench keeps what
    it finished), then ``report(args, runs)`` (its return value, if any, is the exit code: 2 for runs it refuses)."""
    try:
        seeds = parse_seed_list(args.seed_list, args.seeds)
    except ValueError as e:
        problems.append(str(e))
    jo = getattr(args, "json_out", None)
    if jo is not None and not jo.strip():  # (was: taken as "no --json-out": the runs' results written nowhere)
        problems.append(f"--json-out {jo!r} is empty (expected a file path in an existing folder)")
    if jo and not args.report_from and (Path(jo).is_dir() or not Path(jo).absolute().parent.is_dir()):
        problems.append(f"--json-out {jo!r}: expected a file path in an existing folder (written after each seed)")
    out = getattr(args, "out", None)
    if out is not None and args.report_from is None:  # the runs' folder, before the first run (was: a symlink loop
        from grpo.preflight import check_writable_dir  # or a file there failed at the first seed's run)

        try:
            check_writable_dir(out, "--out")
        except ValueError as e:
            problems.append(str(e))
    if problems:
        print(f"{prog}: {problems[0]}", file=sys.stderr)
        return 2
    runs = []
    if args.report_from is not None:  # (an empty --report-from is refused there, not taken as "run the bench")
        try:
            runs = read_json_runs(args.report_from)
        except ValueError as e:
            print(f"{prog}: {e}", file=sys.stderr)
            return 2
        return report(args, runs) or 0
    for seed in seeds:
        t = time.perf_counter()
        runs.append(run_seed(args, seed))
        print(f"  seed {seed} done in {time.perf_counter() - t:.0f} s", flush=True)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(runs))
    return report(args, runs) or 0


if __name__ == "__main__":
    raise SystemExit(main())

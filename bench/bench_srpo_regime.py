"""SRPO where a binary reward gives little signal: most groups all-fail (issue 32, item 4).

The regime: ``configs/vla/tabletop_reach_one_progress.yaml`` (the base VLA ``builtin:tabletop_base``, pretrained on
the other tabletop tasks, fine-tuned on reach_one) with **one** demo instead of five, which leaves the SFT start at
~0.1 held-out success (0.125 on the validation states 1000000+ for seed 0, where the regime was chosen), so that with
8 episodes per group most groups have no success. A binary reward gives such a group all-zero advantages; SRPO
grades its failures by latent distance to the batch's other successes of the task (SRPO's own ``task`` rule). Arms,
each a fresh ``python -m vla_rl.cli train`` process of that file, same ``seed`` per pair (so the same SFT start:
equal success after SFT, checked here):

* ``srpo_progress``     SRPO with the learned ``progress`` encoder (``vla-rl fit-encoder
                         configs/vla/fit_progress_encoder.yaml``, fitted once into OUT, never on reach_one) and the
                         all-failure groups kept (``rl.success_band=[-0.5,1.0]``: every group but the all-success ones);
* ``binary``            ``rl.reward=binary``, the recipe's band (only mixed groups train: DAPO's dynamic sampling, the
                         strongest binary setting; an all-failure group's advantages are 0 under a binary reward
                         anyway);
* ``srpo_random_conv``  as ``srpo_progress`` with ``srpo.encoder=random_conv`` (the untrained encoder).
* ``srpo_progress_mixed`` (``--arms``, not in the default three) SRPO with the learned encoder and the recipe's band:
                         only mixed groups train, as binary's, so the two differ only in how a mixed group's
                         failures are graded (latent progress vs 0): the all-failure groups' share of the effect.
* ``srpo_random_conv_mixed`` (``--arms``) as ``srpo_progress_mixed`` with ``srpo.encoder=random_conv``: whether the
                         learned encoder or any grading of a mixed group's failures makes the difference.
* ``srpo_progress_global`` (``--arms``) as ``srpo_progress`` (all-failure groups kept) with ``grpo.std_mode=global``:
                         every advantage divided by the batch's reward std instead of its group's, so an
                         all-failure group whose progress values barely differ gets advantages of that small size
                         instead of unit scale (Dr.GRPO's argument against per-group scaling; Flow-GRPO's
                         ``global_std``), while a mixed group's success still stands out by ``1 - progress``.
* ``binary_global`` (``--arms``) as ``binary`` with ``grpo.std_mode=global``: the control for that scale change.
* ``sim_progress_global`` (``--arms``) as ``srpo_progress_global`` with ``rl.reward=sim_progress``: the failures
                         graded by SRPO's rule and scale on the *simulator's* own progress of the final state
                         (``rewards.sim_progress``) instead of the encoder's latent distance; the ceiling any
                         encoder could reach with this recipe (a perfect progress signal).
* ``sim_progress_global_n1`` / ``_n2`` / ``_n3`` (``--arms``) as ``sim_progress_global`` with
                         ``rl.sim_progress_noise`` 1 / 2 / 3: the simulator's progress degraded to a signal of Spearman
                         ~0.69 / ~0.43 / ~0.30 with itself (the
                         learned encoder's in-training Spearman here is ~0.14, random_conv's ~0.28: the runs'
                         ``reward/srpo_vs_env_progress_spearman``), so the ceiling becomes a curve: how good an
                         encoder must be to beat binary.
* ``sim_progress_mixed`` (``--arms``) the simulator's progress as the failures' grade (as ``sim_progress_global``)
                         with the recipe's band and scale (as ``binary`` and ``srpo_progress_mixed``): only mixed
                         groups train, so it differs from ``binary`` only in grading a mixed group's failures, and
                         exactly: the ceiling of the mixed-groups-only use of SRPO (the shipped recipes'), where the
                         group rule needs no layout-invariant latent (``bench/diag_progress_ceiling.py``).
* ``srpo_proprio_mixed`` (``--arms``) SRPO on the robot's own state (``srpo.encoder=proprio``, the grip point
                         ``state_dims=[0,1,2]``) with this project's ``group`` rule (a failure against its own initial
                         state's success) and the recipe's band: the latent that ranks a mixed group's failures best
                         without a scene (validation, ``diag_progress_ceiling.py``: reach_one +0.90 under ``group``,
                         +0.15 under ``task``).
* ``srpo_random_conv_group_mixed`` (``--arms``) the same rule and band with ``random_conv`` (the demo recipe's
                         encoder and rule): the control for the latent.
* ``srpo_imagenet_group_mixed`` (``--arms``) ``srpo_random_conv_group_mixed`` with a real pretrained image encoder,
                         ``srpo.encoder=efficientnet_lite0`` (ImageNet weights from the registry): whether an image
                         latent available offline grades a mixed group's failures well enough to beat binary.
* ``srpo_proprio_global`` (``--arms``) ``srpo_proprio_mixed`` with the all-failure groups kept and the batch's scale
                         (``rl.success_band=[-0.5,1.0]``, ``grpo.std_mode=global``, as ``srpo_progress_global``): item
                         4's arm on the robot's own state. A mixed group's failures are graded against its own
                         success (the ``group`` rule); an all-failure group's, having none, against the task's success
                         centres in the batch (SRPO's ``task`` rule, the fallback), where the grip point ranks
                         failures at +0.13 (``diag_progress_ceiling.py``, test states).
* ``srpo_proprio_predicted`` (``--arms``) ``srpo_proprio_global`` with ``srpo.reference=predicted``: an all-failure
                         group's reference is not the task's centres but the grip point a success of *its own* initial
                         state is predicted to end at, from the group's initial frame (kernel ridge on the frozen SFT
                         policy's image features, fitted on the policy's own successful groups so far; used once its
                         leave-one-out R2 >= 0.5 over >= 32 layouts, else the group keeps 0;
                         ``rewards.srpo_reference``).
* ``srpo_proprio_predicted_off`` (``--arms``) ``srpo_proprio_predicted`` with ``srpo.predictor_min_r2=1.0``: the gate
                         never passes, so an all-failure group keeps 0 (kept in the batch, not graded): the ablation
                         of the predictions themselves.

Common overrides (:data:`COMMON`): ``sft.demos_per_task=1``, ``rl.eval_split=test`` (every evaluation, the curve's
points included, runs on the *test* initial states ``rl.test_seed_offset + i`` = 5000000+, which nothing here was
chosen on; nothing stops early), ``--eval-episodes`` evaluation states (64 by default), ``rl.iterations`` /
``rl.eval_every`` from the flags (the cosine lr decays over the run's own length). Reported: every run's curve, mean
+- SE per arm and evaluation point, the paired differences srpo_progress - binary and srpo_progress -
srpo_random_conv per point and of the curve's mean over the RL points, training environment steps per run (the
real-simulator interaction), mean rollout success and groups kept per iteration, walls. ``--reuse`` reads finished
runs of the same config (``run_info.json``) instead of rerunning them.

    python bench/bench_srpo_regime.py --seeds 5 --iterations 20 --eval-every 5 --jobs 2 --out runs/bench_srpo_regime
    python bench/bench_srpo_regime.py --small --out /tmp/x    # seconds: the test's mode
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from arm_runs import bad_args, bad_out, parse_arms, run_cli, run_jobs, seeds_parser  # noqa: E402
from bench_srpo_vs_binary import (  # noqa: E402
    IGNORED,
    SMALL,
    _curve_str,
    _wall_from_metrics,
    eval_curve,
    finished,
    mean_table,
    paired_rows,
    same_start,
    train_run,
)
from claims_toy import mean_se  # noqa: E402

CONFIG = "configs/vla/tabletop_reach_one_progress.yaml"
FIT_CONFIG = "configs/vla/fit_progress_encoder.yaml"
KEEP = "rl.success_band=[-0.5,1.0]"
RANDOM_CONV = ["srpo.encoder=random_conv", "srpo.encoder_path=null"]
PROPRIO = ["srpo.encoder=proprio", "srpo.encoder_path=null", "srpo.reference=group", "srpo.state_dims=[0,1,2]"]
GLOBAL = "grpo.std_mode=global"  # one advantage scale for the whole batch (Flow-GRPO's global_std; Dr.GRPO)
ARMS = {"srpo_progress": [KEEP], "binary": ["rl.reward=binary"],
        "srpo_random_conv": [KEEP, *RANDOM_CONV],
        "srpo_progress_mixed": [], "srpo_random_conv_mixed": [*RANDOM_CONV],
        "srpo_progress_global": [KEEP, GLOBAL], "binary_global": ["rl.reward=binary", GLOBAL],
        "sim_progress_global": [KEEP, GLOBAL, "rl.reward=sim_progress"],
        "sim_progress_global_n1": [KEEP, GLOBAL, "rl.reward=sim_progress", "rl.sim_progress_noise=1.0"],
        "sim_progress_global_n2": [KEEP, GLOBAL, "rl.reward=sim_progress", "rl.sim_progress_noise=2.0"],
        "sim_progress_global_n3": [KEEP, GLOBAL, "rl.reward=sim_progress", "rl.sim_progress_noise=3.0"],
        "sim_progress_mixed": ["rl.reward=sim_progress"],
        "srpo_proprio_mixed": [*PROPRIO],
        "srpo_random_conv_group_mixed": [*RANDOM_CONV, "srpo.reference=group"],
        "srpo_imagenet_group_mixed": ["srpo.encoder=efficientnet_lite0", "srpo.encoder_path=null",
                                      "srpo.reference=group"],
        "srpo_proprio_global": [KEEP, GLOBAL, *PROPRIO],
        "srpo_proprio_predicted": [KEEP, GLOBAL, *PROPRIO, "srpo.reference=predicted"],
        "srpo_proprio_predicted_off": [KEEP, GLOBAL, *PROPRIO, "srpo.reference=predicted", "srpo.predictor_min_r2=1.0"]}
DEFAULT_ARMS = ("srpo_progress", "binary", "srpo_random_conv")  # issue 32 item 4's three arms
PAIRS = (("srpo_progress", "binary"), ("srpo_progress", "srpo_random_conv"), ("srpo_progress_mixed", "binary"),
         ("srpo_progress", "srpo_progress_mixed"), ("srpo_progress_mixed", "srpo_random_conv_mixed"),
         ("srpo_random_conv_mixed", "binary"), ("srpo_progress_global", "binary"),
         ("srpo_progress_global", "binary_global"), ("binary_global", "binary"),
         ("srpo_progress_global", "srpo_progress"), ("sim_progress_global", "binary_global"),
         ("sim_progress_global", "srpo_progress_global"), ("sim_progress_global_n1", "binary_global"),
         ("sim_progress_global_n1", "srpo_progress_global"), ("sim_progress_global_n2", "binary_global"),
         ("sim_progress_global_n2", "srpo_progress_global"), ("sim_progress_global_n3", "binary_global"),
         ("sim_progress_global_n3", "srpo_progress_global"), ("sim_progress_mixed", "binary"),
         ("sim_progress_mixed", "srpo_progress_mixed"), ("srpo_proprio_mixed", "binary"),
         ("srpo_proprio_mixed", "srpo_random_conv_group_mixed"), ("srpo_proprio_mixed", "sim_progress_mixed"),
         ("srpo_random_conv_group_mixed", "binary"), ("srpo_proprio_global", "binary"),
         ("srpo_proprio_global", "srpo_proprio_mixed"),
         ("srpo_proprio_global", "binary_global"), ("srpo_proprio_predicted", "binary"),
         ("srpo_proprio_predicted", "srpo_proprio_global"),
         ("srpo_proprio_predicted", "srpo_proprio_mixed"), ("srpo_proprio_predicted", "srpo_proprio_predicted_off"),
         ("srpo_proprio_predicted_off", "binary"),
         ("srpo_proprio_predicted_off", "srpo_proprio_mixed"), ("srpo_imagenet_group_mixed", "binary"),
         ("srpo_imagenet_group_mixed", "srpo_random_conv_group_mixed"),
         ("srpo_imagenet_group_mixed", "srpo_proprio_mixed"))  # paired differences reported when both arms ran
TASK_STEPS = {"reach_one": 20, "reach": 40}  # --task: the tabletop task and its episode horizon (the recipes')
COMMON = ["sft.demos_per_task=1", "rl.eval_split=test", "rl.num_videos=0", "log.backends=[]"]
SMALL_FIT = ["data.expert_per_task=2", "data.play_per_task=1", "data.expert_tasks=[tabletop/reach]", "train.steps=3",
             "train.batch_episodes=2"]


def arm_args(arm: str, encoder: Path, extra: list[str]) -> list[str]:
    """The overrides of ``arm`` (the progress encoder's path first, so an arm may clear it)."""
    return [f"srpo.encoder_path={encoder}", *COMMON, *ARMS[arm], *extra]


def expected_config(args: list[str], seed: int) -> dict:
    """The resolved config (as ``run_info.json`` stores it) of CONFIG with ``args`` at ``seed``, without IGNORED."""
    from grpo.config import config_to_dict, load_config
    from vla_rl.config import VLARLConfig

    cfg = config_to_dict(load_config(VLARLConfig, str(ROOT / CONFIG), [f"seed={seed}", *args]))
    return {k: v for k, v in cfg.items() if k not in IGNORED}


def fit_encoder(out: Path, small: bool, reuse: bool) -> Path:
    """``vla-rl fit-encoder FIT_CONFIG`` into ``out/encoder.safetensors`` (seed 0; read back with ``reuse``)."""
    path = out / "encoder.safetensors"
    if reuse and path.is_file():
        print(f"  encoder: reused {path}", flush=True)
        return path
    wall = run_cli("fit-encoder", "vla_rl.cli", "fit-encoder", FIT_CONFIG, f"output={path}",
                   *(SMALL_FIT if small else []))
    print(f"  encoder: {path} ({wall:.0f}s)", flush=True)
    return path


def same_encoder(run_dir: Path, want: dict) -> dict:
    """``want`` with ``srpo.encoder_path`` set to the one ``run_dir``'s ``run_info.json`` recorded when the two files
    hold the same bytes (a run directory copied or moved with its bench's ``encoder.safetensors``), else ``want``."""
    info = run_dir / "run_info.json"
    ours = want["srpo"]["encoder_path"]
    if not (info.is_file() and ours):
        return want
    theirs = json.loads(info.read_text())["config"].get("srpo", {}).get("encoder_path")
    if not theirs or theirs == ours or not (Path(theirs).is_file() and Path(ours).is_file()):
        return want
    if hashlib.sha256(Path(theirs).read_bytes()).digest() != hashlib.sha256(Path(ours).read_bytes()).digest():
        return want
    return {**want, "srpo": {**want["srpo"], "encoder_path": theirs}}


def run_arm(arm: str, seed: int, out: Path, encoder: Path, extra: list[str], reuse: bool) -> dict:
    """One training run in a fresh process (or a finished one of the same config read back); curve, wall, episodes."""
    run_dir = out / f"{arm}_seed{seed}"
    args = arm_args(arm, encoder, extra)
    metrics = run_dir / "metrics.jsonl"
    base = expected_config([f"srpo.encoder_path={encoder}", *COMMON, *extra], seed)  # no arm's overrides
    if reuse and finished(run_dir, same_encoder(run_dir, expected_config(args, seed)), base):
        curve = eval_curve(metrics)
        print(f"  {arm} seed {seed}: reused {run_dir}: " + _curve_str(curve), flush=True)
        return {"curve": curve, "wall_s": _wall_from_metrics(metrics), "episodes": _train_episodes(metrics),
                "reused": True}
    curve, wall = train_run(f"{arm} seed {seed}", CONFIG, seed, run_dir, args)
    return {"curve": curve, "wall_s": wall, "episodes": _train_episodes(metrics), "reused": False}


def _train_episodes(metrics: Path) -> dict:
    """The run's training rollouts from ``metrics.jsonl``: environment steps simulated (the real-simulator
    interaction), mean rollout success and mean groups kept per iteration."""
    by_step = {}  # the last record of each iteration (a resumed run logs the iterations it redid again)
    for line in metrics.read_text().splitlines():
        r = json.loads(line)
        if "rollout/env_steps" in r:
            by_step[r["step"]] = r
    recs = list(by_step.values())
    n = max(len(recs), 1)
    return {"env_steps": int(sum(r["rollout/env_steps"] for r in recs)),
            "rollout_success": sum(r["rollout/success_rate"] for r in recs) / n,
            "groups_kept": sum(r["rollout/groups_kept"] for r in recs) / n}


def main(argv: list[str] | None = None) -> int:
    ap = seeds_parser(__doc__, 5, out="runs/bench_srpo_regime", reuse=True)
    ap.add_argument("--iterations", type=int, default=20, help="rl.iterations of every arm")
    ap.add_argument("--eval-every", type=int, default=5, help="rl.eval_every: iterations between test evaluations")
    ap.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                    help=f"comma-separated arms, of {', '.join(ARMS)} (default: issue 32 item 4's three)")
    ap.add_argument("--task", choices=sorted(TASK_STEPS), default="reach_one",
                    help="the tabletop task of every arm (reach_one: the recipe's; reach: the 3-ball reach, the "
                    "recipe with env.tasks and env.max_episode_steps replaced; runs go to OUT/<task>/)")
    ap.add_argument("--eval-episodes", type=int, default=64,
                    help="rl.eval_episodes: test initial states per evaluation (one episode each; resolution 1/N)")
    args = ap.parse_args(argv)
    if bad_out(args.out) or bad_args(args, seeds=1, jobs=1, iterations=1, eval_every=0, eval_episodes=1):
        return 2
    arms = parse_arms(args.arms, ARMS)
    if arms is None:
        return 2
    extra = ((SMALL if args.small else []) + [f"rl.iterations={args.iterations}", f"rl.eval_every={args.eval_every}"]
             + [f"rl.eval_episodes={2 if args.small else args.eval_episodes}"])
    if args.task != "reach_one":  # another task: the recipe's env section replaced
        extra = [f"env.tasks=[tabletop/{args.task}]", f"env.max_episode_steps={TASK_STEPS[args.task]}", *extra]
    from grpo.config import ConfigError, load_config
    from vla_rl.config import VLARLConfig

    try:  # the flags' config, before OUT is made (was: a ConfigError traceback after it, e.g. --eval-episodes 1e9)
        split = load_config(VLARLConfig, str(ROOT / CONFIG), [*COMMON, *extra]).rl.split_line()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.task != "reach_one":  # its runs apart
        out = out / args.task
        out.mkdir(exist_ok=True)
    seeds = list(range(args.seeds))
    print(f"SRPO regime: {CONFIG} {' '.join(COMMON + extra)}, seeds {seeds}, {args.jobs} at once\n{split}")
    t0 = time.time()
    jobs = [(arm, s) for s in seeds for arm in arms]
    try:
        encoder = fit_encoder(out, args.small, args.reuse)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    results = run_jobs(jobs, lambda j: run_arm(j[0], j[1], out, encoder, extra, args.reuse), args.jobs)
    if results is None:
        return 1
    if not same_start(results, seeds, arms, "test success"):  # the same SFT start in every arm of a seed
        return 1
    report(results, seeds, arms)
    print(f"total {time.time() - t0:.0f}s")
    return 0


def report(results: dict, seeds: list[int], arms: tuple[str, ...] | list[str] = DEFAULT_ARMS) -> None:
    """Print the per-run curves, the per-arm means and the paired differences of :data:`PAIRS` whose arms both ran
    (markdown tables)."""
    points = sorted(set.intersection(*(set(r["curve"]) for r in results.values())))
    print("\ntest success per run (iteration 0: after SFT)")
    print("| arm | seed | " + " | ".join(f"@{p}" for p in points)
          + " | training env steps | rollout success | groups kept / it | wall s |")
    print("|---|---|" + "---|" * (len(points) + 4))
    for arm in arms:
        for s in seeds:
            r = results[arm, s]
            print(f"| {arm} | {s} | " + " | ".join(f"{r['curve'][p]:.3f}" for p in points)
                  + f" | {r['episodes']['env_steps']} | {r['episodes']['rollout_success']:.3f} | "
                  f"{r['episodes']['groups_kept']:.1f} | {r['wall_s']:.0f}{' (reused)' if r['reused'] else ''} |")
    auc = mean_table(results, list(arms), seeds, points)
    last = points[-1]
    pairs = [(a, b) for a, b in PAIRS if a in arms and b in arms]
    paired_rows(results, pairs, seeds, points, auc)
    for a, b in pairs:
        d = [results[a, s]["curve"][last] - results[b, s]["curve"][last] for s in seeds]
        m, se = mean_se(d)
        verdict = "holds" if len(d) > 1 and m > 2 * se else "does not hold"
        print(f"final (@{last}) {a} - {b}, paired: {m:+.3f} +- {se:.3f} (ahead in "
              f"{sum(x > 0 for x in d)} of {len(d)} seeds; > 2 SE: {verdict})")

if __name__ == "__main__":
    sys.exit(main())

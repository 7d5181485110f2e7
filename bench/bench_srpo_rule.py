"""SRPO's reference rule on one training state: SRPO's own ``task`` rule vs this project's ``group`` option (issue 32,
item 3), paired over seeds.

The two rules (``rewards/srpo.py``) differ only in what a failure is measured against: ``task`` (siiRL's
``compute_embodied_reward``) the DBSCAN centres of the task's successes in the batch (their raw mean when no cluster
forms), ``group`` the nearest success of the failure's own group (same task and initial state). On a batch of one
group they see the same successes, so this setting isolates the measurement itself.

The setting is ``tests/vla_rl/test_reach_one.py::test_grpo_raises_success_on_its_training_state`` (its calibration):
``configs/vla/tabletop_reach_one.yaml`` from scratch (no base), agentview at 32 px, SFT 1000 steps at lr 1e-3 on 5
demos, then ``--iterations`` GRPO+SRPO iterations of one group of 16 on initial state ``--state`` (not a demo state),
lr 2e-4 constant, eta 1.0, ``random_conv`` encoder. Per seed the SFT is run once (``seed=S`` seeds it) and both rules
start RL from a copy of the same weights. Measured: the stochastic success on that state over 128 episodes (the
policy's sampled actions, fixed noise) before and after RL; reported per run, mean +- SE per rule, and the paired
difference task - group. What this does not measure: held-out states (the rule's effect across layouts, where
``task`` and ``group`` see different successes); that is the demo recipe's 5-seed comparison on the test states.

    python bench/bench_srpo_rule.py --seed-list 0,1,2,3,4 --json-out F      # ~5 min per seed on a free core
    python bench/bench_srpo_rule.py --report-from F1,F2                     # the table of several runs
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from claims_toy import fmt, mean_se  # noqa: E402

RULES = ("task", "group")


def parse(argv=None) -> argparse.Namespace:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    p = ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed-list", default="0", help="comma-separated training seeds")
    p.add_argument("--iterations", type=int, default=30, help="GRPO+SRPO iterations on the state")
    p.add_argument("--state", type=int, default=3, help="the initial state trained on and measured")
    p.add_argument("--episodes", type=int, default=128, help="episodes of the stochastic success measurement")
    p.add_argument("--json-out", default=None, help="write the per-seed results here")
    p.add_argument("--report-from", default=None, help="comma-separated --json-out files: print their table")
    a = p.parse_args(argv)
    try:
        a.seeds = [int(s) for s in a.seed_list.split(",") if s.strip()]
    except ValueError:
        p.exit(2, f"bench_srpo_rule: --seed-list {a.seed_list!r} is not a comma-separated list of integers\n")
    if not a.seeds or min(a.seeds) < 0 or a.state < 0 or a.iterations < 1 or a.episodes < 1 \
            or len(set(a.seeds)) != len(a.seeds):  # (a seed twice: was trained twice, its row counted twice)
        p.exit(2, "bench_srpo_rule: --seed-list must be distinct seeds >= 0, --state >= 0, --iterations and "
                  f"--episodes positive; got {a.seed_list!r}, {a.state}, {a.iterations}, {a.episodes}\n")
    if a.json_out is not None and a.report_from is None:  # (was: an unwritable path failed after every run)
        from grpo.preflight import check_writable_file

        try:
            check_writable_file(a.json_out, "--json-out")
        except ValueError as e:
            p.exit(2, f"bench_srpo_rule: {e}\n")
    return a


def overrides(seed: int, state: int, iterations: int, out: str) -> list[str]:
    """The setting's overrides of ``configs/vla/tabletop_reach_one.yaml`` (the learning test calls it too)."""
    return ["env.kwargs={image_size: 32}", "policy.cameras=[agentview]", f"rl.train_seeds=[{state}]",
            "rl.groups_per_task=1", "grpo.group_size=16", f"rl.iterations={iterations}", "rl.eval_episodes=1",
            "rl.eval_every=0", "rl.num_videos=0", "rl.save_every=100", "rl.lr=2e-4", "rl.lr_schedule=constant",
            "sft.base_policy=null", "sft.steps=1000", "sft.lr=1e-3", "policy.flow.eta=1.0", f"seed={seed}",
            f"output_dir={out}"]


def stochastic_success(tr, state: int, n: int) -> float:
    """Success rate of ``n`` episodes on ``state`` with the policy's sampled actions (fixed noise: generator 123)."""
    import numpy as np
    import torch

    from vla_rl.rollout import EpisodeSpec, run_episodes

    specs = [EpisodeSpec("tabletop/reach_one", state, 0, 10_000 + k) for k in range(n)]
    b = run_episodes(tr.policy, tr.pool, specs, tr.cfg.env.max_episode_steps, stochastic=True,
                     generator=torch.Generator().manual_seed(123), record_frames=False)
    return float(np.mean([e.success for e in b.episodes]))


def run_seed(seed: int, a) -> dict:
    from grpo.config import load_config
    from vla_rl.trainer import VLARLConfig, VLARLTrainer

    recipe = ROOT / "configs/vla/tabletop_reach_one.yaml"
    row = {"seed": seed}
    with tempfile.TemporaryDirectory() as tmp:
        sft_state = None
        for rule in RULES:
            cfg = load_config(VLARLConfig, recipe, overrides(seed, a.state, a.iterations, f"{tmp}/{rule}")
                              + [f"srpo.reference={rule}"])
            t0 = time.time()
            tr = VLARLTrainer(cfg, quiet=True)
            if sft_state is None:
                tr.run_sft()
                sft_state = copy.deepcopy(tr.policy.state_dict())
            else:
                tr.policy.load_state_dict(sft_state)
            tr.sft_done = True
            before = stochastic_success(tr, a.state, a.episodes)
            tr.train()
            after = stochastic_success(tr, a.state, a.episodes)
            row[rule] = {"before": before, "after": after, "wall_s": round(time.time() - t0, 1)}
            print(f"seed {seed} {rule:5s}: {before:.3f} -> {after:.3f} ({row[rule]['wall_s']} s)", flush=True)
    if row["task"]["before"] != row["group"]["before"]:
        raise SystemExit(f"bench_srpo_rule: seed {seed}: the two rules' starts differ "
                         f"({row['task']['before']} vs {row['group']['before']}): not the same SFT weights")
    return row


def report(rows: list[dict]) -> str:
    lines = ["| rule | before | after | gain |", "|---|---|---|---|"]
    for rule in RULES:
        b = [r[rule]["before"] for r in rows]
        af = [r[rule]["after"] for r in rows]
        lines.append(f"| {rule} | {fmt(b)} | {fmt(af)} | {fmt([x - y for x, y in zip(af, b)])} |")
    diff = [r["task"]["after"] - r["group"]["after"] for r in rows]
    m, se = mean_se(diff)
    lines.append(f"| task - group (paired, after) | | {fmt(diff)} | |")
    seeds = ", ".join(f"{r['seed']}: task {r['task']['before']:.3f} -> {r['task']['after']:.3f}, group "
                      f"{r['group']['after']:.3f}" for r in rows)
    verdict = "more than 2 SE" if se > 0 and abs(m) > 2 * se else "within 2 SE"
    return "\n".join(lines) + f"\nper seed ({len(rows)}): {seeds}\ntask - group after RL: {fmt(diff)} ({verdict})"


def main(argv=None) -> int:
    a = parse(argv)
    if a.report_from:
        rows = []
        for f in a.report_from.split(","):
            path = Path(f)
            if not path.is_file():  # (a FIFO too: reading it would block)
                what = "is not a regular file" if path.exists() else "does not exist"
                print(f"bench_srpo_rule: --report-from file {f!r} {what} (expected a --json-out file)", file=sys.stderr)
                return 2
            try:
                got = json.loads(path.read_text())["rows"]
                rows += [r for r in got if isinstance(r, dict) and isinstance(r["seed"], int)]
            except (ValueError, KeyError, TypeError) as e:  # not JSON, or not a --json-out file
                print(f"bench_srpo_rule: --report-from file {f!r}: not a --json-out file ({type(e).__name__}: {e}; "
                      "expected a JSON object whose 'rows' are the per-seed results)", file=sys.stderr)
                return 2
        try:
            print(report(sorted(rows, key=lambda r: r["seed"])))
        except (KeyError, TypeError, ValueError) as e:
            print(f"bench_srpo_rule: --report-from {a.report_from!r}: rows lack {e} (not --json-out files of this "
                  "bench)", file=sys.stderr)
            return 2
        return 0
    rows = [run_seed(s, a) for s in a.seeds]
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"args": vars(a) | {"seeds": a.seeds}, "rows": rows}, indent=1))
    print(report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

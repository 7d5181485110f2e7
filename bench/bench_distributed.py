"""Scaling of GRPO iteration throughput from 1 to 2 processes (CPU, gloo), measured side by side.

Runs the core's toy GRPO job (``diffusion-rl toy``, ``grpo.demo``) over the same global batch with 1 process and with
``torchrun --nproc_per_node 2``, and reads the per-iteration wall times back from ``metrics.jsonl``.
The global batch is split in equal shards, so ideal scaling halves the per-iteration time.

It then does the same for the diffusion trainer (``diffusion-rl train`` on the tiny SD3, pixel space, the
closed-form stand-in reward of the tests): rollout throughput (global final samples / slowest rank's rollout time)
and whole-iteration throughput, flat GRPO and BranchGRPO trees, 1 vs 2 processes side by side, as ratios.

And for the VLA trainer (``vla-rl train`` on sims' tabletop/reach at 64 px, a few SFT steps, GRPO+SRPO): rollout
throughput (global episodes and env steps per second of the slowest rank's rollout) and whole-iteration throughput,
1 vs 2 processes over the same global batch of episodes (each rank runs half of them with its own envs).

    python bench/bench_distributed.py [--iterations 30] [--prompts 16] [--diffusion-iterations 6] [--skip-toy]
                                      [--skip-diffusion] [--vla-iterations 4] [--vla-groups 4] [--skip-vla]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grpo.metrics import read_jsonl  # noqa: E402


def run(nproc: int, out: Path, iterations: int, prompts: int) -> float:
    args = ["configs/grpo/toy_flow.yaml", f"output_dir={out}", f"train.iterations={iterations}",
            f"train.prompts_per_iter={prompts}",
            "model.pretrain_steps=50", "train.eval_samples=16", "train.save_every=100000", "model.hidden=512"]
    cmd = [sys.executable, "-m", "diffusion_rl.cli", "toy", *args] if nproc == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "-m", "diffusion_rl.cli", "toy",
         *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env, capture_output=True, cwd=Path(__file__).resolve().parents[1])
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "loss/total" in r]
    times = [r["time"] for r in rows]
    steady = times[len(times) // 3:]  # skip warm-up
    return (steady[-1] - steady[0]) / (len(steady) - 1)


# the diffusion workloads: same global batch for 1 and 2 processes (flat: samples split 50/50; tree: one tree each)
DIFFUSION = {
    "flat": ("configs/diffusion/tiny_sd3_flat.yaml", ["grpo.group_size=16", "sampler.num_steps=10"]),
    "tree": ("configs/diffusion/tiny_sd3_branch.yaml", ["sampler.num_steps=10", "branch.split_steps=[2,4,6,8]",
                                                       "branch.branch=[2]"]),
}
DIFFUSION_BASE = ["prompts.source=list", "prompts.prompts=[a red circle,a blue square,a green triangle,a red square]",
                  "prompts.num_eval=2", "reward.name=tests.diffusion_rl.conftest:redness", "model.tiny.with_vae=false",
                  "model.height=32", "model.width=32", "train.log_images=false", "train.eval_steps=2",
                  "train.save_every=100000", "train.prompts_per_iter=2", "resume=false"]


def run_diffusion(nproc: int, name: str, out: Path, iterations: int) -> dict[str, float]:
    """Median (after a warm-up iteration) rollout and iteration throughput in final samples/s."""
    path, over = DIFFUSION[name]
    args = ["train", path, f"output_dir={out}", f"train.iterations={iterations}", *DIFFUSION_BASE, *over]
    cmd = [sys.executable, "-m", "diffusion_rl.cli", *args] if nproc == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "-m", "diffusion_rl.cli", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, check=True, env=env, capture_output=True, cwd=ROOT)
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "throughput/rollout_samples_per_s" in r][1:] or \
        [r for r in read_jsonl(out / "metrics.jsonl") if "throughput/rollout_samples_per_s" in r]
    samples = rows[0]["throughput/rollout_samples_per_s"] * rows[0]["time/rollout_s"]
    return {"rollout": statistics.median(r["throughput/rollout_samples_per_s"] for r in rows),
            "iteration": statistics.median(samples / r["time/iter_s"] for r in rows), "samples": samples}


# the VLA workload: tasks x groups x G episodes per iteration, split 50/50 over 2 processes
VLA_BASE = ["sft.demos_per_task=1", "sft.steps=10", "rl.eval_episodes=2", "rl.eval_every=0", "rl.num_videos=0",
            "rl.save_every=100000", "resume=false", "grpo.group_size=4", "rl.success_band=[-0.5,1.5]"]


def run_vla(nproc: int, out: Path, iterations: int, groups: int) -> dict[str, float]:
    """Median (after a warm-up iteration) rollout episodes/s and env steps/s, and iteration episodes/s."""
    args = ["train", "configs/vla/tabletop_reach.yaml", f"output_dir={out}", f"rl.iterations={iterations}",
            f"rl.groups_per_task={groups}", *VLA_BASE]
    cmd = [sys.executable, "-m", "vla_rl.cli", *args] if nproc == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "-m", "vla_rl.cli", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, check=True, env=env, capture_output=True, cwd=ROOT)
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "throughput/rollout_episodes_per_s" in r]
    rows = rows[1:] or rows
    episodes = rows[0]["throughput/rollout_episodes_per_s"] * rows[0]["time/rollout_s"]
    return {"episodes": episodes, "rollout_eps": statistics.median(r["throughput/rollout_episodes_per_s"]
                                                                   for r in rows),
            "rollout_steps": statistics.median(r["throughput/rollout_env_steps_per_s"] for r in rows),
            "iteration_eps": statistics.median(episodes / r["time/iteration_s"] for r in rows),
            **{k: statistics.median(r.get(f"time/{k}", 0.0) for r in rows)
               for k in ("rollout_s", "reward_s", "update_s")}}


def print_vla(res: dict[int, dict[str, float]]) -> None:
    one, two = res[1], res[2]
    print("vla-rl train (tabletop/reach 64 px, 40-step episodes, GRPO+SRPO; median after warm-up)")
    print(f"| {'metric':<26} | {'1 process':>10} | {'2 processes':>11} | {'ratio':>5} |")
    print(f"|{'-' * 28}|{'-' * 12}|{'-' * 13}|{'-' * 7}|")
    for name, key in (("rollout episodes/s", "rollout_eps"), ("rollout env steps/s", "rollout_steps"),
                      ("iteration episodes/s", "iteration_eps")):
        print(f"| {name:<26} | {one[key]:>10.2f} | {two[key]:>11.2f} | {two[key] / one[key]:>5.2f} |")
    for name, key in (("s rollout per iteration", "rollout_s"), ("s reward per iteration", "reward_s"),
                      ("s update per iteration", "update_s")):
        ratio = f"{one[key] / two[key]:>5.2f}" if min(one[key], two[key]) > 1e-3 else f"{'n/a':>5}"  # e.g. no update
        print(f"| {name:<26} | {one[key]:>10.2f} | {two[key]:>11.2f} | {ratio} |")
    print(f"({one['episodes']:.0f} episodes per iteration; ratio: 2-process / 1-process throughput (seconds: 1p / 2p), "
          f"ideal 2.00; {os.cpu_count()} CPU cores on this machine, shared)")


def main(argv: list[str] | None = None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser()
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--diffusion-iterations", type=int, default=6)
    ap.add_argument("--skip-toy", action="store_true", help="skip the core toy GRPO job")
    ap.add_argument("--skip-diffusion", action="store_true", help="skip the diffusion trainer")
    ap.add_argument("--skip-vla", action="store_true", help="skip the VLA trainer")
    ap.add_argument("--vla-iterations", type=int, default=4)
    ap.add_argument("--vla-groups", type=int, default=4, help="initial states per iteration (x 4 episodes each)")
    a = ap.parse_args(argv)
    low = {k: getattr(a, k) for k in ("iterations", "diffusion_iterations", "vla_iterations") if getattr(a, k) < 3}
    if low or min(a.prompts, a.vla_groups) < 1:  # (was: a ZeroDivisionError after the runs: s/iter needs 2 steady
        # iterations after the first third)
        ap.error(f"--iterations {a.iterations}, --diffusion-iterations {a.diffusion_iterations}, --vla-iterations "
                 f"{a.vla_iterations}, --prompts {a.prompts}, --vla-groups {a.vla_groups}: expected the iteration "
                 "counts >= 3 and the others >= 1")
    if a.skip_toy and a.skip_diffusion and a.skip_vla:  # (was: exit 0 having measured nothing)
        ap.error("--skip-toy, --skip-diffusion and --skip-vla together leave no job to time; expected at most two of "
                 "them")
    with tempfile.TemporaryDirectory() as d:
        if not a.skip_toy:
            t1 = run(1, Path(d) / "p1", a.iterations, a.prompts)
            t2 = run(2, Path(d) / "p2", a.iterations, a.prompts)
            samples = a.prompts * 16
            print("core toy GRPO (grpo.demo)")
            print(f"{'processes':>10} {'s/iter':>8} {'samples/s':>10}")
            print(f"{1:>10} {t1:8.3f} {samples / t1:10.1f}")
            print(f"{2:>10} {t2:8.3f} {samples / t2:10.1f}")
            print(f"speed-up 1 -> 2 processes: {t1 / t2:.2f}x (ideal 2.00x; {os.cpu_count()} CPU cores on this "
                  "machine)")
            print()
        res = {} if a.skip_diffusion else {(name, n): run_diffusion(n, name, Path(d) / f"{name}{n}",
                                                                    a.diffusion_iterations)
                                           for name in DIFFUSION for n in (1, 2)}
        if not a.skip_vla:
            print_vla({n: run_vla(n, Path(d) / f"vla{n}", a.vla_iterations, a.vla_groups) for n in (1, 2)})
            print()
    if a.skip_diffusion:
        return 0
    print("diffusion-rl train (tiny SD3 32x32, 2 prompts/iter; final samples/s, median after warm-up)")
    print(f"| {'workload':<8} | {'samples/iter':>12} | {'rollout 1p':>10} | {'rollout 2p':>10} | {'ratio':>5} "
          f"| {'iter 1p':>8} | {'iter 2p':>8} | {'ratio':>5} |")
    print(f"|{'-' * 10}|{'-' * 14}|{'-' * 12}|{'-' * 12}|{'-' * 7}|{'-' * 10}|{'-' * 10}|{'-' * 7}|")
    for name in DIFFUSION:
        one, two = res[(name, 1)], res[(name, 2)]
        print(f"| {name:<8} | {one['samples']:>12.0f} | {one['rollout']:>10.1f} | {two['rollout']:>10.1f} "
              f"| {two['rollout'] / one['rollout']:>5.2f} | {one['iteration']:>8.1f} | {two['iteration']:>8.1f} "
              f"| {two['iteration'] / one['iteration']:>5.2f} |")
    print(f"(ratio: 2-process / 1-process throughput; ideal 2.00; {os.cpu_count()} CPU cores on this machine, shared)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

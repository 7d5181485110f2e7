"""Benchmark of ``vla_rl``: binary success reward vs SRPO progress reward, same seeds, same budget, one run.

    python bench/bench_vla.py                                   # small default, a few minutes on 2 CPU cores
    python bench/bench_vla.py --iterations 60 --eval-every 20 --eval-episodes 64
    python bench/bench_vla.py --config configs/vla/tabletop_reach.yaml rl.groups_per_task=4

What it does:

1. one SFT warm-up (the config's demos and steps), saved, evaluated on the held-out initial states;
2. two GRPO arms that start from *that same* SFT policy with the same seed -- so the same training initial
   states, the same env seeds and the same sampling-noise streams at iteration 0 -- and the same number of
   iterations: ``rl.reward=binary`` and ``rl.reward=srpo`` (everything else from the config);
3. per arm: held-out success (deterministic policy, the same held-out states) every ``--eval-every``
   iterations, against iterations and against wall-clock seconds of RL (evaluation time excluded);
   training-rollout success per iteration; mean rollout / reward / update seconds per iteration;
4. policy inference cost: ms per env step of the stochastic chunk sampler (batch of ``G`` envs, one
   chunk per ``n_action_steps`` steps) and of one env step (physics + rendering), measured in isolation.

Output: a table per arm and a JSON summary (``--json PATH`` to write it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from grpo.config import load_config  # noqa: E402
from grpo.metrics import read_jsonl  # noqa: E402
from vla_rl.rollout import EnvPool, obs_to_batch  # noqa: E402
from vla_rl.trainer import VLARLConfig, VLARLTrainer  # noqa: E402


def inference_cost(policy, cfg: VLARLConfig, batch: int, reps: int = 20) -> dict[str, float]:
    """ms per env step of the stochastic chunk sampler at ``batch`` envs, and of ``env.step`` itself."""
    pool = EnvPool(cfg.env.kwargs, cfg.env.video_camera)
    env = pool.get(cfg.env.tasks[0], 1)[0]
    obs, _ = env.reset(seed=0, options={"init_seed": 0})
    b = obs_to_batch([obs] * batch, cfg.policy.cameras, cfg.policy.use_images)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        policy.sample_chunk(b, stochastic=True, generator=gen)
    t0 = time.perf_counter()
    for _ in range(reps):
        policy.sample_chunk(b, stochastic=True, generator=gen)
    per_call = (time.perf_counter() - t0) / reps
    t0, n = time.perf_counter(), 0
    act = np.zeros(env.action_space.shape, dtype=np.float32)
    while time.perf_counter() - t0 < 1.0:
        _, _, term, trunc, _ = env.step(act)
        n += 1
        if term or trunc:
            env.reset(seed=n, options={"init_seed": n})
    env_ms = (time.perf_counter() - t0) / n * 1e3
    pool.close()
    return {"policy_ms_per_call": per_call * 1e3, "batch": batch,
            "policy_ms_per_env_step": per_call * 1e3 / (batch * cfg.policy.n_action_steps),
            "env_ms_per_step": env_ms}


def arm(cfg: VLARLConfig, reward: str, sft_dir: Path, out: Path) -> dict:
    cfg.rl.reward = reward
    cfg.output_dir = str(out)
    cfg.sft.init_policy, cfg.sft.base_policy = str(sft_dir), None  # both arms start from the one SFT policy
    t0 = time.time()
    res = VLARLTrainer(cfg, quiet=True).train()
    wall = time.time() - t0
    rows = read_jsonl(out / "metrics.jsonl")
    its = [r for r in rows if "rollout/success_rate" in r]
    evals = [r for r in rows if "eval/success_rate" in r]
    rl_clock, clock = {}, 0.0
    for r in its:
        clock += r["time/iteration_s"]
        rl_clock[int(r["step"])] = clock
    curve = [{"iteration": int(r["step"]), "rl_seconds": round(rl_clock.get(int(r["step"]), 0.0), 1),
              "success": r["eval/success_rate"], "episode_length": r["eval/episode_length"]} for r in evals]
    mean = lambda k: float(np.mean([r[k] for r in its if k in r])) if any(k in r for r in its) else float("nan")  # noqa: E731
    return {"reward": reward, "curve": curve, "train_success": [round(r["rollout/success_rate"], 3) for r in its],
            "rollout_s": mean("time/rollout_s"), "reward_s": mean("time/reward_s"), "update_s": mean("time/update_s"),
            "iteration_s": mean("time/iteration_s"), "wall_s": wall, "final_success": res["final_success"]}


def main(argv: list[str] | None = None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/vla/tabletop_reach.yaml")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--eval-episodes", type=int, default=32)
    ap.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    ap.add_argument("--json", default=None)
    ap.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = ap.parse_args(argv)
    if args.iterations < 1:
        ap.error(f"--iterations {args.iterations}: expected >= 1 (GRPO iterations per arm)")
    common = list(args.overrides) + [f"rl.iterations={args.iterations}", f"rl.eval_every={args.eval_every}",
                                     f"rl.eval_episodes={args.eval_episodes}", "rl.num_videos=0", "resume=false"]
    from grpo.config import ConfigError

    try:  # the config and the overrides, before any folder is made (was: a traceback after mkdtemp)
        load_config(VLARLConfig, args.config, common + ["output_dir=unused"])
    except ConfigError as e:
        ap.error(str(e))
    from grpo.preflight import check_not_inside_a_run, check_writable_dir, check_writable_file

    try:  # where it writes, before the SFT warm-up (was: a traceback at the end of the run, or in another run's folder)
        if args.json:
            check_writable_file(args.json, "--json")
        if args.out:
            check_writable_dir(args.out, "--out")
            check_not_inside_a_run(args.out, "--out")
            if (Path(args.out) / "run_info.json").is_file():
                raise ValueError(f"--out={args.out!r} is a run directory (it holds run_info.json); expected a folder "
                                 "for the bench's own runs (sft/, binary/, srpo/)")
    except ValueError as e:
        ap.error(str(e))
    torch.set_num_threads(1)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_vla_"))

    # 1. one SFT warm-up shared by both arms
    cfg = load_config(VLARLConfig, args.config, common + [f"output_dir={out / 'sft'}", "rl.iterations=0"])
    t0 = time.time()
    tr = VLARLTrainer(cfg, quiet=True)
    tr.run_sft()
    sft_eval = tr.run_eval("sft", 0, videos=False)
    sft_dir = tr.policy.save_pretrained(out / "sft" / "policy")
    sft_s = time.time() - t0
    cost = inference_cost(tr.policy, cfg, cfg.grpo.group_size * cfg.rl.groups_per_task)
    tr.pool.close()
    print(f"SFT: {cfg.sft.demos_per_task} demos/task, {cfg.sft.steps} steps, held-out success "
          f"{sft_eval.success_rate:.3f} ({len(sft_eval.episodes)} episodes), {sft_s:.0f}s")
    print(f"inference: {cost['policy_ms_per_env_step']:.3f} ms policy per env step (chunk sampler, batch "
          f"{cost['batch']}, {cost['policy_ms_per_call']:.1f} ms per call) vs {cost['env_ms_per_step']:.3f} ms per "
          "env.step (physics + render)")

    # 2. the two arms, same seeds and budget
    results = []
    for reward in ("binary", "srpo"):
        c = load_config(VLARLConfig, args.config, common + [f"output_dir={out / reward}"])
        r = arm(c, reward, sft_dir, out / reward)
        results.append(r)
        print(f"\n[{reward}] {args.iterations} iterations, {r['wall_s']:.0f}s wall (incl. evaluation); per iteration: "
              f"rollout {r['rollout_s']:.2f}s, reward {r['reward_s']:.2f}s, update {r['update_s']:.2f}s, total "
              f"{r['iteration_s']:.2f}s")
        print(f"  {'iteration':>9} {'RL seconds':>10} {'held-out success':>16} {'episode length':>14}")
        if not r["curve"] or r["curve"][0]["iteration"] != 0:
            print(f"  {0:>9} {0.0:>10.1f} {sft_eval.success_rate:>16.3f} {sft_eval.mean_length:>14.1f}")
        for p in r["curve"]:
            print(f"  {p['iteration']:>9} {p['rl_seconds']:>10.1f} {p['success']:>16.3f} {p['episode_length']:>14.1f}")
        print("  training-rollout success per iteration: " + " ".join(f"{x:.2f}" for x in r["train_success"]))
    summary = {"sft_success": sft_eval.success_rate, "sft_seconds": sft_s, "inference": cost, "arms": results,
               "iterations": args.iterations, "config": args.config, "overrides": args.overrides}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)  # (was: FileNotFoundError after the whole run)
        Path(args.json).write_text(json.dumps(summary, indent=1))
    print("\nsummary: " + ", ".join(f"{r['reward']}: final held-out {r['final_success']:.3f}" for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""LIBERO through sims: steps/s with and without cameras (one env, and VectorEnv workers), env creation, reset
time (soft: the loaded model reset, hard: rebuilt from XML), memory per worker.

    python bench/bench_libero.py [--task libero/libero_spatial/0] [--steps 40] [--image-size 128] [--workers 1 2]
                                 [--expert-states 50]   # + the scripted LIBERO-Spatial expert's success per task

Steps are a fixed still action (``[0]*6 + [-1]``), so the numbers are the simulator's and renderer's cost, not a
policy's. Each reset loads init state ``init_seed % 50`` and runs ``settle_steps`` (10, LIBERO's evaluation
protocol) unless ``--settle 0``. Results are printed as a table; docs/LIBERO.md holds the measured ones.
"""

from __future__ import annotations

import os
import time

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")

STILL = np.array([0, 0, 0, 0, 0, 0, -1], np.float32)


def rss_mb(pid: int) -> float:
    """Resident set size of process ``pid`` in MB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def single_env(task: str, cameras: tuple, image_size: int, steps: int, settle: int) -> dict:
    import sims

    t0 = time.perf_counter()
    env = sims.make(task, image_size=image_size, cameras=cameras, settle_steps=settle)
    made = time.perf_counter() - t0
    env.reset(options={"init_seed": 0})  # warm-up (first render)
    t0 = time.perf_counter()
    for s in range(3):
        env.reset(options={"init_seed": s})
    soft = (time.perf_counter() - t0) / 3
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(STILL)
    sps = steps / (time.perf_counter() - t0)
    env.close()
    return {"make_s": made, "reset_s": soft, "steps_per_s": sps}


def hard_reset(task: str, cameras: tuple, image_size: int, settle: int) -> dict:
    """Reset time with hard_reset=True, and whether it starts from the same observation as a soft reset."""
    import sims

    soft = sims.make(task, image_size=image_size, cameras=cameras, settle_steps=settle)
    hard = sims.make(task, image_size=image_size, cameras=cameras, settle_steps=settle, hard_reset=True)
    hard.reset(options={"init_seed": 0})
    t0 = time.perf_counter()
    for s in (1, 2):
        o_h, _ = hard.reset(options={"init_seed": s})
    dt = (time.perf_counter() - t0) / 2
    o_s, _ = soft.reset(options={"init_seed": 2})
    state_diff = float(np.abs(o_h["state"] - o_s["state"]).max())
    img_diff = max((int(np.abs(o_h["images"][c].astype(int) - o_s["images"][c]).max()) for c in cameras), default=0)
    soft.close()
    hard.close()
    return {"hard_reset_s": dt, "state_diff": state_diff, "image_diff": img_diff}


def vector(task: str, n: int, cameras: tuple, image_size: int, steps: int, settle: int) -> dict:
    import sims

    t0 = time.perf_counter()
    v = sims.VectorEnv(task, num_envs=n,
                       env_kwargs={"image_size": image_size, "cameras": cameras, "settle_steps": settle})
    made = time.perf_counter() - t0
    v.reset(options={"init_seed": list(range(n))})
    t0 = time.perf_counter()
    v.reset(options={"init_seed": list(range(n))})
    reset = time.perf_counter() - t0
    acts = np.stack([STILL] * n)
    t0 = time.perf_counter()
    for _ in range(steps):
        v.step(acts)
    sps = n * steps / (time.perf_counter() - t0)
    mem = [rss_mb(w.proc.pid) for w in v._workers]
    v.close()
    return {"make_s": made, "reset_s": reset, "steps_per_s": sps, "rss_mb": float(np.mean(mem))}


def expert_rates(n_states: int) -> None:
    """The scripted LIBERO-Spatial expert over init states 0..n_states-1 of every task, no camera."""
    import sims

    total = 0
    for task in range(10):
        env = sims.make(f"libero/libero_spatial/{task}", cameras=())
        ok, lengths = 0, []
        for s in range(n_states):
            env.reset(options={"init_seed": s})
            for t in range(env.max_steps):
                *_, term, trunc, info = env.step(env.expert_action())
                if term or trunc:
                    break
            ok += info["success"]
            if info["success"]:
                lengths.append(t + 1)
        env.close()
        total += ok
        print(f"libero_spatial/{task}: expert {ok}/{n_states}, mean steps of successes "
              f"{np.mean(lengths) if lengths else float('nan'):.0f}", flush=True)
    print(f"expert total {total}/{10 * n_states}")


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="libero/libero_spatial/0")
    p.add_argument("--steps", type=int, default=40, help="env steps timed per measurement (no camera: x5)")
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--settle", type=int, default=10, help="settle steps per reset (LIBERO's protocol: 10)")
    p.add_argument("--workers", type=int, nargs="*", default=[1, 2], help="VectorEnv sizes to time")
    p.add_argument("--expert-states", type=int, default=0,
                   help="also run the scripted LIBERO-Spatial expert on this many init states per task (50: all)")
    a = p.parse_args(argv)
    if a.steps < 1 or a.image_size < 16 or a.settle < 0 or any(w < 1 for w in a.workers):
        p.error("need --steps >= 1, --image-size >= 16, --settle >= 0, --workers >= 1")
    if not 0 <= a.expert_states <= 50:  # (was: a negative count accepted, the timings run, the expert skipped)
        p.error(f"--expert-states {a.expert_states}: expected 0 (none) to 50 (LIBERO's init states per task)")
    if not a.task.startswith("libero/"):  # (was: a TypeError traceback: settle_steps is a LIBERO env's option)
        p.error(f"--task {a.task!r}: expected a LIBERO task, libero/<suite>/<i> (e.g. libero/libero_spatial/0)")
    setups = [("none", ()), ("agentview", ("agentview",)), ("agentview+wrist", ("agentview", "wrist"))]
    print(f"{a.task}, {a.image_size} px, settle {a.settle}, MUJOCO_GL={os.environ.get('MUJOCO_GL', '(probed)')}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'cameras':<18}{'make s':>8}{'reset s':>9}{'steps/s':>9}")
    for name, cams in setups:
        r = single_env(a.task, cams, a.image_size, a.steps * (5 if not cams else 1), a.settle)
        print(f"{name:<18}{r['make_s']:>8.1f}{r['reset_s']:>9.2f}{r['steps_per_s']:>9.1f}")
    h = hard_reset(a.task, ("agentview",), a.image_size, a.settle)
    print(f"hard reset (rebuild from XML) {h['hard_reset_s']:.2f} s; vs soft reset, same init_seed: state max diff "
          f"{h['state_diff']:.2g}, agentview max pixel diff {h['image_diff']}")
    print(f"{'workers':<8}{'cameras':<18}{'make s':>8}{'reset s':>9}{'steps/s':>9}{'RSS MB/worker':>15}")
    for n in a.workers:
        for name, cams in setups[:2]:
            r = vector(a.task, n, cams, a.image_size, a.steps * (5 if not cams else 1), a.settle)
            print(f"{n:<8}{name:<18}{r['make_s']:>8.1f}{r['reset_s']:>9.2f}{r['steps_per_s']:>9.1f}{r['rss_mb']:>15.0f}")
    if a.expert_states > 0:
        expert_rates(a.expert_states)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark of ``sims``: env steps/s per core, overhead over raw MuJoCo, vector-env scaling.

    python bench/bench_sims.py                      # < 2 min on 2 CPU cores
    python bench/bench_sims.py --seconds 2 --workers 1 2 4 8 --image-size 128

For every built-in tabletop task, with and without images (agentview, ``--image-size`` px):

- env: ``env.step`` with fixed random actions in [-1, 1] (episodes reset when they end; the reset cost is
  included, the time to produce actions is not);
- raw: the same compiled model and the same physics trajectory driven directly in the same process:
  replay the env's recorded controls, one ``mujoco.mj_step(model, data, n_substeps)`` per step
  (+ ``update_scene`` and ``render`` per camera), ``mj_setState`` where the env reset;
- overhead = env seconds per step / raw seconds per step (target < 1.3x).

Steps/s are per core: both loops are timed in process CPU time (``time.process_time``, which also
counts a software GL renderer's threads), so other jobs on a shared machine inflate neither side.

Then the success rates of the scripted expert and of uniform random actions per task over
``--rate-seeds`` held-out seeds (1000, 1001, ...; the tests use 0..99), robosuite Lift steps/s (no camera / agentview)
and ``sims.VectorEnv`` total steps/s for 1..N subprocess workers on ``tabletop/pick_place`` with images (ideal scaling
is min(N, cores) x).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import sims  # noqa: E402
from sims.tabletop.tasks import TASKS  # noqa: E402


def timed(fn, seconds: float, batch: int = 20) -> float:
    """Calls per second of ``fn`` over at least ``seconds`` (after a short warm-up)."""
    for _ in range(3):
        fn()
    n, t0 = 0, time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return n / dt


def bench_env(task: str, cams: tuple[str, ...], size: int, seconds: float, rounds: int = 3) -> tuple[float, float]:
    """(env steps/s, raw steps/s) over the *same* physics trajectory: the env runs for ``seconds`` with
    fixed random actions (``n`` steps), then again recording its controls and reset states, then
    ``rounds`` interleaved timings of the env (``n`` steps) and of the raw loop replaying those controls
    (resets are a cheap ``mj_setState`` there, part of the env's overhead); best round of each."""
    import mujoco

    env = sims.make(task, cameras=cams, image_size=size)
    actions = np.random.default_rng(0).uniform(-1, 1, size=(4096, 4)).astype(np.float32)
    spec = mujoco.mjtState.mjSTATE_PHYSICS

    def run(n: int | None, record: bool):
        env.reset(options={"init_seed": 0})
        ctrls, resets = [], {0: env.physics_state()} if record else None
        k, t0 = 0, time.process_time()
        while (n is None and time.process_time() - t0 < seconds) or (n is not None and k < n):
            _, _, term, trunc, _ = env.step(actions[k & 4095])
            k += 1
            if record:
                ctrls.append(env.data.ctrl.copy())
            if term or trunc:
                env.reset(options={"init_seed": k})
                if record:
                    resets[k] = env.physics_state()
        return k, time.process_time() - t0, ctrls, resets

    run(20, False)  # warm-up (renderer creation)
    n, _, _, _ = run(None, False)
    _, _, ctrls, resets = run(n, True)

    m, d = env.model, mujoco.MjData(env.model)
    renderer = sims.render.make_renderer(m, size, size) if cams else None
    nsub = env.n_substeps

    def raw() -> float:
        t0 = time.process_time()
        for k in range(n):
            if k in resets:
                mujoco.mj_setState(m, d, resets[k], spec)
            d.ctrl[:] = ctrls[k]
            mujoco.mj_step(m, d, nsub)
            for c in cams:
                renderer.update_scene(d, camera=c)
                renderer.render()
        return time.process_time() - t0

    # interleaved rounds, best of each: the machine is shared, so a slow round says little
    env_dt, raw_dt = [], []
    for _ in range(rounds):
        env_dt.append(run(n, False)[1])
        raw_dt.append(raw())
    env_sps, raw_sps = n / min(env_dt), n / min(raw_dt)
    if renderer is not None:
        renderer.close()
    env.close()
    return env_sps, raw_sps


def success_rates(task: str, seeds: range) -> dict[str, float]:
    """Fraction of successful episodes (run to the end) of the scripted expert and of uniform random
    actions from each ``init_seed`` in ``seeds``."""
    env = sims.make(task, cameras=())
    rng = np.random.default_rng(0)
    policies = {"expert": sims.expert_action, "random": lambda e: rng.uniform(-1.0, 1.0, 4)}
    out = {}
    for name, act in policies.items():
        wins = 0
        for s in seeds:
            env.reset(options={"init_seed": s})
            while True:
                _, _, term, trunc, info = env.step(act(env))
                if term or trunc:
                    break
            wins += bool(info["success"])
        out[name] = wins / len(seeds)
    env.close()
    return out


def bench_robosuite(seconds: float, size: int) -> list[tuple[str, float]]:
    out = []
    for cams in ((), ("agentview",)):
        try:
            env = sims.make("robosuite/Lift", cameras=cams, image_size=size, max_steps=10_000)
        except Exception as e:  # noqa: BLE001 - report and go on
            out.append((f"Lift {'images' if cams else 'no images'}: unavailable ({type(e).__name__})", float("nan")))
            continue
        env.reset(options={"init_seed": 0})
        zero = np.zeros(7)
        for _ in range(5):  # numba JIT on the first steps
            env.step(zero)
        out.append((f"robosuite/Lift {'agentview ' + str(size) + 'px' if cams else 'no images'}",
                    timed(lambda: env.step(zero), seconds, batch=5)))
        env.close()
    return out


def bench_vector(workers: list[int], seconds: float, size: int) -> list[tuple[int, float]]:
    out = []
    for n in workers:
        v = sims.VectorEnv("tabletop/pick_place", num_envs=n, env_kwargs={"image_size": size})
        v.reset(options={"init_seed": list(range(n))})
        rng = np.random.default_rng(0)
        acts = rng.uniform(-1, 1, size=(64, n, 4)).astype(np.float32)
        k = [0]

        def step():
            _, _, term, trunc, _ = v.step(acts[k[0] & 63])
            k[0] += 1
            done = term | trunc
            if done.any():
                v.reset(options={"init_seed": list(range(k[0], k[0] + n)), "reset_mask": done})

        out.append((n, n * timed(step, seconds, batch=10)))
        v.close()
    return out


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=0.4, help="timing window per measurement")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5, help="interleaved env/raw timing rounds (best of each)")
    p.add_argument("--workers", type=int, nargs="*", default=None,
                   help="vector env sizes (default 1 2 4 up to 2x cores; none: skip)")
    p.add_argument("--rate-seeds", type=int, default=100, help="seeds per task for the success rates (0: skip)")
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS), help="tabletop tasks to time")
    p.add_argument("--no-robosuite", action="store_true")
    args = p.parse_args(argv)
    if not (0 < args.seconds < float("inf") and args.rounds >= 1 and 16 <= args.image_size <= 1024
            and args.rate_seeds >= 0 and all(w >= 1 for w in args.workers or [])):
        p.error(f"--seconds {args.seconds}, --rounds {args.rounds}, --image-size {args.image_size}, --rate-seeds "
                f"{args.rate_seeds}, --workers {args.workers}: expected a finite --seconds > 0, --rounds >= 1, "
                "--image-size in [16, 1024], --rate-seeds >= 0 and --workers >= 1")
    t_start = time.time()
    size = args.image_size
    print(f"sims benchmark: MUJOCO_GL={os.environ.get('MUJOCO_GL')}, {os.cpu_count()} CPU cores, image {size}x{size}\n")
    print(f"{'task':22s} {'images':>8s} {'env steps/s':>12s} {'raw steps/s':>12s} {'overhead':>9s}")
    ratios = []
    for t in args.tasks:
        for cams in ((), ("agentview",)):
            env_sps, raw_sps = bench_env(f"tabletop/{t}", cams, size, args.seconds, rounds=args.rounds)
            ratio = raw_sps / env_sps  # env seconds per step / raw seconds per step
            ratios.append((t, bool(cams), ratio))
            print(f"{'tabletop/' + t:22s} {'yes' if cams else 'no':>8s} {env_sps:12.0f} {raw_sps:12.0f} {ratio:8.2f}x")
    with_img = [r for _, c, r in ratios if c]
    print(f"\noverhead env/raw: with images max {max(with_img):.2f}x (mean {np.mean(with_img):.2f}x), "
          f"without images max {max(r for _, c, r in ratios if not c):.2f}x; target < 1.3x")

    if args.rate_seeds > 0:
        seeds = range(1000, 1000 + args.rate_seeds)
        print(f"\nsuccess rate over {len(seeds)} seeds per task (init_seed {seeds.start}..{seeds.stop - 1}), episodes "
              "run to the end:")
        print(f"{'task':22s} {'expert':>8s} {'random':>8s}")
        for t in args.tasks:
            r = success_rates(f"tabletop/{t}", seeds)
            print(f"{'tabletop/' + t:22s} {r['expert']:8.1%} {r['random']:8.1%}")

    if not args.no_robosuite:
        print()
        for name, sps in bench_robosuite(args.seconds * 4, size):
            print(f"{name:40s} {sps:8.1f} steps/s")

    cores = os.cpu_count() or 1
    workers = args.workers if args.workers is not None else sorted({1, 2, 4, min(8, 2 * cores)})
    if not workers:
        print(f"\ntotal {time.time() - t_start:.1f} s")
        return 0
    print(f"\nVectorEnv tabletop/pick_place, agentview {size}px, subprocess workers (wall-clock steps/s):")
    res = bench_vector(workers, args.seconds * 3, size)
    base = res[0][1] / res[0][0]
    print(f"{'workers':>8s} {'steps/s':>10s} {'speedup':>8s} {'ideal':>6s}")
    for n, sps in res:
        print(f"{n:8d} {sps:10.0f} {sps / base:7.2f}x {min(n, cores):5d}x")
    print(f"\ntotal {time.time() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

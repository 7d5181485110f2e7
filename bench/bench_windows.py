"""Memory and speed of the world model's training windows: materialized (``wm_windows``) vs cut per batch
(``WindowSet``, what the loop trains on), side by side in one run.

    python bench/bench_windows.py                     # tabletop/reach, 48 episodes x 40 steps at 64 px, ~1 min
    python bench/bench_windows.py --episodes 96 --image-size 128

Prints the bytes each form holds, the time to build it, the time to draw a batch of windows, and the time of a
tiny world model's training step on each (the batches are identical, so are the losses), then extrapolates the
bytes to ``configs/world_models/loop_robosuite_lift.yaml`` (288 episodes of 80 steps at 128 px).

Measured (2 CPU cores shared with one other job, defaults, 21 s): bytes held 612.2 MB materialized vs 24.4 MB
WindowSet (25.1x less; the formula gives the same); building 0.83 s vs 0.00 s; a batch of 16 windows 0.98 ms vs
1.41 ms; a training step of a tiny world model 84.6 ms vs 83.3 ms (the cutting is lost in the step's noise), same
losses; loop_robosuite_lift.yaml: 30.5 GB vs 1.15 GB (27x less).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402


def _nbytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    return 0


def window_bytes(episodes: int, steps: int, image: int, tc: int, k: int, state_dim: int, action_dim: int,
                 text_dim: int = 64) -> tuple[int, int]:
    """(materialized, WindowSet) bytes for ``episodes`` of ``steps`` actions at ``image`` px (state-aware windows)."""
    frame = 3 * image * image
    windows = episodes * (steps + 1 - k)  # padded starts: T+1 + (tc-1) - tc - k + 1 = T + 1 - k
    per_window = 4 * ((tc + k + 1) * frame + k * (action_dim + 1 + state_dim) + text_dim)
    trajectories = episodes * ((steps + 1) * (frame + 4 * (2 + state_dim)) + 4 * steps * action_dim)
    index = windows * 16 + episodes * 4 * text_dim
    return windows * per_window, trajectories + index


def main(argv: list[str] | None = None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)
    from world_models.data import collect_sans
    from world_models.video_wm import VideoWorldModel, WorldModelConfig, train_world_model
    from world_models.windows import WindowSet, wm_windows

    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=48)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=200)
    args = p.parse_args(argv)
    if not (args.episodes >= 8 and args.steps >= 1 and args.batches >= 1 and 16 <= args.image_size <= 1024):
        p.error(f"--episodes {args.episodes}, --steps {args.steps}, --batches {args.batches}, --image-size "
                f"{args.image_size}: expected --episodes >= 8 (split over the episode kinds), --steps, --batches >= 1 "
                "and --image-size in [16, 1024]")
    if args.episodes > 100_000:  # (was: 1e9 episodes to record, started)
        p.error(f"--episodes {args.episodes}: expected at most 100000 (recorded before the timing)")
    n = args.episodes
    t0 = time.time()
    data = collect_sans("tabletop/reach", {"success": n // 2, "near": n // 4, "failure": n // 8, "random": n - n // 2
                                           - n // 4 - n // 8}, horizon=args.steps, image_size=args.image_size,
                        env_kwargs={"object_state": True})
    print(f"data: {len(data)} episodes x {args.steps} steps at {args.image_size} px ({time.time() - t0:.1f} s)")
    tc, k, text_dim = 2, 4, 64

    t0 = time.perf_counter()
    mat = wm_windows(data, tc, k, text_dim=text_dim, state=True)
    t_mat = time.perf_counter() - t0
    t0 = time.perf_counter()
    ws = WindowSet(data, tc, k, text_dim=text_dim, state=True)
    t_ws = time.perf_counter() - t0
    b_mat = _nbytes(list(vars(mat).values()))
    b_ws = _nbytes([data.frames, data.actions, data.success, data.progress, data.state, ws._start, ws._episode,
                    ws.text])

    gen = torch.Generator().manual_seed(0)
    idx = [torch.randint(len(ws), (16,), generator=gen) for _ in range(args.batches)]
    t0 = time.perf_counter()
    for i in idx:
        mat.take(i)
    t_bmat = (time.perf_counter() - t0) / len(idx)
    t0 = time.perf_counter()
    for i in idx:
        ws.take(i)
    t_bws = (time.perf_counter() - t0) / len(idx)

    cfg = WorldModelConfig(image_size=args.image_size, context_frames=tc, chunk=k, sampling_steps=2, layers=1,
                           ffn_dim=32, patch=8, state_dim=data.state.shape[-1])
    step_s, losses = [float("inf")] * 2, [None, None]
    for rep in range(3):  # alternating, best of 3: shared cores make single timings noisy
        for j, windows in enumerate((mat, ws)):
            torch.manual_seed(0)
            wm = VideoWorldModel(cfg)
            t0 = time.perf_counter()
            losses[j] = train_world_model(wm, windows, steps=20, batch=16)
            step_s[j] = min(step_s[j], (time.perf_counter() - t0) / 20)

    print(f"{'':24s}{'materialized':>14s}{'WindowSet':>14s}{'ratio':>8s}")
    print(f"{'bytes held':24s}{b_mat / 1e6:12.1f}MB{b_ws / 1e6:12.1f}MB{b_mat / b_ws:7.1f}x")
    print(f"{'build':24s}{t_mat:13.2f}s{t_ws:13.2f}s")
    print(f"{'batch of 16 windows':24s}{t_bmat * 1e3:12.2f}ms{t_bws * 1e3:12.2f}ms{t_bws / t_bmat:7.2f}x")
    print(f"{'train step (tiny WM)':24s}{step_s[0] * 1e3:12.1f}ms{step_s[1] * 1e3:12.1f}ms"
          f"{step_s[1] / step_s[0]:7.2f}x")
    print(f"same losses on both: {losses[0] == losses[1]}")
    mat_b, ws_b = window_bytes(288, 80, 128, 2, 4, 19, 7)
    print(f"loop_robosuite_lift.yaml (288 episodes x 80 steps, 128 px, state 19, actions 7): materialized "
          f"{mat_b / 1e9:.1f} GB vs WindowSet {ws_b / 1e9:.2f} GB ({mat_b / ws_b:.0f}x less)")
    est_mat, est_ws = window_bytes(len(data), args.steps, args.image_size, tc, k, data.state.shape[-1],
                                   data.actions.shape[-1])
    print(f"(the formula on this run's data: {est_mat / 1e6:.1f} MB vs {est_ws / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Scaling of GRPO iteration throughput from 1 to 2 processes (CPU, gloo), measured side by side.

Runs the core's toy GRPO job (``grpo.demo``) over the same global batch with 1 process and with
``torchrun --nproc_per_node 2``, and reads the per-iteration wall times back from ``metrics.jsonl``.
The global batch is split in equal shards, so ideal scaling halves the per-iteration time.

    python bench/bench_distributed.py [--iterations 30] [--prompts 16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grpo.metrics import read_jsonl  # noqa: E402


def run(nproc: int, out: Path, iterations: int, prompts: int) -> float:
    args = ["configs/grpo/toy_flow.yaml", f"output_dir={out}", f"train.iterations={iterations}", f"train.prompts_per_iter={prompts}",
            "model.pretrain_steps=50", "train.eval_samples=16", "train.save_every=100000", "model.hidden=512"]
    cmd = [sys.executable, "-m", "grpo.demo", *args] if nproc == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "-m", "grpo.demo", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env, capture_output=True, cwd=Path(__file__).resolve().parents[1])
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "loss/total" in r]
    times = [r["time"] for r in rows]
    steady = times[len(times) // 3:]  # skip warm-up
    return (steady[-1] - steady[0]) / (len(steady) - 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=16)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        t1 = run(1, Path(d) / "p1", a.iterations, a.prompts)
        t2 = run(2, Path(d) / "p2", a.iterations, a.prompts)
    samples = a.prompts * 16
    print(f"{'processes':>10} {'s/iter':>8} {'samples/s':>10}")
    print(f"{1:>10} {t1:8.3f} {samples / t1:10.1f}")
    print(f"{2:>10} {t2:8.3f} {samples / t2:10.1f}")
    print(f"speed-up 1 -> 2 processes: {t1 / t2:.2f}x (ideal 2.00x; {os.cpu_count()} CPU cores on this machine)")


if __name__ == "__main__":
    main()

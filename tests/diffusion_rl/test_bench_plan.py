"""bench/bench_plan.py --small: one real CPU iteration of SD3.5-Medium's transformer (full width, one block of each
type) matches the planner's fake-tensor prediction of FLOPs and peak memory within 15%."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_plan_small_within_tolerance():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_plan.py"), "--small"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {line[:30].strip(): line.split() for line in res.stdout.splitlines()
            if line.startswith(("FLOPs", "step peak"))}
    assert set(rows) == {"FLOPs fwd+bwd (TFLOP)", "step peak, tracker (GiB)", "step peak, RSS delta (GiB)"}
    for name, cols in rows.items():
        assert abs(float(cols[-1]) - 1) <= 0.15, (name, cols)
    assert "within tolerance" in res.stdout

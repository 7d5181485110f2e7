"""bench/bench_remote_reward.py --smoke: every arm runs (reward in process, served with a fixed and a per-item
latency, serial and overlapped), the table is printed, and the served reward trains the in-process weights."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_remote_reward_smoke():
    import os

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "bench/bench_remote_reward.py", "--smoke"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    lines = res.stdout.strip().splitlines()
    num = r"\s+([\d.]+)"
    line_re = r"^(none \(in process\)|[\d.]+ s per \w+)\s+(\d+)"  # label, reward.overlap
    rows = [m.groups() for ln in lines
            if (m := re.match(line_re + num * 3 + r"\s+([\d.]+)?" + num + "$", ln))]
    assert [(r[0].split()[-1], int(r[1])) for r in rows] == [("process)", 1), ("request", 1), ("request", 2),
                                                             ("item", 1), ("item", 2)]
    assert [r[5] for r in rows][:2] == [None, "1.00"] and rows[3][5] == "1.00" and rows[2][5] and rows[4][5]
    assert all(float(x) > 0 for r in rows for x in (r[2], r[4], r[6]))
    assert lines[-1].endswith("final LoRA weights bit for bit: True")

"""The GPU check's SmolVLA stage (bench/gpu_check.py) in its CPU dry mode, where lerobot is importable: one GRPO
iteration of LeRobot's SmolVLA with a tiny backbone through the same code the GPU run uses at full width."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_smolvla_stage_runs_one_grpo_iteration_dry(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry", "--stages", "smolvla", "--out",
                        str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = json.loads((tmp_path / "out" / "gpu_check.json").read_text())["rows"]
    assert [x["stage"] for x in rows] == ["smolvla"]
    s = rows[0]
    assert s["status"] == "ok" and s["seconds"] > 0 and s["params_b"] > 0 and s["peak_gib"] is None
    assert "| smolvla | ok |" in (tmp_path / "out" / "gpu_check.md").read_text()

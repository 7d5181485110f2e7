"""bench/bench_sims.py runs end to end (tiny budget) and prints the overhead ratio, success rates and scaling."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_sims.py"


def test_bench_smoke(capsys, can_render):
    if not can_render:
        pytest.skip("no headless OpenGL backend (the bench times images)")
    spec = importlib.util.spec_from_file_location("bench_sims", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--seconds", "0.02", "--rounds", "1", "--rate-seeds", "2", "--tasks", "reach",
                       "--image-size", "16", "--no-robosuite", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "tabletop/reach" in out and "overhead env/raw" in out and "target < 1.3x" in out
    assert "success rate over 2 seeds" in out and "100.0%" in out  # the expert column
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.split()[:2] == ["workers", "steps/s"])
    assert lines[i + 1].split()[0] == "1"

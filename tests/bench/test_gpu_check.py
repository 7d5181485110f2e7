"""The GPU check's CPU dry mode (bench/gpu_check.py --dry): every stage runs its code at tiny sizes on the CPU, and
every stage or measurement that needs CUDA is a row that says it was skipped and why."""

import json
import os
import subprocess
import sys
from pathlib import Path

from .benchutil import load_bench, markdown_table

ROOT = Path(__file__).resolve().parents[2]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# why the dry mode skips a CUDA part: no GPU here, or (on a GPU node) the dry mode itself
SKIP_WHY = "dry mode" if _cuda() else "no CUDA device"


def _run(*args, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_dry_mode_runs_each_stage_and_reports_the_cuda_parts_as_skipped(tmp_path):
    # --no-plan: the plan's fake-tensor traces cost ~1 min of CPU and are covered by tests/diffusion_rl's plan tests;
    # everything else is the GPU run's code
    r = _run("--dry", "--no-plan", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rep = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    rows = {x["stage"]: x for x in rep["rows"]}
    assert rep["dry"] is True
    # 1. the CUDA tests: found, collected, not run
    t = rows["cuda_tests"]
    assert t["status"] == "skipped" and SKIP_WHY in t["reason"] and t["collected"] > 0
    assert "tests/diffusion_rl/test_device.py" in t["files"]
    # 2. one iteration of each strategy on the shrunk SD3.5 architecture; memory needs CUDA
    for s in ("flat", "tree", "pool"):
        d = rows[f"diffusion/sd3.5-medium/{s}"]
        assert d["status"] == "ok", d
        assert d["seconds"] > 0 and d["nfe"] > 0 and d["peak_gib"] is None and SKIP_WHY in d["memory_reason"]
        assert d["resolution"] == "64x64" and "shrunk" in d["arch"]
    assert rows["diffusion/sd3.5-medium/tree"]["nfe"] < rows["diffusion/sd3.5-medium/pool"]["nfe"]
    # 3. FP8: the emulation runs and agrees with bf16 to FP8's precision; the real kernels need Hopper
    e = rows["fp8/emulated"]
    assert e["status"] == "ok" and 0 < e["rel_err_vs_bf16"] < 0.05 and e["candidates_per_s"] > 0
    assert rows["fp8/real"]["status"] == "skipped" and "not a CUDA GPU" in rows["fp8/real"]["reason"]
    # 4. SmolVLA: this environment has no lerobot
    assert rows["smolvla"]["status"] == "skipped" and "lerobot" in rows["smolvla"]["reason"]
    # the markdown table holds the same rows
    md = (tmp_path / "out" / "gpu_check.md").read_text()
    table = markdown_table(md, "| stage |")
    assert [c[0] for c in table] == [x["stage"] for x in rep["rows"]]
    assert all(c[1] in ("ok", "skipped") for c in table)


def test_cuda_test_files_finds_every_test_that_skips_without_cuda(tmp_path):
    gc = load_bench("gpu_check")
    found = gc.cuda_test_files()
    grep = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                  if "skipif(not torch.cuda.is_available()" in p.read_text().replace("\n", " ")
                  and not p.relative_to(ROOT).as_posix().startswith("tests/lerobot/"))
    assert found == grep and len(found) >= 4
    # a new CUDA test anywhere under tests/ is picked up (a folder of its own here)
    (tmp_path / "tests" / "x").mkdir(parents=True)
    (tmp_path / "tests" / "x" / "test_new.py").write_text(
        "import pytest, torch\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='cuda')\ndef test_a(): pass\n")
    (tmp_path / "tests" / "test_cpu.py").write_text("def test_b(): pass\n")
    assert gc.cuda_test_files(tmp_path) == ["tests/x/test_new.py"]


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    r = _run("--dry", "--stages", "diffusion,warp", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "warp" in r.stderr
    assert r.stderr.startswith("error: --stages") and not (tmp_path / "o").exists()
    r = _run("--dry", "--steps", "0", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--steps 0" in r.stderr and not (tmp_path / "o").exists()
    r = _run("--dry", "--repeat", "0", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--repeat 0" in r.stderr and not (tmp_path / "o").exists()
    (tmp_path / "f").write_text("")
    r = _run("--dry", "--stages", "cuda_tests", "--out", str(tmp_path / "f"))
    assert r.returncode == 2 and "is a file" in r.stderr
    if not _cuda():  # no --dry on a machine without CUDA (on a GPU node this would run the full-size stage)
        r = _run("--stages", "fp8", "--out", str(tmp_path / "o"))
        assert r.returncode == 2 and "no CUDA device" in r.stderr and "--dry" in r.stderr
    assert "Traceback" not in r.stderr


def test_the_full_size_iterations_load_for_every_strategy_and_model(tmp_path):
    """The GPU run's configs (the SD3.5-M recipe at one prompt; FLUX with its own model section) load as each
    strategy: no refused key, the intended mode, the recipe's 512 px and 20 steps."""
    import torch

    gc = load_bench("gpu_check")
    gc._import_torch()
    ctx = gc.Ctx(False, torch.device("cpu"), tmp_path, tmp_path, None)
    for arch in ("sd3.5-medium", "flux.1-dev"):
        cfgs = {s: gc.strategy_config(ctx, s, tmp_path / s, arch) for s in gc.STRATEGIES}
        assert [(c.branch.enabled, c.pool.enabled) for c in cfgs.values()] == [(False, False), (True, False),
                                                                               (False, True)]
        assert all(c.model.height == c.model.width == 512 and c.sampler.num_steps == 20 for c in cfgs.values())
        assert all(c.model.kind == {"sd3.5-medium": "sd3", "flux.1-dev": "flux"}[arch] for c in cfgs.values())
        assert cfgs["pool"].pool.quant.format == "fp8" and cfgs["pool"].pool.pool_size == 16
        assert cfgs["tree"].branch.make_tree(20).num_leaves == 16


def test_a_run_stopped_midway_keeps_the_rows_it_finished(tmp_path, monkeypatch):
    """The report is written after every diffusion strategy and every stage: a run cut short (a time limit, a CUDA
    fault that ends the process; here an interrupt in the second strategy's iteration) leaves the finished rows,
    marked incomplete. On the first H100 run, FLUX's measured rows were lost that way."""
    import pytest

    gc = load_bench("gpu_check")
    real, calls = gc.timed_step, []

    def stop_on_second(ctx, trainer):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(ctx, trainer)

    monkeypatch.setattr(gc, "timed_step", stop_on_second)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        gc.main(["--dry", "--no-plan", "--stages", "diffusion,fp8", "--out", str(out)])
    rep = json.loads((out / "gpu_check.json").read_text())
    assert rep["complete"] is False and [r["stage"] for r in rep["rows"]] == ["diffusion/sd3.5-medium/flat"]
    assert rep["rows"][0]["status"] == "ok" and rep["rows"][0]["seconds"] > 0
    assert "Incomplete" in (out / "gpu_check.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "gpu_check.md"]  # no temp file left
    # --repeat 2: the second (warm) iteration is the one reported, the first's seconds kept beside it
    monkeypatch.setattr(gc, "timed_step", real)
    assert gc.main(["--dry", "--no-plan", "--stages", "diffusion", "--repeat", "2", "--out", str(out)]) == 0
    rows = json.loads((out / "gpu_check.json").read_text())["rows"]
    assert all(r["iterations"] == 2 and r["first_seconds"] > 0 and r["seconds"] > 0 for r in rows) and len(rows) == 3
    assert "(iteration 2; the first took" in (out / "gpu_check.md").read_text()
    # a finished run says it is complete
    assert gc.main(["--dry", "--no-plan", "--stages", "fp8", "--out", str(out)]) == 0
    rep = json.loads((out / "gpu_check.json").read_text())
    assert rep["complete"] is True and [r["stage"] for r in rep["rows"]] == ["fp8/emulated", "fp8/real"]
    assert "Incomplete" not in (out / "gpu_check.md").read_text()

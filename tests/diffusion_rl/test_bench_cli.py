"""The benchmark prints its ratios; the CLI dry run prints the cost per iteration."""

import importlib.util
from pathlib import Path

from diffusion_rl.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    """bench/bench_branch.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_branch", ROOT / "bench" / "bench_branch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_prints_ratios(capsys, tmp_path):
    mod = _bench()
    assert mod.main(["--iterations", "1", "--size", "8", "--out", str(tmp_path / "test_bench")]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line.split("|") for line in out.splitlines() if line.startswith("| ")}
    assert float(rows["BranchGRPO"][5]) >= 4.0  # NFE ratio to flat
    assert float(rows["Branch+prune"][6]) > float(rows["BranchGRPO"][6])  # pruning cuts backward passes


def test_bench_equal_wall_clock_over_seeds(capsys, tmp_path):
    mod = _bench()
    assert mod.main(["--iterations", "1", "--size", "8", "--budget-s", "0.3", "--seeds", "2",
                     "--out", str(tmp_path / "test_bench")]) == 0
    out = capsys.readouterr().out
    table = out.split("equal wall clock:")[1]
    for name in ("flat GRPO", "BranchGRPO", "Branch+prune", "Branch-Mix"):
        assert len([ln for ln in out.splitlines() if ln.startswith(f"  {name} seed ")]) == 2  # one run per seed
        row = next(ln for ln in table.splitlines() if ln.startswith(f"  {name} "))
        assert row.count("+-") == 2  # before and after as mean +- standard error
    assert "over 2 seeds" in table


def test_cli_dry_run(tmp_path, capsys):
    """A good config's dry run exits 0 (the bad-input code 2 is a failure here), prints the resolved config and the
    cost per iteration, and writes nothing."""
    out_dir = tmp_path / "run"
    assert main(["train", str(ROOT / "configs/diffusion/tiny_sd3_branch.yaml"), f"output_dir={out_dir}",
                 "prompts.source=list", "prompts.prompts=[a red circle]", "reward.name=jpeg_compressibility",
                 "--dry-run"]) == 0
    out = capsys.readouterr()
    assert "split_steps" in out.out and "reward:\n  name: jpeg_compressibility" in out.out  # the resolved config
    assert "BranchGRPO: per iteration NFE" in out.out and "backward passes" in out.out
    assert not out_dir.exists()

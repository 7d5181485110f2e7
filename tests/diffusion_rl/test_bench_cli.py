"""The benchmark prints its ratios; the CLI dry run prints the cost per iteration."""

import importlib.util
from pathlib import Path

from diffusion_rl.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_bench_prints_ratios(capsys):
    spec = importlib.util.spec_from_file_location("bench_branch", ROOT / "bench" / "bench_branch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--iterations", "1", "--size", "8", "--out", str(ROOT / "runs" / "test_bench")]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line.split("|") for line in out.splitlines() if line.startswith("| ")}
    assert float(rows["BranchGRPO"][5]) >= 4.0  # NFE ratio to flat
    assert float(rows["Branch+prune"][6]) > float(rows["BranchGRPO"][6])  # pruning cuts backward passes


def test_cli_dry_run(tmp_path, capsys):
    assert main(["train", str(ROOT / "configs/diffusion/tiny_sd3_branch.yaml"), f"output_dir={tmp_path}",
                 "prompts.source=list", "prompts.prompts=[a red circle]", "reward.name=redness", "--dry-run"]) in (0, 2)
    out = capsys.readouterr()
    assert "split_steps" in out.out  # the resolved config is printed before anything is built

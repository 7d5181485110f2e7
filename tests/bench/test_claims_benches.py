"""The issue-25 seed-claim benches run end to end in their --small mode (so they cannot rot) and their pieces agree
with the core: the sign of every arm's advantage in bench_mcgrpo is that of grpo.advantages.group_advantages."""

import pytest
import torch

from grpo.advantages import group_advantages

from .benchutil import load_bench, markdown_table


def test_mcgrpo_small_prints_flips_and_rewards(capsys):
    mod = load_bench("bench_mcgrpo")
    assert mod.main(["--small"]) == 0
    out = capsys.readouterr().out
    flips = markdown_table(out, "| snapshot |")
    assert len(flips) == 2 * 2 * 2  # snapshots x noises x the first two G
    assert all(len(row) == 3 + 4 for row in flips)  # snapshot, noise, G + four arms
    for row in flips:
        for cell in row[3:]:
            rate, carry = cell.split(" (")
            assert 0.0 <= float(rate) <= 1.0 and 0.0 < float(carry.rstrip(")")) <= 1.0
    train = markdown_table(out, "| noise | G |")
    assert len(train) == 2 * 2
    assert all(cell.count("+-") == 1 for row in train for cell in row[2:])  # mean +- SE per arm
    paired = markdown_table(out, "| noise | G | median - mean |")
    assert len(paired) == 2 * 2 and all(len(row) == 2 + 4 for row in paired)


def test_mcgrpo_small_is_seeded(capsys):
    mod = load_bench("bench_mcgrpo")
    outs = []
    for _ in range(2):
        assert mod.main(["--small", "--noises", "student", "--seeds", "1"]) == 0
        outs.append([ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("|")])
    assert outs[0] == outs[1]


@pytest.mark.parametrize("arm", ["mean", "mean_G+1", "median", "median_std"])
@pytest.mark.parametrize("n", [2, 3, 5, 9])
def test_mcgrpo_signs_match_the_core(arm, n):
    mod = load_bench("bench_mcgrpo")
    gen = torch.Generator().manual_seed(n)
    r = torch.rand(50, n, generator=gen)
    r[:5] = (r[:5] > 0.5).float()  # some groups with ties, as binary rewards give
    sign, carry = mod.advantage_signs(r, arm)
    core = group_advantages(r.reshape(-1), torch.arange(50).repeat_interleave(n), mod.METHOD[arm])
    core_carry = (core.mask & (core.values != 0)).view(50, n)
    assert torch.equal(carry, core_carry)
    assert torch.equal(sign[carry], torch.sign(core.values.view(50, n))[carry])


def test_mcgrpo_bad_input_exits_2(capsys):
    mod = load_bench("bench_mcgrpo")
    assert mod.main(["--small", "--noises", "pink"]) == 2
    assert "pink" in capsys.readouterr().err


def test_gdpo_small_prints_components(capsys):
    mod = load_bench("bench_gdpo")
    assert mod.main(["--small", "--lrs", "2e-3"]) == 0
    out = capsys.readouterr().out
    for task in ("dense_sparse", "two_binary"):
        rows = {r[0]: r for r in markdown_table(out, f"| {task} lr 0.002 arm |")}
        assert set(rows) == {"pretrained start", "GRPO (summed)", "GDPO"}
        assert all(len(r) == 1 + 3 + 2 for r in rows.values())  # two components, total, two within-group stds
        assert all(cell.count("+-") == 1 for r in rows.values() for cell in r[1:])
        assert f"{task}, lr 0.002: GDPO - summed GRPO, paired over seeds: " in out and out.count(" +- ") > 10


def test_gdpo_bad_input_exits_2(capsys):
    mod = load_bench("bench_gdpo")
    assert mod.main(["--small", "--hit-radius", "0"]) == 2
    assert "--hit-radius" in capsys.readouterr().err
    assert mod.main(["--small", "--tasks", "three_binary"]) == 2
    assert "three_binary" in capsys.readouterr().err
    assert mod.main(["--small", "--lrs", "fast"]) == 2
    assert "'fast'" in capsys.readouterr().err


@pytest.mark.slow  # two 1-iteration shapes trainings in subprocesses, ~20 s
def test_pool_vs_plain_small_runs_both_arms(capsys, tmp_path):
    mod = load_bench("bench_pool_vs_plain")
    assert mod.main(["--small", "--out", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    rows = {r[0]: r for r in markdown_table(out, "| arm |")}
    assert set(rows) == {"pool", "plain"}
    assert all(cell.count("+-") == 1 for r in rows.values() for cell in r[1:])
    assert rows["pool"][1] == rows["plain"][1]  # same pretrained start: same reward before
    assert (tmp_path / "runs" / "pool_seed0" / "metrics.jsonl").is_file()
    assert "pool - plain, reward after, paired over seeds" in out


def test_pool_vs_plain_bad_input_exits_2(capsys, tmp_path):
    mod = load_bench("bench_pool_vs_plain")
    assert mod.main(["--small", "--seeds", "0", "--out", str(tmp_path)]) == 2
    assert "--seeds" in capsys.readouterr().err

"""bench/bench_srpo_vs_binary.py (issue 25's SRPO vs binary row) runs end to end in its --small mode: both reward
arms from the same SFT start, the per-run curves, mean +- SE per arm and the paired difference; --reuse reads the
finished runs back instead of rerunning them (the same numbers); bad arguments exit 2 with one line."""

import pytest

from .benchutil import load_bench, markdown_table


@pytest.mark.slow  # two tiny VLA trainings in subprocesses, ~20-40 s
def test_small_runs_both_arms_from_one_sft_start_and_reuse_reads_them_back(capsys, tmp_path):
    mod = load_bench("bench_srpo_vs_binary")
    runs = tmp_path / "runs"
    assert mod.main(["--small", "--out", str(runs)]) == 0
    out = capsys.readouterr().out
    per_run = {(r[0], r[1]): r for r in markdown_table(out, "| arm | seed |")}
    assert set(per_run) == {("srpo", "0"), ("binary", "0")}
    assert per_run["srpo", "0"][2] == per_run["binary", "0"][2]  # @0: the same SFT policy's held-out success
    assert all(0.0 <= float(c) <= 1.0 for r in per_run.values() for c in r[2:5])  # @0, @1, @2
    arms = {r[0]: r for r in markdown_table(out, "| arm | @0")}
    assert set(arms) == {"srpo", "binary", "srpo - binary (paired)"}
    assert all(c.count("+-") == 1 for r in arms.values() for c in r[1:] if c)
    assert "final (@2) srpo - binary, paired over seeds:" in out
    for arm in ("srpo", "binary"):
        info = (runs / f"{arm}_seed0" / "run_info.json").read_text()
        assert f'"reward": "{arm}"' in info

    assert mod.main(["--small", "--reuse", "--out", str(runs)]) == 0
    again = capsys.readouterr().out
    assert again.count("reused") >= 4  # two progress lines, two table cells
    assert ({(r[0], r[1]): r[2:5] for r in markdown_table(again, "| arm | seed |")}
            == {k: r[2:5] for k, r in per_run.items()})


@pytest.mark.parametrize("args, word", [(["--seeds", "0"], "--seeds"), (["--jobs", "0"], "--jobs"),
                                        (["--iterations", "-1"], "--iterations"),
                                        (["--eval-every", "-2"], "--eval-every")])
def test_bad_arguments_exit_2_with_one_line(capsys, tmp_path, args, word):
    mod = load_bench("bench_srpo_vs_binary")
    assert mod.main(["--small", *args, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert word in err and "\n" not in err
    assert not any(tmp_path.iterdir())  # nothing written


def test_reuse_ignores_fields_added_after_a_run_only_at_their_base_value():
    """A saved run lacks a config field added to the code later: reused when the arm holds the base config's value
    (every run had it before it existed), not when the arm sets another."""
    mod = load_bench("bench_srpo_vs_binary")
    got = {"rl": {"iterations": 3, "reward": "binary"}, "seed": 0}
    base = {"rl": {"iterations": 3, "reward": "srpo", "noise": 0.0}, "seed": 0, "new": "x"}
    want = {"rl": {"iterations": 3, "reward": "binary", "noise": 0.0}, "seed": 0, "new": "x"}
    assert mod.without_added_keys(want, got, base) == got
    changed = {**want, "rl": {**want["rl"], "noise": 1.0}}
    assert mod.without_added_keys(changed, got, base) == {**got, "rl": {**got["rl"], "noise": 1.0}}


def test_proprio_arms_differ_from_the_recipe_in_the_latent_and_then_the_rule_alone():
    """srpo_proprio is the demo recipe (``srpo``) with the grip point as the latent and nothing else; srpo_proprio_task
    is srpo_proprio with SRPO's own task rule and nothing else; binary differs from srpo in the reward alone."""
    mod = load_bench("bench_srpo_vs_binary")
    cfg = {arm: mod.expected_config(arm, 3, ["rl.iterations=50", "rl.eval_split=test"]) for arm in mod.ARMS}
    srpo = cfg["srpo"]
    assert srpo["srpo"]["encoder"] == "random_conv" and srpo["srpo"]["reference"] == "group"  # the shipped recipe
    assert cfg["srpo_proprio"] == {**srpo, "srpo": {**srpo["srpo"], "encoder": "proprio", "state_dims": [0, 1, 2]}}
    assert cfg["srpo_proprio_task"] == {**cfg["srpo_proprio"],
                                        "srpo": {**cfg["srpo_proprio"]["srpo"], "reference": "task"}}
    assert cfg["binary"] == {**srpo, "rl": {**srpo["rl"], "reward": "binary"}}
    assert all(c["rl"]["eval_split"] == "test" and c["rl"]["iterations"] == 50 for c in cfg.values())


@pytest.mark.parametrize("arms", ["srpo,nope", "srpo,srpo", ","])
def test_bad_arms_exit_2_with_one_line_and_write_nothing(capsys, tmp_path, arms):
    mod = load_bench("bench_srpo_vs_binary")
    assert mod.main(["--small", "--arms", arms, "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--arms" in err and "srpo_proprio_task" in err and "\n" not in err
    assert not (tmp_path / "runs").exists()


def test_an_unknown_eval_split_exits_2_with_one_line(capsys, tmp_path):
    mod = load_bench("bench_srpo_vs_binary")
    with pytest.raises(SystemExit) as e:
        mod.main(["--small", "--eval-split", "train", "--out", str(tmp_path / "runs")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--eval-split" in err and "'train'" in err and "\n" not in err
    assert not (tmp_path / "runs").exists()

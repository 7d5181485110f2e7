"""bench/bench_srpo_regime.py (issue 32, item 4) runs end to end in its --small mode: the progress encoder fitted
once, the three arms from one SFT start, every evaluation on the test split, the per-run curves with the training
interaction, mean +- SE per arm and both paired differences with the 2-SE verdict; --reuse reads the finished runs
back (the same numbers); bad arguments exit 2 with one line and write nothing."""

import json
import shutil

import pytest

from .benchutil import load_bench, markdown_table


@pytest.mark.slow  # one tiny encoder fit and three tiny VLA trainings in subprocesses, ~40-90 s
def test_small_runs_three_arms_on_test_states_and_reuse_reads_them_back(capsys, tmp_path):
    mod = load_bench("bench_srpo_regime")
    runs = tmp_path / "runs"
    args = ["--small", "--seeds", "1", "--iterations", "1", "--eval-every", "1", "--out", str(runs)]
    assert mod.main(args) == 0
    out = capsys.readouterr().out
    assert "evaluation split: test initial states 5000000..5000001" in out
    per_run = {(r[0], r[1]): r for r in markdown_table(out, "| arm | seed |")}
    assert set(per_run) == {("srpo_progress", "0"), ("binary", "0"), ("srpo_random_conv", "0")}
    assert len({r[2] for r in per_run.values()}) == 1  # @0: the same SFT policy's test success in every arm
    assert all(int(r[4]) > 0 for r in per_run.values())  # training env steps were simulated
    arms = {r[0] for r in markdown_table(out, "| arm | @0")}
    assert arms == {"srpo_progress", "binary", "srpo_random_conv", "srpo_progress - binary (paired)",
                    "srpo_progress - srpo_random_conv (paired)"}
    assert "final (@1) srpo_progress - binary, paired:" in out and "> 2 SE: does not hold" in out
    cfgs = {arm: json.loads((runs / f"{arm}_seed0" / "run_info.json").read_text())["config"]
            for arm in mod.DEFAULT_ARMS}
    assert all(c["rl"]["eval_split"] == "test" and c["sft"]["demos_per_task"] == 1 for c in cfgs.values())
    assert cfgs["srpo_progress"]["srpo"]["encoder"] == "progress" and cfgs["binary"]["rl"]["reward"] == "binary"
    assert cfgs["srpo_progress"]["srpo"]["encoder_path"] == str(runs.resolve() / "encoder.safetensors")
    assert cfgs["srpo_random_conv"]["srpo"]["encoder"] == "random_conv"
    full = {arm: mod.expected_config(mod.arm_args(arm, runs / "e.safetensors", []), 0) for arm in mod.ARMS}
    assert not (runs / "srpo_progress_mixed_seed0").exists()  # not one of the default arms
    # outside --small (whose tiny band keeps every group in every arm): SRPO arms keep the all-failure groups,
    # binary trains on mixed groups only (the recipe's band)
    # (the --arms option srpo_progress_mixed: the learned encoder with the recipe's band, as binary's)
    assert [list(full[a]["rl"]["success_band"]) for a in mod.ARMS] == [[-0.5, 1.0], [0.0, 1.0], [-0.5, 1.0], [0.0, 1.0],
                                                                       [0.0, 1.0], [-0.5, 1.0], [0.0, 1.0], [-0.5, 1.0],
                                                                       [-0.5, 1.0], [-0.5, 1.0], [-0.5, 1.0],
                                                                       [0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0],
                                                                       [-0.5, 1.0], [-0.5, 1.0], [-0.5, 1.0]]
    # the pretrained image latent: the random_conv group-rule arm with the encoder alone changed
    rc = full["srpo_random_conv_group_mixed"]
    assert full["srpo_imagenet_group_mixed"] == {**rc, "srpo": {**rc["srpo"], "encoder": "efficientnet_lite0"}}
    # item 4's arm on the robot's own state: srpo_proprio_mixed with the all-failure groups kept at the batch's scale,
    # and nothing else
    mixed = full["srpo_proprio_mixed"]
    assert full["srpo_proprio_global"] == {**mixed, "rl": {**mixed["rl"], "success_band": [-0.5, 1.0]},
                                           "grpo": {**mixed["grpo"], "std_mode": "global"}}
    # the predicted reference: srpo_proprio_global with the rule alone changed
    glob = full["srpo_proprio_global"]
    assert full["srpo_proprio_predicted"] == {**glob, "srpo": {**glob["srpo"], "reference": "predicted"}}
    pred = full["srpo_proprio_predicted"]  # its ablation: the gate never passes, nothing else changed
    assert full["srpo_proprio_predicted_off"] == {**pred, "srpo": {**pred["srpo"], "predictor_min_r2": 1.0}}
    # the two group-rule arms differ from each other in the latent alone
    assert full["srpo_proprio_mixed"]["srpo"] == {**full["srpo_random_conv_group_mixed"]["srpo"], "encoder": "proprio",
                                                  "state_dims": [0, 1, 2]}
    assert full["srpo_proprio_mixed"]["srpo"]["reference"] == "group"
    # sim_progress_mixed differs from binary in the reward alone (the band, the scale and the rest are binary's)
    assert full["sim_progress_mixed"] == {**full["binary"], "rl": {**full["binary"]["rl"], "reward": "sim_progress"}}
    # the global-scale options differ from their arms in grpo.std_mode alone
    assert {a: full[a]["grpo"]["std_mode"] for a in mod.ARMS if "global" in a} == \
        {"srpo_progress_global": "global", "binary_global": "global", "sim_progress_global": "global",
         "sim_progress_global_n1": "global", "sim_progress_global_n2": "global", "sim_progress_global_n3": "global",
         "srpo_proprio_global": "global"}
    # the noisy ceilings differ from the exact one in rl.sim_progress_noise alone
    for a, s in (("sim_progress_global_n1", 1.0), ("sim_progress_global_n2", 2.0), ("sim_progress_global_n3", 3.0)):
        assert full[a]["rl"] == {**full["sim_progress_global"]["rl"], "sim_progress_noise": s}
        assert {k: v for k, v in full[a].items() if k != "rl"} == \
            {k: v for k, v in full["sim_progress_global"].items() if k != "rl"}
    assert {k: v for k, v in full["srpo_progress_global"].items() if k != "grpo"} == \
        {k: v for k, v in full["srpo_progress"].items() if k != "grpo"}
    assert {k: v for k, v in full["binary_global"].items() if k != "grpo"} == \
        {k: v for k, v in full["binary"].items() if k != "grpo"}
    assert full["srpo_progress"]["grpo"]["std_mode"] == "group"
    assert full["srpo_progress_mixed"]["srpo"] == full["srpo_progress"]["srpo"]
    assert full["srpo_random_conv_mixed"]["srpo"] == full["srpo_random_conv"]["srpo"]

    assert mod.main([*args, "--reuse"]) == 0
    again = capsys.readouterr().out
    assert again.count("reused") >= 7  # the encoder and three runs, three table cells
    assert {(r[0], r[1]): r[2:4] for r in markdown_table(again, "| arm | seed |")} == \
        {k: r[2:4] for k, r in per_run.items()}

    moved = tmp_path / "copied"  # a copy of the run directory (its encoder along): still reused, nothing retrained
    shutil.copytree(runs, moved)
    assert mod.main([*args[:-1], str(moved), "--reuse"]) == 0
    copied = capsys.readouterr().out
    assert copied.count("reused") >= 7 and "encoder: reused" in copied
    assert {(r[0], r[1]): r[2:4] for r in markdown_table(copied, "| arm | seed |")} == \
        {k: r[2:4] for k, r in per_run.items()}


def test_same_encoder_accepts_a_copied_encoder_only_with_the_same_bytes(tmp_path):
    mod = load_bench("bench_srpo_regime")
    old, ours = tmp_path / "old.safetensors", tmp_path / "new.safetensors"
    old.write_bytes(b"weights")
    ours.write_bytes(b"weights")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_info.json").write_text(json.dumps({"config": {"srpo": {"encoder_path": str(old)}}}))
    want = {"seed": 0, "srpo": {"encoder": "progress", "encoder_path": str(ours)}}
    got = mod.same_encoder(run, want)
    assert got == {"seed": 0, "srpo": {"encoder": "progress", "encoder_path": str(old)}}
    assert want["srpo"]["encoder_path"] == str(ours)  # not modified in place
    ours.write_bytes(b"other weights")  # different bytes: the recorded path stays different, so no reuse
    assert mod.same_encoder(run, want) == want
    old.unlink()  # the recorded encoder is gone: nothing to compare, no reuse
    assert mod.same_encoder(run, want) == want
    assert mod.same_encoder(tmp_path / "missing", want) == want
    no_path = {"srpo": {"encoder": "random_conv", "encoder_path": None}}
    assert mod.same_encoder(run, no_path) == no_path


@pytest.mark.parametrize("args, word", [(["--seeds", "0"], "--seeds"), (["--jobs", "0"], "--jobs"),
                                        (["--iterations", "0"], "--iterations"),
                                        (["--eval-every", "-1"], "--eval-every"),
                                        (["--eval-episodes", "0"], "--eval-episodes"),
                                        (["--arms", "srpo_progress,nope"], "nope"),
                                        (["--arms", "binary,binary"], "binary,binary"), (["--arms", ","], "--arms")])
def test_bad_arguments_exit_2_with_one_line(capsys, tmp_path, args, word):
    mod = load_bench("bench_srpo_regime")
    assert mod.main(["--small", *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert word in err and "\n" not in err
    assert not (tmp_path / "o").exists()  # nothing written


def test_report_prints_the_pairs_of_the_arms_that_ran(capsys):
    mod = load_bench("bench_srpo_regime")
    finals = {"srpo_progress": [0.1, 0.2], "binary": [0.3, 0.5], "srpo_progress_mixed": [0.4, 0.5]}
    results = {(arm, s): {"curve": {0: 0.05, 10: f[s]}, "wall_s": 10.0, "reused": False,
                          "episodes": {"env_steps": 100, "rollout_success": 0.1, "groups_kept": 3.0}}
               for arm, f in finals.items() for s in (0, 1)}
    mod.report(results, [0, 1], list(finals))
    out = capsys.readouterr().out
    assert {r[0] for r in markdown_table(out, "| arm | seed |")} == set(finals)
    # srpo_random_conv did not run: its pair is left out; the mixed arm's pairs are printed (hand values)
    assert "srpo_random_conv" not in out
    assert "final (@10) srpo_progress - binary, paired: -0.250 +- 0.050 (ahead in 0 of 2 seeds; > 2 SE: does not " \
        "hold)" in out
    assert "final (@10) srpo_progress_mixed - binary, paired: +0.050 +- 0.050 (ahead in 1 of 2 seeds" in out
    assert "final (@10) srpo_progress - srpo_progress_mixed, paired: -0.300 +- 0.000" in out


def test_sim_progress_arm_differs_from_srpo_progress_global_in_the_reward_alone(capsys, tmp_path):
    mod = load_bench("bench_srpo_regime")
    enc = tmp_path / "e.safetensors"
    args = mod.arm_args("sim_progress_global", enc, ["rl.iterations=100"])
    assert args[-4:-1] == ["rl.success_band=[-0.5,1.0]", "grpo.std_mode=global", "rl.reward=sim_progress"]
    ours, theirs = (mod.expected_config(mod.arm_args(a, enc, []), 3) for a in ("sim_progress_global",
                                                                                "srpo_progress_global"))
    assert ours["rl"]["reward"] == "sim_progress" and theirs["rl"]["reward"] == "srpo"
    assert {**ours, "rl": {**ours["rl"], "reward": "srpo"}} == theirs  # the same SFT start, band, scale, srpo: keys
    finals = {"sim_progress_global": [0.6, 0.7], "binary_global": [0.5, 0.5], "srpo_progress_global": [0.4, 0.6]}
    results = {(arm, s): {"curve": {0: 0.05, 100: f[s]}, "wall_s": 10.0, "reused": False,
                          "episodes": {"env_steps": 100, "rollout_success": 0.1, "groups_kept": 3.0}}
               for arm, f in finals.items() for s in (0, 1)}
    mod.report(results, [0, 1], list(finals))
    out = capsys.readouterr().out
    assert "final (@100) sim_progress_global - binary_global, paired: +0.150 +- 0.050 (ahead in 2 of 2 seeds; > 2 " \
        "SE: holds)" in out
    assert "final (@100) sim_progress_global - srpo_progress_global, paired: +0.150 +- 0.050" in out

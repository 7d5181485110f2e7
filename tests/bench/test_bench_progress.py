"""bench/bench_progress.py runs end to end at its --small setting (a tabletop task, and robosuite Lift): a Spearman
row for every encoder, the splits and the transformers weights it used printed, results.json written; bad arguments
exit 2 with one line."""

import json

import pytest

from .benchutil import load_bench, markdown_table


def test_progress_bench_small(tmp_path, capsys):
    mod = load_bench("bench_progress")
    assert mod.main(["--small", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "failures on the test states 4000000..4000001" in out
    assert "DINOv2: tiny random weights of the real architecture (not pretrained)" in out
    rows = markdown_table(out, "| encoder |")
    assert [r[0] for r in rows] == list(mod.ENCODERS) and "proprio" in mod.ENCODERS
    assert "proprio: the observation state's entries push [0, 1, 2] at the same 6 frames, pooling mean_last" in out
    # encoder, one task, all failures, the same with the states' spread, within group over all groups
    assert all(len(r) == 1 + 1 + 3 for r in rows)
    res = json.loads((tmp_path / "results.json").read_text())
    for name, e in res["summary"].items():  # the pooled within-group mean is the groups' mean (one task here)
        wg = [r["within_group"] for r in res["rows"] if r["encoder"] == name]
        assert e["all_groups"] == pytest.approx(wg, nan_ok=True)
    assert {r["encoder"] for r in res["rows"]} == set(mod.ENCODERS)
    for r in res["rows"]:
        assert len(r["srpo_progress"]) == len(r["sim_progress"]) == r["failures"] > 0
        assert all(0.0 < p < 1.0 for p in r["srpo_progress"])  # every failure graded (the expert references)
    assert (tmp_path / "progress_seed0_without_push.safetensors").is_file()
    assert (tmp_path / "tiny_vjepa2" / "config.json").is_file()
    assert [r["state_dims"] for r in res["rows"] if r["encoder"] == "proprio"] == [[0, 1, 2]]


def test_progress_bench_small_with_detour_data_and_nothing_held_out(tmp_path, capsys):
    mod = load_bench("bench_progress")
    assert mod.main(["--small", "--encoders", "progress", "--detour-per-task", "2", "--detour-steps", "3,6",
                     "--held-out", "none", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "held out: NOTHING" in out and "trained on ['reach_one', 'reach', 'push', 'pick_place', 'stack']" in out
    assert (tmp_path / "progress_seed0_without_none.safetensors").is_file()
    assert not (tmp_path / "progress_seed0_without_push.safetensors").exists()
    assert "expert after a detour of 3-6 play steps: 2 per training task" in out
    assert "seed 0: expert after a detour, recovered per task: {'reach_one': " in out
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["args"]["detour_per_task"] == 2 and [r["encoder"] for r in res["rows"]] == ["progress"]


def test_progress_bench_small_with_the_distance_head_and_the_group_rule(tmp_path, capsys):
    """--progress-head distance: the encoder file holds a 16-d distance head (read back by the loader) and SRPO grades
    every failure with it; --reference group is SRPO's rule the bench applies and prints."""
    from world_models.progress_encoder import load_progress_encoder

    mod = load_bench("bench_progress")
    assert mod.main(["--small", "--encoders", "progress,random_conv", "--progress-head", "distance",
                     "--progress-pooling", "last", "--reference", "group", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "SRPO: reference group" in out and "head distance" in out and "SRPO reference group" in out
    enc = load_progress_encoder(tmp_path / "progress_seed0_without_push.safetensors", "encoder")
    assert enc.cfg.head == "distance" and enc.dim == 16
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["args"]["reference"] == "group" and res["args"]["progress_head"] == "distance"
    for r in res["rows"]:
        assert len(r["srpo_progress"]) == r["failures"] > 0
        assert all(0.0 < p < 1.0 for p in r["srpo_progress"])  # every failure graded against its group's reference


def test_progress_bench_small_at_its_own_64_px_view(tmp_path, capsys):
    """--progress-frame-size 64: the encoder is trained and scored on 64-px agentview frames (the env's extra view);
    the policy's failures are the 32-px run's own (same episodes, same simulator progress)."""
    mod = load_bench("bench_progress")
    base = tmp_path / "p32"
    assert mod.main(["--small", "--encoders", "progress", "--progress-pooling", "last", "--out", str(base)]) == 0
    assert mod.main(["--small", "--encoders", "progress", "--progress-pooling", "last", "--progress-frame-size", "64",
                     "--out", str(tmp_path / "p64")]) == 0
    assert "its own view: agentview at 64 px, the policy's cameras at 32 px" in capsys.readouterr().out
    from world_models.progress_encoder import read_progress_metadata

    assert read_progress_metadata(tmp_path / "p64" / "progress_seed0_without_push.safetensors")["config"].image_size \
        == 64
    r32, = json.loads((base / "results.json").read_text())["rows"]
    r64, = json.loads((tmp_path / "p64" / "results.json").read_text())["rows"]
    assert r64["sim_progress"] == r32["sim_progress"] and r64["srpo_progress"] != r32["srpo_progress"]
    diag = load_bench("diag_progress_readout")  # reads each run's frame size
    res = diag.main(["--split", "test", "--seeds", "1", "--tasks", "push", "--groups", "2", "--group-size", "3",
                     str(base), str(tmp_path / "p64")])
    assert res[str(tmp_path / "p64")]["srpo"][0] == pytest.approx(r64["within_task"], nan_ok=True)
    assert res[str(base)]["srpo"][0] == pytest.approx(r32["within_task"], nan_ok=True)
    # within group: the diagnostic's SRPO column is the bench's within-group mean (one task here)
    assert res[str(base)]["srpo_group"][0] == pytest.approx(r32["within_group"], nan_ok=True)
    assert len(res[str(base)]["raw_group"]) == 1


def test_progress_bench_small_on_robosuite_lift(tmp_path, capsys):
    """Another simulator's task: the recipe's policy after a tiny SFT, expert references, sims.task_progress's
    measure as the simulator's progress; the progress / small encoders trained on the tabletop tasks only."""
    mod = load_bench("bench_progress")
    assert mod.main(["--small", "--tasks", "lift", "--encoders", "random_conv,policy,progress", "--out",
                     str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "lift: policy " in out and "configs/vla/robosuite_lift.yaml, SFT 5 steps on 1 scripted-expert demos" in out
    assert "without other_sims (trained on ['reach_one', 'reach', 'push', 'pick_place', 'stack'])" in out
    assert [r[0] for r in markdown_table(out, "| encoder |")] == ["random_conv", "policy", "progress"]
    res = json.loads((tmp_path / "results.json").read_text())
    assert {r["task"] for r in res["rows"]} == {"lift"}
    for r in res["rows"]:
        assert r["references"] >= 1 and len(r["sim_progress"]) == r["failures"] > 0
        assert all(0.0 < p < 1.0 for p in r["sim_progress"])  # the dense measure: reach > 0, no success
        assert all(0.0 < p < 1.0 for p in r["srpo_progress"])  # every failure graded against the expert reference
    assert json.loads((tmp_path / "policy_lift" / "bench.json").read_text())["env"] == "robosuite/Lift"
    assert (tmp_path / "progress_seed0_without_other_sims.safetensors").is_file()


@pytest.mark.parametrize("argv", [["--tasks", "nosuch"], ["--sim-demos", "0"], ["--sim-max-steps", "-1"],
                                  ["--tasks", "libero_spatial_0", "--groups", "11"],
                                  ["--tasks", "libero_spatial_0", "--sim-demos", "7"],
                                  ["--tasks", "lift", "--encoders", "progress", "--progress-frame-size", "64"],
                                  ["--encoders", "clip"], ["--groups", "0"],
                                  ["--dinov2", "/no/such/dir"], ["--policy-per-task", "-1"],
                                  ["--policy-failures", "maybe"], ["--detour-steps", "5,1"], ["--detour-steps", "x"],
                                  ["--detour-per-task", "-1"], ["--held-out", "task"],
                                  ["--progress-frame-size", "64"],  # with every encoder: only progress has its view
                                  ["--progress-frame-size", "8", "--encoders", "progress"],
                                  ["--progress-head", "value"], ["--progress-dim", "0"], ["--reference", "nearest"],
                                  ["--progress-context", "last"]])
def test_progress_bench_bad_arguments(argv, capsys):
    mod = load_bench("bench_progress")
    with pytest.raises(SystemExit) as e:
        mod.main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("bench_progress.py: error:")


@pytest.mark.parametrize("dims", ["0,9", "", "x", "1.5", "0,0", "=-1", "0,,1"])
def test_progress_bench_bad_state_dims(dims, tmp_path, capsys):
    """--state-dims out of range for the state (9 entries), empty, not integers, repeated or negative: exit 2, one
    line naming the value, nothing written."""
    mod = load_bench("bench_progress")
    out = tmp_path / "out"
    argv = ["--small", "--encoders", "proprio", "--out", str(out)]
    argv += [f"--state-dims{dims}"] if dims.startswith("=") else ["--state-dims", dims]
    with pytest.raises(SystemExit) as e:
        mod.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench_progress.py: error: --state-dims ")
    assert "[0, 9)" in err[0] and not out.exists()


def test_state_dims_are_checked_against_the_tasks_own_state_width(tmp_path, monkeypatch, capsys):
    """A task whose env has another state width (a user's env: tabletop reach_one with its object positions, 9 + 3
    entries): --state-dims may index its extra entries, and is refused past its width (was: a width per simulator,
    9, a KeyError for any other simulator)."""
    import sims

    mod = load_bench("bench_progress")
    monkeypatch.setitem(sims.registry._FACTORIES, "user/reach_obj",
                        lambda **kw: sims.make("tabletop/reach_one", object_state=True, **kw))
    monkeypatch.setitem(mod.SIM_TASKS, "reach_obj", ("user/reach_obj", "configs/vla/tabletop_reach_one.yaml", 20))
    assert mod.state_width("reach_obj") == 12 and mod.state_width("reach_one") == 9
    a = mod.parse(["--tasks", "reach_obj", "--encoders", "proprio", "--state-dims", "0,9,11", "--out",
                   str(tmp_path / "a")])
    assert a.state_dims == [0, 9, 11] and mod.state_dims("reach_obj", a) == [0, 9, 11]
    for tasks, dims, width in (("reach_obj", "0,12", 12), ("reach_obj,push", "0,9", 9)):
        with pytest.raises(SystemExit) as e:
            mod.parse(["--tasks", tasks, "--encoders", "proprio", "--state-dims", dims, "--out", str(tmp_path / "b")])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and f"in [0, {width})" in err[0] and "reach_obj 12" in err[0]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_progress_bench_state_dims_need_the_proprio_encoder(tmp_path, capsys):
    mod = load_bench("bench_progress")
    with pytest.raises(SystemExit) as e:
        mod.main(["--small", "--encoders", "random_conv", "--state-dims", "0,1", "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and "only the proprio encoder reads the state" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_proprio_latent_is_the_episodes_recorded_state_entries():
    """The bench's proprio latent of every episode (the policy's and the expert references) is its recorded
    observation state (one per frame, the first the initial state's) at SRPO's 6 sampled frames, entries
    --state-dims, mean and last concatenated; and SRPO's group rule on it grades each failure by its latent distance
    to its group's references (min-max, sigmoid), as the bench scores it."""
    import numpy as np

    import sims
    from rewards.srpo import SRPOConfig

    mod = load_bench("bench_progress")
    states = [4_000_000, 4_000_001]
    eps = mod.rollouts(mod.base_policy(0.7), "reach_one", states, 3, 0)
    assert sum(e["ref"] for e in eps) == 2 and len(eps) == 8
    env = sims.make("tabletop/reach_one", image_size=32, cameras=("agentview",))
    for e in eps:
        assert e["states"].shape == (len(e["video"]), mod.state_width("reach_one")) and e["states"].dtype == np.float32
        s = states[e["group"]]
        np.testing.assert_array_equal(e["states"][0], env.reset(seed=s, options={"init_seed": s})[0]["state"])
        assert np.abs(e["states"][-1, :3] - e["states"][0, :3]).max() > 1e-3  # the grip point moved
    env.close()
    a = mod.parse(["--encoders", "proprio", "--state-dims", "2,0"])
    cfg = SRPOConfig(encoder="proprio", state_dims=mod.state_dims("reach_one", a), num_frames=6, pooling="mean_last",
                     reference="group")
    emb = mod.embed(None, eps, cfg).numpy()
    for e, z in zip(eps, emb):
        idx = np.round(np.linspace(0, len(e["states"]) - 1, 6)).astype(int)
        x = e["states"][idx][:, [2, 0]]
        np.testing.assert_allclose(z, np.concatenate([x.mean(0), x[-1]]), rtol=1e-6, atol=1e-7)
    p = mod.score(None, eps, cfg)
    succ = np.array([e["success"] for e in eps])
    fail = np.flatnonzero(~succ)
    refs = {g: [j for j in np.flatnonzero(succ) if eps[j]["group"] == g] for g in (0, 1)}
    d = np.array([min(np.linalg.norm(emb[i] - emb[j]) for j in refs[eps[i]["group"]]) for i in fail])
    u = (d - d.min()) / (d.max() - d.min())
    np.testing.assert_allclose(p[fail], 1 / (1 + np.exp(-10 * (0.5 - u))), rtol=1e-5)
    assert np.isnan(p[succ]).all()


def test_the_default_state_dims_are_the_end_effector_on_robosuite_lift():
    """robosuite Lift's observation state (as sims builds it for the bench): 9 entries, the first three the
    end-effector site (what STATE_DIMS["robosuite"] selects), after a reset and along scripted-expert steps."""
    import numpy as np

    import sims

    mod = load_bench("bench_progress")
    env = sims.make("robosuite/Lift", **mod.sim_env_kwargs(20))
    try:
        obs, _ = env.reset(seed=4_000_000, options={"init_seed": 4_000_000})
        rng = np.random.default_rng(0)
        for _ in range(6):
            assert obs["state"].shape == (9,) == (mod.state_width("lift"),)
            np.testing.assert_allclose(obs["state"][list(mod.STATE_DIMS["robosuite"])], env.unwrapped._eef(),
                                       atol=1e-6)
            obs, *_ = env.step(env.unwrapped.expert_action(rng=rng, noise=0.0))
    finally:
        env.close()


def test_readout_diagnostic_reproduces_the_bench(tmp_path, capsys):
    """diag_progress_readout.py re-collects the bench's failures: its SRPO column equals the bench's Spearman."""
    bench = load_bench("bench_progress")
    assert bench.main(["--small", "--encoders", "progress", "--progress-pooling", "last", "--out", str(tmp_path)]) == 0
    row, = json.loads((tmp_path / "results.json").read_text())["rows"]
    diag = load_bench("diag_progress_readout")
    res = diag.main(["--split", "test", "--seeds", "1", "--tasks", "push", "--groups", "2", "--group-size", "3",
                     str(tmp_path)])[str(tmp_path)]
    assert res["srpo"][0] == pytest.approx(row["within_task"], nan_ok=True)
    assert -1.0 <= res["raw"][0] <= 1.0 or res["raw"][0] != res["raw"][0]  # a Spearman (nan when all tied)
    assert "all failures" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        diag.main([str(tmp_path / "nosuch")])
    assert e.value.code == 2


def test_states_se_is_the_spread_over_resampled_initial_states():
    """``states_se``: the pooled Spearman's spread over bootstrap resamples of the initial states (groups), within
    each task. No spread when every state agrees perfectly; for failures independent of the simulator's progress, about
    the sampling SE of a Spearman over n failures (1 / sqrt(n - 1)); NaN without the groups; and the table's combined
    SE adds it to the seeds' SE in quadrature."""
    import numpy as np

    mod = load_bench("bench_progress")
    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(40), 5)
    sim = rng.random(200)
    same = [{"srpo_progress": sim.tolist(), "sim_progress": sim.tolist(), "groups": g.tolist()}]
    assert mod.states_se(same) < 1e-12
    noise = [{"srpo_progress": rng.random(200).tolist(), "sim_progress": sim.tolist(), "groups": g.tolist()}]
    se = mod.states_se(noise)
    assert 0.04 < se < 0.11 and se == mod.states_se(noise)  # 1 / sqrt(199) = 0.071; seeded: rerun to the same value
    two_tasks = noise + [{"srpo_progress": rng.random(10).tolist(), "sim_progress": rng.random(10).tolist(),
                          "groups": [0] * 5 + [1] * 5}]
    assert np.isfinite(mod.states_se(two_tasks))
    assert np.isnan(mod.states_se([{k: v for k, v in noise[0].items() if k != "groups"}]))
    assert np.isnan(mod.states_se([dict(noise[0], groups=[3] * 200)]))  # one state: no spread to measure
    assert mod._with_states([0.2, 0.4], [0.1, 0.1]) == f"+0.30 +- {np.sqrt(0.1 ** 2 + 0.1 ** 2):.2f}"
    assert mod._with_states([0.2], [float("nan")]) == "n/a"


def test_ceiling_diagnostic_scores_the_bench_failures_on_state_latents(tmp_path, capsys):
    """diag_progress_ceiling.py: SRPO's rule on simulator-state latents of the bench's own failures. The failures are
    the bench's, episode for episode (same simulator progress, in order); a row per latent x rule; every failure
    graded; on reach the traced states reproduce each episode's progress (checked inside the run) and the
    instruction-relevant relation orders the failures better than the proprioception alone under SRPO's task rule."""
    bench = load_bench("bench_progress")
    assert bench.main(["--small", "--encoders", "random_conv", "--out", str(tmp_path / "b")]) == 0
    row, = json.loads((tmp_path / "b" / "results.json").read_text())["rows"]
    capsys.readouterr()
    diag = load_bench("diag_progress_ceiling")
    out = tmp_path / "ceiling.json"
    assert diag.main(["--seeds", "1", "--tasks", "push", "--groups", "2", "--group-size", "3",
                      "--json-out", str(out)]) == 0
    res = json.loads(out.read_text())
    names = [f"{k}/{r}" for k in diag.LATENTS for r in ("task", "group")]
    assert [r["encoder"] for r in res["rows"]] == names
    for r in res["rows"]:
        assert r["sim_progress"] == row["sim_progress"]  # the bench's failures, in its order
        assert all(0.0 < p < 1.0 for p in r["srpo_progress"])
    rows = markdown_table(capsys.readouterr().out, "| encoder |")
    assert [r[0] for r in rows] == names
    assert diag.main(["--split", "val", "--seeds", "1", "--tasks", "reach_one", "--groups", "4", "--group-size", "4",
                      "--json-out", str(out)]) == 0
    by = {r["encoder"]: r["within_task"] for r in json.loads(out.read_text())["rows"]}
    assert by["relation/task"] > 0.5 and by["relation/task"] > by["gripper/task"]


def test_state_latents_of_an_expert_reach():
    """The reach expert's traced states: the relation is the named ball minus the grip point (under 3 cm at the
    success, the task's test), ``relation_start`` has length 1 at the first frame, and the recomputed progress is 1
    at the success."""
    import numpy as np

    diag = load_bench("diag_progress_ceiling")
    tr = diag.expert_trace("reach", 2_000_000, 40)
    assert tr is not None and len(tr) > 2
    assert np.linalg.norm(tr[-1]["relation"]) < 0.03 < np.linalg.norm(tr[0]["relation"])
    assert diag.pooled(tr, "relation_start", 1, "last").shape == (3,)
    first = diag.pooled(tr[:1], "relation_start", 1, "last")
    assert np.linalg.norm(first) == pytest.approx(1.0)
    assert diag.reach_progress(tr) >= 1.0 - 0.03 / np.linalg.norm(tr[0]["relation"])  # the last frame is within 3 cm
    assert tr[0]["scene"].shape == (3 + 3 * 3,) and tr[0]["gripper"].shape == (3,)


def test_the_gripper_latent_is_the_proprio_encoders_state_dims_0_to_2():
    """The diagnostic's ``gripper`` latent is what ``srpo.encoder: proprio`` with ``srpo.state_dims: [0, 1, 2]`` reads
    on the tabletop: the observation state's first three entries, frame by frame."""
    import numpy as np

    import sims

    diag = load_bench("diag_progress_ceiling")
    env = diag.StateTrace(sims.make("tabletop/push", image_size=16, cameras=("agentview",)))
    obs, _ = env.reset(seed=7, options={"init_seed": 7})
    states = [obs["state"]]
    for _ in range(5):
        obs, *_ = env.step(np.asarray(env.unwrapped.expert_action(rng=np.random.default_rng(0), noise=0.0), np.float32))
        states.append(obs["state"])
    env.close()
    assert len(env.trace) == len(states) == 6
    for t, st in zip(env.trace, states):
        np.testing.assert_allclose(st[:3], t["gripper"], atol=1e-6)


@pytest.mark.parametrize("argv", [["--groups", "0"], ["--tasks", "lift"], ["--pooling", "max"],
                                  ["--group-size", "1"], ["--json-out", "/"]])
def test_ceiling_diagnostic_bad_arguments(argv, capsys):
    diag = load_bench("diag_progress_ceiling")
    with pytest.raises(SystemExit) as e:
        diag.main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("diag_progress_ceiling.py: error:")

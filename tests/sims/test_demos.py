"""Scripted-expert demos: HDF5 round trip (robomimic-style layout) and the training loader."""

import h5py
import numpy as np
import pytest

import sims


def test_hdf5_round_trip(tmp_path, can_render):
    cams = ("agentview", "wrist") if can_render else ()
    path = tmp_path / "demos.hdf5"
    summary = sims.record_demos("tabletop/reach", 3, path, env_kwargs={"image_size": 32, "cameras": cams},
                                seed_offset=10)
    assert summary["episodes"] == 3 and summary["success_rate"] == 1.0
    demos = sims.load_demos(path)
    assert len(demos) == 3
    env = sims.make("tabletop/reach", image_size=32, cameras=cams)
    for k, d in enumerate(demos):
        T = len(d["actions"])
        assert d["actions"].dtype == np.float32 and d["actions"].shape == (T, 4)
        assert d["state"].shape == (T, 9) and d["rewards"].shape == (T,) and d["dones"][-1] == 1
        assert d["success"] and d["task"] == "tabletop/reach" and d["init_seed"] == 10 + k
        for c in cams:
            assert d["images"][c].shape == (T, 32, 32, 3) and d["images"][c].dtype == np.uint8
        # replay: same init seed + same actions reproduce the recorded observations and the success
        obs, _ = env.reset(options={"init_seed": d["init_seed"]})
        assert obs["instruction"] == d["instruction"]
        for t in range(T):
            np.testing.assert_allclose(obs["state"], d["state"][t], atol=1e-6)
            np.testing.assert_allclose(env.physics_state(), d["states"][t])
            for c in cams:
                np.testing.assert_array_equal(obs["images"][c], d["images"][c][t])
            obs, r, term, trunc, info = env.step(d["actions"][t])
        assert info["success"]
    with h5py.File(path) as f:  # robomimic-style keys and filter masks
        assert f["data"].attrs["total"] == sum(len(d["actions"]) for d in demos)
        assert sorted(x.decode() for x in f["mask/successful"][()]) == ["demo_0", "demo_1", "demo_2"]
        assert f["data/demo_0"].attrs["num_samples"] == len(demos[0]["actions"])
    flat = sims.load_transitions(path)
    assert flat["actions"].shape[0] == flat["state"].shape[0] == flat["episode"].shape[0] == f_total(demos)
    assert flat["instructions"] == [d["instruction"] for d in demos]


def f_total(demos):
    return sum(len(d["actions"]) for d in demos)


def test_failure_data_and_filters(tmp_path):
    path = tmp_path / "fail.hdf5"
    s = sims.record_demos("tabletop/push", 2, path, env_kwargs={"cameras": (), "max_steps": 30}, wrong_object=True)
    assert s["success_rate"] == 0.0
    assert len(sims.load_demos(path)) == 2 and sims.load_demos(path, only_success=True) == []
    with pytest.raises(ValueError, match="no successful"):
        sims.load_transitions(path)
    with pytest.raises(KeyError, match="wrist"):
        sims.load_demos(path, cameras=("wrist",))
    with pytest.raises(FileNotFoundError):
        sims.load_demos(tmp_path / "missing.hdf5")


def test_cli_records_loadable_demos(tmp_path, capsys):
    from vla_rl.cli import main  # `vla-rl record-demos`: the command around sims.record_demos

    out = tmp_path / "cli.hdf5"
    assert main(["record-demos", "tabletop/reach", "2", str(out), "--cameras", "--noise", "0.1", "--seed-offset",
                 "5"]) == 0
    assert '"episodes": 2' in capsys.readouterr().out
    d = sims.load_demos(out)
    assert [e["init_seed"] for e in d] == [5, 6] and all(e["images"] == {} for e in d)


def test_scripted_expert_tasks_are_known_by_name(tmp_path):
    """``sims.has_scripted_expert``: from the name alone (no env built), the tasks whose env has ``expert_action``;
    None for a family it does not know (a plugin's task); record_demos refuses the others before building an env."""
    assert all(sims.has_scripted_expert(t) for t in ("tabletop/reach", "robosuite/Lift", "robosuite/Stack",
                                                      "libero/libero_spatial/3"))
    assert not any(sims.has_scripted_expert(t) for t in ("robosuite/Door", "libero/libero_goal/0"))
    assert sims.has_scripted_expert("mine/far_reach") is None
    with pytest.raises(ValueError, match="no scripted expert here"):
        sims.record_demos("robosuite/Door", 1, tmp_path / "d.hdf5")
    assert not any(tmp_path.iterdir())

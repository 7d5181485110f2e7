"""vla-rl deploy on LeRobot's Robot interface: the simulated robot (sims), clipping, episode time, Ctrl-C, recording."""

import json

import numpy as np
import pytest
import torch

from vla_rl.cli import main as cli_main
from vla_rl.deploy import DeployConfig, clip_action, make_robot, run_deploy

from .helpers import tiny_policy_config

ENV = {"image_size": 32, "cameras": ("agentview", "wrist")}


@pytest.fixture
def policy(tmp_path):
    from vla_rl.policies import make_policy

    d, a = _dims(tmp_path)
    cfg = tiny_policy_config(state_dim=d, action_dim=a, image_size=32, cameras=["agentview", "wrist"])
    return make_policy(cfg, ["reach the red ball"], workdir=tmp_path)


def _robot(tmp_path, seed=0):
    return make_robot("sims", "tabletop/reach_one", ENV, seed, tmp_path / "calib")


def _dims(tmp_path):
    r = _robot(tmp_path)
    return sum(v is float for v in r.observation_features.values()), len(r.action_features)


def test_sim_robot_implements_lerobot_robot(tmp_path):
    from lerobot.robots.robot import Robot

    r = _robot(tmp_path)
    assert isinstance(r, Robot) and not r.is_connected
    r.connect()
    obs = r.get_observation()
    assert obs["agentview"].shape == (32, 32, 3) and obs["agentview"].dtype == np.uint8
    sent = r.send_action({n: 0.5 for n in r.action_features})
    assert sent == {n: 0.5 for n in r.action_features} and "success" in r.last_info
    with pytest.raises(KeyError, match="action lacks"):
        r.send_action({})
    r.disconnect()
    assert not r.is_connected


def test_deploy_one_episode_clips_and_records(tmp_path, policy):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    robot = _robot(tmp_path)
    cfg = DeployConfig(max_steps=6, episodes=2, joint_limits=([-0.05], [0.05]), realtime=False, stop_on_success=False)
    out = run_deploy(policy, robot, cfg, tmp_path / "ds")
    assert not out["interrupted"] and not robot.is_connected
    assert [e["steps"] for e in out["episodes"]] == [6, 6] and all(e["stopped"] == "max_steps" for e in out["episodes"])
    assert out["episodes"][0]["clipped"] > 0  # a random policy exceeds +-0.05
    ds = LeRobotDataset("local/deploy", root=tmp_path / "ds")
    assert ds.num_episodes == 2 and len(ds) == 12
    acts = torch.stack([ds[i]["action"] for i in range(len(ds))])
    assert float(acts.abs().max()) <= 0.05 + 1e-6  # what was sent (and recorded) is clipped
    assert ds[0]["observation.images.agentview"].shape == (3, 32, 32) and ds[0]["task"]
    # success per frame (LeRobot's next.success): True only on the last frame of a successful episode
    assert [bool(ds[i]["next.success"]) for i in range(12)] == [False] * 5 + [out["episodes"][0]["success"]] + \
        [False] * 5 + [out["episodes"][1]["success"]]


def test_max_episode_time_and_realtime_rate(tmp_path, policy):
    cfg = DeployConfig(fps=20, max_episode_s=0.3, episodes=1, stop_on_success=False)
    out = run_deploy(policy, _robot(tmp_path), cfg)
    ep = out["episodes"][0]
    assert ep["stopped"] == "max_episode_s" and 0.3 <= ep["seconds"] < 1.5
    assert ep["steps"] <= 7  # 20 Hz for 0.3 s: at most ~6-7 ticks


def test_ctrl_c_stops_safely_and_keeps_the_episode(tmp_path, policy):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    robot = _robot(tmp_path)
    sent = []
    orig = type(robot).send_action

    def send(self, action):
        sent.append(dict(action))
        if len(sent) == 4:
            raise KeyboardInterrupt
        return orig(self, action)

    robot.send_action = send.__get__(robot)
    out = run_deploy(policy, robot, DeployConfig(max_steps=50, realtime=False, stop_on_success=False), tmp_path / "ds")
    assert out["interrupted"] and out["episodes"][0]["stopped"] == "interrupted"
    assert sent[-1] == {n: 0.0 for n in robot.action_features}  # the hold-still action on the way out
    assert not robot.is_connected
    ds = LeRobotDataset("local/deploy", root=tmp_path / "ds")
    assert ds.num_episodes == 1 and len(ds) == 3  # the 3 completed ticks were kept


def test_cli_deploy(tmp_path, policy, capsys):
    saved = policy.save_pretrained(tmp_path / "policy")
    assert cli_main(["deploy", str(saved), "--max-steps", "3", "--joint-limits", "-0.2", "0.2",
                     "--dataset", str(tmp_path / "cli_ds"), "--fps", "100"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["episodes"][0]["steps"] == 3 and res["dataset"].endswith("cli_ds")
    assert cli_main(["deploy", str(saved), "--dataset", str(tmp_path / "cli_ds")]) == 2
    assert "exists" in capsys.readouterr().err


def test_clip_action():
    a = np.array([-2.0, 0.5, 3.0], np.float32)
    np.testing.assert_array_equal(clip_action(a, ([-1.0], [1.0])), [-1.0, 0.5, 1.0])
    np.testing.assert_array_equal(clip_action(a, ([-1, 0, 0], [1, 0.2, 2])), np.array([-1.0, 0.2, 2.0], np.float32))
    with pytest.raises(ValueError, match="low > high"):
        clip_action(a, ([1.0], [-1.0]))


@pytest.mark.parametrize("flags,expect", [
    (["--robot", "nosuch"], ["--robot='nosuch'", "so100_follower", "sims"]),  # real arms' types are listed (imported)
    (["--episodes", "0"], ["--episodes=0", ">= 1"]), (["--fps", "nan"], ["--fps=nan"]),
    (["--max-episode-s", "-1"], ["--max-episode-s=-1.0"]), (["--joint-limits", "1", "-1"], ["LOW <= HIGH"]),
    (["--task", "tabletop/nosuch"], ["--task='tabletop/nosuch'"]), (["--device", "tpu"], ["'tpu'"])])
def test_cli_deploy_bad_flags_before_anything_runs(tmp_path, policy, capsys, flags, expect):
    saved = policy.save_pretrained(tmp_path / "policy")
    assert cli_main(["deploy", str(saved), "--dataset", str(tmp_path / "ds"), *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(e in err for e in expect), err
    assert not (tmp_path / "ds").exists()


def test_registered_robot_types_include_real_arms():
    from vla_rl.robot_args import registered_robot_types

    known = registered_robot_types()
    assert {"sims", "so100_follower", "koch_follower"} <= set(known)

"""Real arms from the command line (vla_rl.robot_args): LeRobot's own ``--robot.type`` / ``--robot.<field>`` flags,
decoded by draccus into LeRobot's RobotConfig classes without hardware, for every registered robot type; bad fields
as one line before the policy loads; deploy and robot-loop end to end on the simulated robot through the flags; a
real arm's deploy up to its (absent) serial port."""

import dataclasses
import json

import pytest
import torch

from vla_rl.cli import main as cli_main
from vla_rl.robot_args import parse_flag_values, registered_robot_types, robot_config, robot_fields, split_robot_flags

from .helpers import tiny_policy_config

CAM = "{front: {type: opencv, index_or_path: 0, width: 640, height: 480, fps: 30}}"
SO = ["--robot.port", "/dev/ttyACM0", "--robot.id", "my_arm", "--robot.cameras", CAM, "--robot.max_relative_target",
      "5"]
ARM = {"port": "/dev/ttyACM0", "id": "my_arm", "max_relative_target": 5.0}
# every robot type lerobot 0.4.4 registers (+ sims): the flags a user gives, and the fields the config must then hold
FLAGS = {
    "so100_follower": (SO, ARM), "so101_follower": (SO, ARM), "koch_follower": (SO, ARM), "omx_follower": (SO, ARM),
    "hope_jr_arm": (SO, ARM),
    "hope_jr_hand": (["--robot.port", "/dev/ttyACM1", "--robot.side", "left"],
                     {"port": "/dev/ttyACM1", "side": "left"}),
    "openarm_follower": (["--robot.port=can0", "--robot.side=right"], {"port": "can0", "side": "right"}),
    "bi_so_follower": (["--robot.left_arm_config.port", "/dev/ttyACM0", "--robot.right_arm_config.port=/dev/ttyACM1",
                        "--robot.right_arm_config.cameras", CAM], {}),
    "bi_openarm_follower": (["--robot.left_arm_config.port", "can0", "--robot.right_arm_config.port", "can1"], {}),
    "lekiwi": (["--robot.port", "/dev/ttyACM0", "--robot.use_degrees", "true"],
               {"port": "/dev/ttyACM0", "use_degrees": True}),
    "lekiwi_client": (["--robot.remote_ip", "192.168.1.20", "--robot.id", "kiwi"],
                      {"remote_ip": "192.168.1.20", "id": "kiwi"}),
    "reachy2": (["--robot.ip_address", "10.0.0.2", "--robot.with_mobile_base", "false"],
                {"ip_address": "10.0.0.2", "with_mobile_base": False}),
    "earthrover_mini_plus": (["--robot.sdk_url", "http://10.0.0.3:8000"], {"sdk_url": "http://10.0.0.3:8000"}),
    "unitree_g1": (["--robot.robot_ip", "192.168.123.1", "--robot.is_simulation", "false"],
                   {"robot_ip": "192.168.123.1", "is_simulation": False}),
    "sims": (["--robot.task", "tabletop/pick_place", "--robot.env_kwargs", "{image_size: 16}", "--robot.init_seed",
              "3"],
             {"task": "tabletop/pick_place", "env_kwargs": {"image_size": 16}, "init_seed": 3}),
}
# the robots whose SDK this environment installs (requirements/lerobot.txt) or that need none: the Robot object is
# built (opening nothing) and its features read; lekiwi_client (pyzmq) and unitree_g1 (unitree_sdk2py): config only
BUILDS = ["so100_follower", "so101_follower", "koch_follower", "omx_follower", "hope_jr_arm", "hope_jr_hand",
          "openarm_follower", "bi_so_follower", "bi_openarm_follower", "lekiwi", "reachy2", "earthrover_mini_plus",
          "sims"]


def _config(kind, flags, tmp_path=None):
    argv = ["deploy", "p", "--robot.type", kind,
            *flags] + (["--robot.calibration_dir", str(tmp_path)] if tmp_path else [])
    rest, got = split_robot_flags(argv)
    assert rest == ["deploy", "p"]
    typ, raw = robot_fields(got)
    return robot_config(typ, parse_flag_values(raw), list(raw))


def test_the_table_covers_every_registered_robot_type():
    assert sorted(FLAGS) == registered_robot_types()


@pytest.mark.parametrize("kind", sorted(FLAGS))
def test_every_registered_robot_config_from_flags(kind, tmp_path):
    from lerobot.robots.config import RobotConfig

    flags, want = FLAGS[kind]
    cfg = _config(kind, flags, tmp_path)
    assert type(cfg) is RobotConfig.get_choice_class(kind)  # LeRobot's own class for the type
    assert {k: getattr(cfg, k) for k in want} == want and str(cfg.calibration_dir) == str(tmp_path)
    if "--robot.cameras" in flags and hasattr(cfg, "cameras"):
        cam = cfg.cameras["front"]
        assert type(cam).__name__ == "OpenCVCameraConfig"
        assert (cam.index_or_path, cam.width, cam.height, cam.fps) == (0, 640, 480, 30)
    if kind == "bi_so_follower":
        assert (cfg.left_arm_config.port, cfg.right_arm_config.port) == ("/dev/ttyACM0", "/dev/ttyACM1")
        assert list(cfg.right_arm_config.cameras) == ["front"] and cfg.left_arm_config.cameras == {}


@pytest.mark.parametrize("kind", BUILDS)
def test_the_robot_builds_from_its_config_without_hardware(kind, tmp_path):
    from lerobot.robots.robot import Robot
    from lerobot.robots.utils import make_robot_from_config

    robot = make_robot_from_config(_config(kind, FLAGS[kind][0], tmp_path))
    assert isinstance(robot, Robot) and not robot.is_connected and len(robot.action_features) >= 2
    if kind in ("so100_follower", "so101_follower", "koch_follower", "omx_follower"):
        assert list(robot.action_features) == [f"{m}.pos" for m in ("shoulder_pan", "shoulder_lift", "elbow_flex",
                                                                      "wrist_flex", "wrist_roll", "gripper")]
        assert robot.observation_features["front"] == (480, 640, 3)  # the camera, from the config alone


def test_split_keeps_everything_else_and_both_spellings():
    rest, flags = split_robot_flags(["deploy", "pol", "--robot.type=so100_follower", "--episodes", "2", "--robot.port",
                                     "/dev/ttyACM0", "--robot", "sims", "--robot.id"])
    assert rest == ["deploy", "pol", "--episodes", "2", "--robot", "sims"]
    assert flags == [("type", "so100_follower"), ("port", "/dev/ttyACM0"), ("id", None)]
    with pytest.raises(ValueError, match=r"--robot.id has no value"):
        robot_fields(flags)
    with pytest.raises(ValueError, match="--robot sims and --robot.type koch_follower name two robots"):
        robot_fields([("type", "koch_follower")], "sims")
    assert robot_fields([("type", "sims"), ("port", "a"), ("port", "b")], "sims") == ("sims", {"port": "b"})


def test_a_flag_for_a_nested_field_and_a_yaml_value():
    cfg = _config("so100_follower", ["--robot.port", "/dev/ttyACM0", "--robot.cameras.front",
                                     "{type: opencv, index_or_path: /dev/video2, width: 320, height: 240, fps: 15}",
                                     "--robot.max_relative_target", "{shoulder_pan.pos: 5.0}"])
    assert str(cfg.cameras["front"].index_or_path) == "/dev/video2"
    assert cfg.max_relative_target == {"shoulder_pan.pos": 5.0}


# ---- bad input: one line naming the flag, exit 2, before the policy is loaded (its path does not even exist) ----
BAD = [
    (["--robot.type", "so100_follower"], ["--robot.port is required by so100_follower", "SOFollowerRobotConfig"]),
    (["--robot.type", "so100_follower", "--robot.port", "/dev/x", "--robot.portt", "/dev/y"],
     ["--robot.portt is not a field of so100_follower", "its fields: port,"]),
    (["--robot.type", "koch_follower", "--robot.port", "/dev/x", "--robot.use_degrees", "maybe"],
     ["--robot.use_degrees: Couldn't parse 'maybe' into a bool", "koch_follower's use_degrees is bool"]),
    (["--robot.type", "so101_follower", "--robot.port", "/dev/x", "--robot.cameras", "{front: {type: webcam}}"],
     ["--robot.cameras.front", "'webcam'", "camera types known here:", "opencv"]),
    (["--robot.type", "so100_follower", "--robot.port", "/dev/x", "--robot.cameras",
      "{front: {type: opencv, index_or_path: 0}}"],
     ["so100_follower (LeRobot's SOFollowerRobotConfig) refuses", "--robot.cameras=", "'width' is required"]),
    (["--robot.type", "so100_follower", "--robot.port", "/dev/x", "--robot.cameras", "{front: [1"],
     ["--robot.cameras=", "not valid YAML"]),
    (["--robot.type", "so_arm"], ["--robot.type='so_arm' is not a registered LeRobot robot", "so100_follower"]),
    (["--robot", "sims", "--robot.type", "so100_follower"],
     ["--robot sims and --robot.type so100_follower name two robots"]),
    (["--robot.type", "so100_follower", "--robot.port"], ["--robot.port has no value"]),
    (["--robot.type", "so100_follower", "--robot.port", "/dev/x"], ["--instruction is empty", "so100_follower"]),
    (["--robot.type", "sims", "--robot.task", "tabletop/nosuch"],
     ["--robot.task='tabletop/nosuch' is not a sims task"]),
    (["--robot.type", "sims", "--robot.env_kwargs", "{image_size: 32}", "--robot.init_seed", "x"],
     ["--robot.init_seed"]),
    # the fourth misuse sweep: a NaN limit (was: "expected LOW <= HIGH", naming no NaN), an empty policy path (was:
    # "no SmallVLA at ."), and flags that were refused already
    (["--joint-limits", "nan", "1"], ["--joint-limits nan 1.0", "finite LOW <= HIGH"]),
    (["--camera-map", "agentview"], ["--camera-map 'agentview'", "POLICY_CAMERA=ROBOT_CAMERA"]),
    (["--seed", "-1"], ["--seed=-1", "[0, 4294967295]"]), (["--max-steps", "-1"], ["--max-steps=-1", ">= 0"]),
    (["--image-size", "0"], ["--image-size=0", ">= 1"]),
]


@pytest.mark.parametrize("flags, expect", BAD)
def test_deploy_bad_robot_flags_are_one_line_before_the_policy_loads(tmp_path, capsys, flags, expect):
    assert cli_main(["deploy", str(tmp_path / "no_policy"), "--dataset", str(tmp_path / "ds"), *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and all(e in err for e in expect), err
    assert not (tmp_path / "ds").exists() and list(tmp_path.iterdir()) == []


def test_deploy_empty_policy_path_is_one_line(tmp_path, capsys):
    assert cli_main(["deploy", "", "--dataset", str(tmp_path / "ds")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "policy is empty" in err and "saved policy directory" in err, err
    assert list(tmp_path.iterdir()) == []


def test_robot_flags_on_another_command_are_refused(capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["eval", "runs/x", "--robot.port", "/dev/ttyACM0"])
    assert e.value.code == 2 and "eval takes no --robot.<field> flags" in capsys.readouterr().err


# ---- end to end on the simulated robot, through the flags -------------------------------------------------------
@pytest.fixture(scope="module")
def sims_policy(tmp_path_factory):
    from vla_rl.policies import make_policy

    d = tmp_path_factory.mktemp("pol")
    torch.manual_seed(0)
    cfg = tiny_policy_config(state_dim=9, action_dim=4, image_size=32, cameras=["agentview", "wrist"])
    return make_policy(cfg, ["touch the red ball"], workdir=d).save_pretrained(d / "policy")


@pytest.mark.parametrize("spelling", [
    ["--robot.type", "sims", "--robot.task", "tabletop/reach_one", "--robot.env_kwargs",
     "{image_size: 32, cameras: [agentview, wrist]}", "--robot.init_seed", "5"],
    ["--robot.type=sims", "--task", "tabletop/reach_one"],
    ["--robot", "sims"],  # the older spelling
])
def test_deploy_sims_through_the_flags(tmp_path, sims_policy, capsys, spelling):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    assert cli_main(["deploy", str(sims_policy), *spelling, "--max-steps", "3", "--fps", "200",
                     "--dataset", str(tmp_path / "ds")]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["episodes"][0]["steps"] == 3
    ds = LeRobotDataset("local/deploy", root=tmp_path / "ds")
    assert len(ds) == 3 and ds.meta.robot_type == "sims" and ds[0]["observation.images.wrist"].shape == (3, 32, 32)


def test_deploy_camera_map_and_a_robot_camera_the_policy_cannot_find(tmp_path, sims_policy, capsys):
    env = ["--robot.type", "sims", "--robot.env_kwargs", "{image_size: 32, cameras: [wrist]}", "--max-steps", "2"]
    assert cli_main(["deploy", str(sims_policy), *env, "--dataset", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "the policy reads camera 'agentview', mapped to robot camera 'agentview', which the sims robot does not " \
           "have; its cameras: ['wrist']" in err and err.count("\n") == 1
    assert not (tmp_path / "bad").exists()
    assert cli_main(["deploy", str(sims_policy), *env, "--camera-map", "agentview=wrist"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["episodes"][0]["steps"] == 2


def test_deploy_a_real_arm_up_to_its_serial_port(tmp_path, capsys):
    """so100_follower from the flags with a policy of its size (6 joints, a 'front' camera): everything up to the
    serial port runs (flags, policy, robot object, fit checks); connecting to a port that is not there is one line,
    and nothing is recorded."""
    from vla_rl.policies import make_policy

    cfg = tiny_policy_config(state_dim=6, action_dim=6, image_size=32, cameras=["front"])
    pol = make_policy(cfg, ["pick up the cube"], workdir=tmp_path).save_pretrained(tmp_path / "policy")
    argv = ["deploy", str(pol), "--robot.type", "so100_follower", "--robot.port", str(tmp_path / "ttyACM9"),
            "--robot.id", "my_arm", "--robot.cameras", CAM, "--robot.calibration_dir", str(tmp_path / "calib"),
            "--instruction", "pick up the cube", "--dataset", str(tmp_path / "arm_ds")]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot connect the so_follower robot (SOFollowerRobotConfig)" in err
    assert f"Could not connect on port '{tmp_path / 'ttyACM9'}'" in err
    assert not (tmp_path / "arm_ds").exists()
    assert cli_main([*argv[:-2], "--camera-map", "front=wrist"]) == 2  # a policy camera mapped to none of the arm's
    assert "mapped to robot camera 'wrist', which the so_follower robot does not have; its cameras: ['front']" in \
        capsys.readouterr().err
    small = make_policy(tiny_policy_config(state_dim=6, action_dim=4, image_size=32, cameras=["front"]), ["x"],
                        workdir=tmp_path / "s").save_pretrained(tmp_path / "small")
    assert cli_main(["deploy", str(small), *argv[2:]]) == 2
    assert "the policy acts in 4 dimensions, the so_follower robot takes 6" in capsys.readouterr().err


def _loop_yaml(tmp_path, policy, robot=None):
    import yaml

    lr = tiny_policy_config().lerobot
    cfg = {"output_dir": str(tmp_path / "run"), "policy_path": str(policy), "rounds": 1, "groups_per_round": 2,
           "success": "robot", "robot": robot or {"max_steps": 6, "realtime": False, "stop_on_success": False},
           "vla": {"device": "cpu", "policy": {"kind": "lerobot", "type": "smolvla",
                                               "lerobot": {**lr, "max_state_dim": 9, "max_action_dim": 4},
                                               "cameras": ["agentview", "wrist"], "image_size": 32, "chunk_size": 4,
                                               "n_action_steps": 4, "state_dim": 9, "action_dim": 4,
                                               "flow": {"num_steps": 4}},
                   "rl": {"inner_epochs": 1, "minibatch_size": 256, "reward": "binary"}, "grpo": {"group_size": 2}}}
    p = tmp_path / "loop.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_robot_loop_sims_through_the_flags(tmp_path, sims_policy, capsys):
    path = _loop_yaml(tmp_path, sims_policy)
    assert cli_main(["robot-loop", str(path), "--robot.type", "sims", "--robot.task", "tabletop/reach_one",
                     "--robot.env_kwargs", "{image_size: 32, cameras: [agentview, wrist]}"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["rounds"] == 1 and res["episodes"] == 4 and (tmp_path / "run" / "policy" / "model.safetensors").is_file()


def test_robot_loop_dry_run_of_a_real_arm_and_its_bad_flags(tmp_path, sims_policy, capsys):
    import yaml

    path = _loop_yaml(tmp_path, sims_policy)
    arm = ["--robot.type", "so101_follower", "--robot.port", "/dev/ttyACM0", "--robot.id", "my_arm", "--robot.cameras",
           CAM]
    assert cli_main(["robot-loop", str(path), *arm, "robot.instruction=pick up the cube", "--dry-run"]) == 0
    out = capsys.readouterr().out
    robot = yaml.safe_load(out[:out.index("per round:")])["robot"]
    assert robot["type"] == "so101_follower" and robot["instruction"] == "pick up the cube"
    assert robot["config"] == {"port": "/dev/ttyACM0", "id": "my_arm", "cameras": {
        "front": {"type": "opencv", "index_or_path": 0, "width": 640, "height": 480, "fps": 30}}}
    for bad, msg in [(arm[:2], "--robot.port (or robot.config.port) is required by so101_follower"),
                     ([*arm, "--robot.baud", "9600"], "--robot.baud is not a field of so101_follower"),
                     ([*arm[:2], "robot.config.port=3", "robot.config.use_degrees=maybe"],
                      "robot.config.use_degrees: Couldn't parse 'maybe' into a bool")]:
        assert cli_main(["robot-loop", str(path), *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and msg in err, err
        assert not (tmp_path / "run").exists()


def test_every_robot_config_field_of_so100_reaches_the_config():
    """The flags cover every init field of the class (a field LeRobot adds would show up here)."""
    from lerobot.robots.config import RobotConfig

    names = [f.name for f in dataclasses.fields(RobotConfig.get_choice_class("so100_follower")) if f.init]
    assert sorted(names) == sorted(["port", "disable_torque_on_disconnect", "max_relative_target", "cameras",
                                    "use_degrees", "id", "calibration_dir"])
    cfg = _config("so100_follower", [*SO, "--robot.disable_torque_on_disconnect", "false", "--robot.use_degrees",
                                     "false"])
    assert (cfg.disable_torque_on_disconnect, cfg.use_degrees, cfg.id) == (False, False, "my_arm")


def test_deploy_dry_run_prints_the_arm_without_touching_it(tmp_path, capsys):
    """The README's command: the so100 arm from the flags, its LeRobot config and features printed; no policy is
    loaded (the path need not exist) and nothing is opened or written."""
    assert cli_main(["deploy", str(tmp_path / "no_policy"), *SO, "--robot.type", "so100_follower",
                     "--robot.calibration_dir",
                     str(tmp_path / "calib"), "--instruction", "pick up the cube", "--dry-run"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["robot"]["type"] == "so100_follower" and res["robot"]["port"] == "/dev/ttyACM0"
    assert res["robot"]["cameras"]["front"]["width"] == 640 and res["robot_class"] == "SOFollower"
    assert res["observation_features"]["front"] == [480, 640,
                                                    3] and res["observation_features"]["gripper.pos"] == "float"
    assert len(res["action_features"]) == 6


def _position_arm(tmp_path):
    """A 2-joint arm commanded in absolute positions, its features named as LeRobot's arms name them ("<motor>.pos"
    in both): a stand-in for the hardware this machine lacks (the SO-100's own class needs its serial port)."""
    from lerobot.robots.robot import Robot

    from sims.lerobot_robot import SimRobotConfig

    class PositionArm(Robot):
        config_class, name = SimRobotConfig, "position_arm"

        def __init__(self, config):
            super().__init__(config)
            self.pos, self.sent, self.conn, self.broken = {"a.pos": 10.0, "b.pos": -20.0}, [], False, False

        observation_features = property(lambda self: {"a.pos": float, "b.pos": float, "cam": (4, 4, 3)})
        action_features = property(lambda self: {"a.pos": float, "b.pos": float})
        is_connected = property(lambda self: self.conn)
        is_calibrated = property(lambda self: True)

        def connect(self, calibrate=True):
            self.conn = True

        def calibrate(self):
            pass

        def configure(self):
            pass

        def get_observation(self):
            if self.broken:
                raise ConnectionError("camera unplugged")
            return dict(self.pos)

        def send_action(self, action):
            self.sent.append(dict(action))
            self.pos.update(action)
            return action

        def disconnect(self):
            self.conn = False

    return PositionArm(SimRobotConfig(calibration_dir=tmp_path))


def test_stopping_a_position_commanded_arm_holds_it_where_it_is(tmp_path):
    """Ctrl-C's hold action: zeros would drive a LeRobot arm (absolute joint targets) to its zero pose; it is sent
    its current positions instead, and if they cannot be read, nothing, and it is disconnected either way."""
    from vla_rl.deploy import hold_action, safe_stop

    arm = _position_arm(tmp_path)
    arm.connect()
    arm.send_action({"a.pos": 42.0, "b.pos": 7.5})
    safe_stop(arm, list(arm.action_features))
    assert arm.sent[-1] == {"a.pos": 42.0, "b.pos": 7.5} and not arm.is_connected
    arm.connect()
    arm.broken = True
    safe_stop(arm, list(arm.action_features))
    assert len(arm.sent) == 2 and not arm.is_connected  # nothing sent, still released
    sim = _config("sims", [])
    from lerobot.robots.utils import make_robot_from_config

    robot = make_robot_from_config(dataclasses.replace(sim, calibration_dir=tmp_path))
    assert hold_action(robot, list(robot.action_features)) == {n: 0.0 for n in robot.action_features}  # deltas


def test_robot_loop_refuses_a_robot_without_the_policys_camera(tmp_path, sims_policy, capsys):
    path = _loop_yaml(tmp_path, sims_policy)
    flags = ["--robot.type", "sims", "--robot.env_kwargs", "{image_size: 32, cameras: [wrist]}"]
    assert cli_main(["robot-loop", str(path), *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the policy reads camera 'agentview', mapped to robot camera 'agentview', which " \
        "the sims robot does not have; its cameras: ['wrist'] (map it: robot.camera_map={agentview: <robot camera>})" \
        in err, err
    assert not (tmp_path / "run" / "episodes").exists()

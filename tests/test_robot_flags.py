"""LeRobot's ``--robot.<field>`` flags on ``vla-rl deploy`` / ``robot-loop`` where lerobot is absent (this suite's
.venv): split off the command line before argparse (vla_rl.robot_args), refused on other commands, and a command that
takes them stops with the one line naming the missing package (the LeRobot side: tests/lerobot/test_robot_args.py)."""

import importlib.util

import pytest

from vla_rl.cli import main as cli_main
from vla_rl.robot_args import robot_fields, split_robot_flags

ARM = ["--robot.type", "so100_follower", "--robot.port", "/dev/ttyACM0", "--robot.cameras",
       "{front: {type: opencv, index_or_path: 0, width: 640, height: 480, fps: 30}}"]


def test_this_suite_runs_without_lerobot():
    assert importlib.util.find_spec("lerobot") is None  # (the LeRobot side runs in .venv-lerobot)


@pytest.mark.parametrize("argv", [
    ["deploy", "runs/x/policy", *ARM, "--instruction", "pick up the cube"],
    # bad, but lerobot comes first
    ["deploy", "runs/x/policy", "--robot.type", "so100_follower", "--robot.nosuch", "1"],
    ["robot-loop", "configs/robot/loop_sims.yaml", *ARM, "--dry-run"],
])
def test_without_lerobot_one_line_names_the_package(tmp_path, capsys, argv):
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs the package 'lerobot'" in err and "make lerobot" in err, err


def test_robot_flags_on_a_command_that_takes_none(capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["train", "configs/vla/builtin_reach_one_cpu.yaml", "--robot.port", "/dev/ttyACM0", "--dry-run"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "train takes no --robot.<field> flags" in err


def test_split_takes_both_spellings_and_leaves_the_rest():
    rest, flags = split_robot_flags(["deploy", "p", "--robot.type", "koch_follower", "--fps", "30",
                                     "--robot.cameras={w: {type: opencv}}", "--robot", "koch_follower", "--robot.id"])
    assert rest == ["deploy", "p", "--fps", "30", "--robot", "koch_follower"]
    assert flags == [("type", "koch_follower"), ("cameras", "{w: {type: opencv}}"), ("id", None)]
    with pytest.raises(ValueError, match="--robot.id has no value"):
        robot_fields(flags, "koch_follower")
    assert robot_fields(flags[:2], "koch_follower") == ("koch_follower", {"cameras": "{w: {type: opencv}}"})

"""rl.reward: sim_progress in the VLA trainer (the simulator's own task progress as SRPO's failure reward): a run's
rewards are SRPO's map of its episodes' final ``info["progress"]``, no encoder is built, the recipe's ``srpo:``
section stays valid, and every place without a simulator progress refuses it with one line (exit 2, nothing
written)."""

from pathlib import Path

import pytest
import torch

from grpo.config import ConfigError, load_config
from rewards import RewardBatch
from rewards.sim_progress import SimProgressReward, sim_progress_metadata
from vla_rl.cli import main
from vla_rl.episode_rewards import rollout_scalars
from vla_rl.robot_loop import RobotLoopConfig, check_robot_loop_inputs
from vla_rl.trainer import VLARLConfig, VLARLTrainer
from vla_rl.wm_loop import WorldLoopConfig

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "configs/vla/tabletop_reach_one_progress.yaml")
LOOP = str(ROOT / "configs/world_models/loop_reach_one.yaml")


def test_a_runs_rewards_are_srpos_map_of_the_simulators_progress(tmp_path):
    # the recipe's srpo: section (encoder=progress at a path that does not exist here) stays, unread but progress_max
    cfg = load_config(VLARLConfig, RECIPE, ["rl.reward=sim_progress", f"output_dir={tmp_path / 'run'}", "sft.steps=2",
                                            "sft.demos_per_task=1", "rl.iterations=1", "rl.groups_per_task=3",
                                            "grpo.group_size=3", "env.max_episode_steps=4", "rl.eval_episodes=1",
                                            "rl.eval_every=0", "rl.num_videos=0", "srpo.progress_max=0.5"])
    tr = VLARLTrainer(cfg, quiet=True)
    assert tr.srpo is None  # no encoder built
    specs, _, batch = tr.rollout(0)
    prog = [e.progress for e in batch.episodes]
    assert len(set(prog)) > 3 and all(0.0 <= p < 1.0 for p in prog)  # the simulator's own measure, per episode
    assert torch.equal(tr.rewards(batch, specs).total, torch.zeros(9))  # no success in the batch: no reference, 0
    batch.episodes[4].success, batch.episodes[4].progress = True, 1.0  # one success: the task's failures are graded
    rew = tr.rewards(batch, specs)
    want = SimProgressReward(0.5)(RewardBatch(metadata=sim_progress_metadata(
        [s.env_name for s in specs], batch.success, [e.progress for e in batch.episodes])))
    torch.testing.assert_close(rew.total, want.total)
    fail = [i for i in range(9) if i != 4]
    assert rew.total[4] == 1.0 and float(rew.total[fail].max()) <= 0.5 and float(rew.total[fail].min()) < 0.01
    top = max(fail, key=lambda i: prog[i])
    assert rew.total[top] == rew.total[fail].max()  # the failure closest to the ball by the simulator: highest
    # the logged diagnostic: the failures' reward against the simulator's progress, noise 0: the same order
    scal = rollout_scalars(tr, batch, specs, rew, batch.success, kept=3, t_roll=1.0, t_rew=0.1)
    assert scal["reward/srpo_vs_env_progress_spearman"] == pytest.approx(1.0)
    assert scal["reward/srpo_failure_mean"] == pytest.approx(float(rew.total[fail].mean()))


def test_the_noise_knob_is_checked_and_only_with_sim_progress(tmp_path):
    cfg = load_config(VLARLConfig, RECIPE, ["rl.reward=sim_progress", "rl.sim_progress_noise=3"])
    assert cfg.rl.sim_progress_noise == 3.0
    for bad in ("-0.5", "nan", "inf"):
        with pytest.raises((ValueError, ConfigError), match=r"rl.sim_progress_noise"):
            load_config(VLARLConfig, RECIPE, ["rl.reward=sim_progress", f"rl.sim_progress_noise={bad}"])
    rc = main(["train", RECIPE, "rl.reward=binary", "rl.sim_progress_noise=1", f"output_dir={tmp_path / 'r'}"])
    assert rc == 2 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("tasks", ["[robosuite/Lift]", "[tabletop/reach_one,libero/libero_spatial/0]"])
def test_tasks_without_a_simulator_progress_are_refused(tasks):
    with pytest.raises(ValueError, match=r"rl.reward=sim_progress: env.tasks \[.*\] report no dense simulator "
                                         r"progress \(expected tasks of tabletop/\*"):
        load_config(VLARLConfig, RECIPE, ["rl.reward=sim_progress", f"env.tasks={tasks}"])


def test_the_world_model_loop_and_the_robot_loop_refuse_it(tmp_path, capsys):
    with pytest.raises((ValueError, ConfigError), match="world model's imagined episodes carry no simulator progress"):
        load_config(WorldLoopConfig, LOOP, ["vla.rl.reward=sim_progress"])
    rc = main(["loop", LOOP, "vla.rl.reward=sim_progress", f"output_dir={tmp_path / 'loop'}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "vla.rl.reward=sim_progress" in err and not (tmp_path / "loop").exists()
    robot = RobotLoopConfig(output_dir=str(tmp_path / "robot"))
    robot.vla.rl.reward = "sim_progress"
    with pytest.raises(ValueError, match="a robot's recorded episodes carry no simulator progress"):
        check_robot_loop_inputs(robot, writes=False)
    # on the tabletop tasks the dry run passes (the srpo: section is kept, as for binary)
    assert main(["train", RECIPE, "rl.reward=sim_progress", "--dry-run"]) == 0

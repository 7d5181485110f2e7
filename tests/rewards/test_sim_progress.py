"""rl.reward: sim_progress (rewards.sim_progress): SRPO's failure rule and scale on the simulator's own progress,
read from real tabletop episodes (MuJoCo), and the config's refusals where no simulator progress exists."""

import math

import numpy as np
import pytest
import torch

import sims
from rewards import RewardBatch
from rewards.sim_progress import SimProgressReward, has_sim_progress, sim_progress_metadata
from rewards.srpo import SRPOConfig, srpo_progress


def _episode(init_seed: int, expert_steps: int, max_steps: int = 30) -> tuple[bool, float]:
    """A real tabletop/reach_one episode: ``expert_steps`` scripted actions, then the arm held still (zero action)
    up to ``max_steps`` or success; ``(success, info["progress"] of the final state)``."""
    env = sims.make("tabletop/reach_one", image_size=16)
    try:
        env.reset(seed=init_seed)
        success, progress = False, 0.0
        for t in range(max_steps):
            a = env.unwrapped.expert_action() if t < expert_steps else np.zeros(env.action_space.shape, np.float32)
            _, _, term, trunc, info = env.step(a)
            success, progress = bool(info["success"]), float(info["progress"])
            if success or term or trunc:
                break
        return success, progress
    finally:
        env.close()


@pytest.fixture(scope="module")
def episodes():
    """One success (the expert to the end) and three failures cut after 0, 2 and 4 expert steps, one initial state."""
    return [_episode(7, 30), _episode(7, 0), _episode(7, 2), _episode(7, 4)]


def _sig(t: float) -> float:
    return 1 / (1 + math.exp(-t))


def test_success_gets_1_and_failures_srpo_map_of_simulator_progress(episodes):
    succ = [s for s, _ in episodes]
    prog = [p for _, p in episodes]
    assert succ == [True, False, False, False] and prog[0] == 1.0
    assert prog[1] < prog[2] < prog[3] < 1.0  # more expert steps, closer to the ball: the simulator's own measure
    out = SimProgressReward(0.6)(RewardBatch(metadata=sim_progress_metadata(["tabletop/reach_one"] * 4,
                                                                            torch.tensor(succ), prog)))
    d = [1 - p for p in prog[1:]]  # SRPO's distance to go, min-max over the failures, 0.6 sigmoid(10 (0.5 - u))
    u = [(x - min(d)) / (max(d) - min(d)) for x in d]
    want = torch.tensor([1.0] + [0.6 * _sig(10 * (0.5 - x)) for x in u])
    torch.testing.assert_close(out.total, want)
    assert out.total[3] > out.total[2] > out.total[1]  # ordered by the simulator's progress
    torch.testing.assert_close(out.components["success"], torch.tensor([1.0, 0, 0, 0]))
    torch.testing.assert_close(out.components["progress"], torch.cat([torch.ones(1), want[1:] / 0.6]))
    torch.testing.assert_close(out.details["sim_progress"], torch.tensor(prog))


def test_equals_srpo_on_a_latent_whose_distance_is_the_simulators(episodes):
    # the ONLY difference from rl.reward=srpo is where the number comes from: SRPO on a 1-D "embedding" 1 - p (the
    # successes at 0, so a failure's distance to the success centre is exactly 1 - p) gives the same rewards
    succ = torch.tensor([s for s, _ in episodes] + [True])
    prog = [p for _, p in episodes] + [1.0]
    tasks = ["tabletop/reach_one"] * 5
    ours = SimProgressReward(0.6)(RewardBatch(metadata=sim_progress_metadata(tasks, succ, prog))).total
    srpo = srpo_progress(torch.tensor([[1.0 - p] for p in prog]), tasks, succ, SRPOConfig(progress_max=0.6)).total
    torch.testing.assert_close(ours, srpo)


def test_no_success_of_the_task_keeps_0_and_a_lone_failure_gets_03(episodes):
    fails = [p for s, p in episodes if not s]
    out = SimProgressReward()(RewardBatch(metadata=sim_progress_metadata(["tabletop/reach_one"] * 3,
                                                                         torch.zeros(3, dtype=torch.bool), fails)))
    assert torch.equal(out.total, torch.zeros(3))  # no reference in the batch: binary 0, as SRPO
    # per task: task B's lone failure is graded (0.3) against B's success, task A (no success) keeps 0
    meta = sim_progress_metadata(["A", "B", "B"], torch.tensor([False, True, False]), [fails[2], 1.0, fails[0]])
    torch.testing.assert_close(SimProgressReward()(RewardBatch(metadata=meta)).total, torch.tensor([0.0, 1.0, 0.3]))


def test_bad_batches_are_refused():
    meta = sim_progress_metadata(["A", "A"], torch.tensor([True, False]), [1.0, 0.2])
    meta[1].pop("progress")
    with pytest.raises(ValueError, match="needs the simulator's 'progress'"):
        SimProgressReward()(RewardBatch(metadata=meta))
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        SimProgressReward()(RewardBatch(metadata=sim_progress_metadata(["A"], torch.tensor([False]), [1.5])))
    with pytest.raises(ValueError, match="progress_max"):
        SimProgressReward(1.0)
    with pytest.raises(ValueError, match="2 episodes but 1 progress"):
        sim_progress_metadata(["A", "A"], torch.tensor([True, False]), [1.0])


def test_which_tasks_have_a_simulator_progress():
    assert has_sim_progress("tabletop/reach_one") and has_sim_progress("tabletop/stack")
    assert not any(has_sim_progress(t) for t in ("robosuite/Lift", "libero/libero_spatial/0", "wm/reach_one", "so100"))


def test_noise_degrades_the_failures_order_to_the_stated_spearman_and_is_repeatable():
    """rl.sim_progress_noise s: the failures' distances get N(0, (s std)^2) noise; over many failures the reward's
    Spearman with the simulator's progress is (6/pi) asin(1 / (2 sqrt(1 + s^2))) for Gaussian progress (0.69 at s = 1,
    0.30 at s = 3); the same batch gets the same reward; s = 0 is the exact oracle; successes stay 1."""
    from scipy.stats import spearmanr
    rng = np.random.default_rng(0)
    n = 4000
    prog = np.clip(0.5 + 0.12 * rng.standard_normal(n), 0.0, 0.999)
    succ = torch.zeros(n, dtype=torch.bool)
    succ[0], prog[0] = True, 1.0
    batch = RewardBatch(metadata=sim_progress_metadata(["tabletop/reach_one"] * n, succ, prog))
    exact = SimProgressReward(0.6)(batch).total
    torch.testing.assert_close(SimProgressReward(0.6, 0.0)(batch).total, exact)
    for s in (1.0, 3.0):
        out = SimProgressReward(0.6, s)(batch).total
        assert out[0] == 1.0 and float(out[1:].max()) <= 0.6
        torch.testing.assert_close(SimProgressReward(0.6, s)(batch).total, out)  # repeatable: seeded by the batch
        rho = spearmanr(out[1:].numpy(), prog[1:]).statistic
        want = 6 / np.pi * np.arcsin(1 / (2 * np.sqrt(1 + s * s)))
        assert abs(rho - want) < 0.04, (s, rho, want)
    with pytest.raises(ValueError, match="noise must be a finite number >= 0"):
        SimProgressReward(0.6, -1.0)

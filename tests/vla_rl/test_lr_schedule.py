"""rl.lr_schedule / rl.lr_min_ratio (issue 22): the RL learning rate as a function of the iteration (constant, linear,
cosine to a floor), checked values, the rate the optimizer applies and logs, and resume safety: a run stopped after
a checkpoint and resumed ends with the same weights as one run straight through."""

import math
import shutil

import pytest
import torch

from grpo.config import load_config
from grpo.metrics import read_jsonl
from vla_rl.config import RLConfig
from vla_rl.trainer import VLARLConfig, VLARLTrainer

# the signal settings of tests/vla_rl/test_distributed.py (SFT from scratch, 300 steps, training on the demo states:
# some successes, so SRPO's advantages are non-zero and every update runs), with a linear decay over 3 iterations
TINY = ["sft.base_policy=null", "sft.lr=1e-3", "policy.flow.eta=1.0", "sft.demos_per_task=2", "sft.steps=300",
        "env.max_episode_steps=20", "rl.train_seeds=[500000,500001]", "rl.groups_per_task=3", "grpo.group_size=2",
        "rl.minibatch_size=8", "rl.inner_epochs=2", "rl.eval_episodes=2", "rl.eval_every=0", "rl.num_videos=0",
        "rl.save_every=1", "rl.keep_last=10", "rl.success_band=[-0.5,1.5]", "srpo.num_frames=3",
        "rl.lr=1e-3", "rl.lr_schedule=linear", "rl.lr_min_ratio=0.2", "rl.iterations=3"]


def test_lr_at_follows_each_schedule():
    const = RLConfig(iterations=10, lr=2e-4)
    assert [const.lr_at(i) for i in (0, 5, 10)] == [2e-4] * 3
    lin = RLConfig(iterations=10, lr=2e-4, lr_schedule="linear", lr_min_ratio=0.1)
    assert lin.lr_at(0) == pytest.approx(2e-4) and lin.lr_at(10) == pytest.approx(2e-5)
    assert lin.lr_at(5) == pytest.approx(2e-4 * (1 - 0.9 * 0.5))
    assert lin.lr_at(50) == pytest.approx(2e-5)  # past the horizon: the floor
    cos = RLConfig(iterations=10, lr=2e-4, lr_schedule="cosine", lr_min_ratio=0.1)
    assert cos.lr_at(0) == pytest.approx(2e-4) and cos.lr_at(10) == pytest.approx(2e-5)
    assert cos.lr_at(5) == pytest.approx(2e-4 * (0.1 + 0.9 * 0.5))  # half way: half way between peak and floor
    assert cos.lr_at(2) == pytest.approx(2e-4 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.2))))
    rates = [cos.lr_at(i) for i in range(11)]
    assert all(a > b for a, b in zip(rates, rates[1:]))  # strictly decreasing to the floor
    zero = RLConfig(iterations=4, lr=1e-3, lr_schedule="cosine", lr_min_ratio=0.0)
    assert zero.lr_at(4) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("over, words", [
    ("rl.lr_schedule=cosin", ["rl.lr_schedule", "cosin", "constant", "linear", "cosine"]),
    ("rl.lr_min_ratio=1.5", ["rl.lr_min_ratio", "1.5", "[0, 1]"]),
    ("rl.lr_min_ratio=-0.1", ["rl.lr_min_ratio", "-0.1", "[0, 1]"]),
    ("rl.lr=0", ["rl.lr", "0", "> 0"]),
])
def test_bad_schedule_values_are_refused_naming_them(over, words):
    with pytest.raises(ValueError) as e:
        load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", [over])
    msg = str(e.value)
    assert "\n" not in msg.strip() and all(w in msg for w in words), msg


def test_optimizer_applies_and_logs_the_scheduled_lr_and_resume_matches_straight(tmp_path):
    straight = tmp_path / "straight"
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", TINY + [f"output_dir={straight}"])
    tr = VLARLTrainer(cfg, quiet=True)
    res = tr.train()
    assert res["iterations"] == 3
    rows = [r for r in read_jsonl(straight / "metrics.jsonl") if "rl/lr" in r]
    assert [r.get("loss/rows", 0) > 0 for r in rows] == [True] * 3, "every iteration must update (the lr must matter)"
    logged = [r["rl/lr"] for r in rows]
    assert logged == pytest.approx([cfg.rl.lr_at(i) for i in range(3)])
    assert logged == pytest.approx([1e-3, 1e-3 * (1 - 0.8 / 3), 1e-3 * (1 - 0.8 * 2 / 3)])
    assert tr.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.rl.lr_at(2))

    # the same run stopped after iteration 2's checkpoint (the later one removed), then resumed: the same weights
    last = sorted((straight / "checkpoints").glob("step_*"))
    assert last[-1].name.endswith("3")
    shutil.rmtree(last[-1])
    cfg2 = load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", TINY + [f"output_dir={straight}"])
    tr2 = VLARLTrainer(cfg2, quiet=True)
    res2 = tr2.train()
    assert res2["resumed"] and res2["iterations"] == 3
    assert tr2.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.rl.lr_at(2))
    a, b = tr.policy.state_dict(), tr2.policy.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs between the resumed and the straight run"

"""Gold monitors and the reward-hacking alarm: the statistics see grids and flat images; a reward hacked on purpose
(redness, which trades off against the gold monitor) trips the alarm, which warns or stops after a checkpoint."""

import json
import types

import pytest
import torch

from diffusion_rl.trainer import DiffusionGRPOTrainer
from grpo.config import ConfigError, build_config
from grpo.monitors import HackingAlarm, MonitorConfig, RewardHackingError, unarmed_alarm_note
from rewards.image_stats import build_monitor, colour_variance, low_freq_ratio

from .conftest import redness
from .test_trainer import small_cfg


def greenness(batch):
    """The gold measure of this test: mean green. Training on redness pushes it down: the hack."""
    im = batch.images
    return types.SimpleNamespace(total=im[:, 1].mean((1, 2)), components={})


def _batch(images):
    return types.SimpleNamespace(images=images)


def test_statistics_see_grids_and_flat_images():
    torch.manual_seed(0)
    smooth = torch.nn.functional.interpolate(torch.rand(2, 3, 4, 4), size=32, mode="bilinear")
    grid = smooth.clone()
    grid[..., ::2, :] = 1 - grid[..., ::2, :]  # a 2-pixel stripe artifact
    assert (low_freq_ratio(_batch(smooth)).total > 0.95).all()
    assert (low_freq_ratio(_batch(grid)).total < low_freq_ratio(_batch(smooth)).total - 0.3).all()
    flat = torch.full((2, 3, 8, 8), 0.3)
    assert torch.equal(colour_variance(_batch(flat)).total, torch.zeros(2))
    assert (colour_variance(_batch(smooth)).total > 0).all()
    assert build_monitor("low_freq_ratio") is low_freq_ratio
    with pytest.raises(ValueError, match="unknown reward 'nope'"):
        build_monitor("nope")
    with pytest.raises(ConfigError, match="'eval.action' expects one of 'warn', 'stop', got 'loud'"):
        build_config(MonitorConfig, {"action": "loud"}, "eval")


def test_alarm_rule():
    said = []
    a = HackingAlarm(patience=2)
    assert a.observe(0, 0.1, {"m": 1.0}, said.append) == []
    assert a.observe(1, 0.2, {"m": 0.9}, said.append) == []
    assert a.observe(2, 0.3, {"m": 0.8}, said.append) == ["m"] and "monitor 'm' fell 1 -> 0.8" in said[0]
    b = HackingAlarm(patience=2)  # reward rising and the monitor rising too: fine; a flat step breaks the streak
    for i, (r, m) in enumerate([(0.1, 1.0), (0.2, 1.1), (0.3, 1.2), (0.3, 1.1), (0.4, 1.0)]):
        assert b.observe(i, r, {"m": m}, said.append) == []
    c = HackingAlarm(patience=1, action="stop")
    c.observe(0, 0.1, {"m": 1.0})
    with pytest.raises(RewardHackingError, match="eval.action=stop"):
        c.observe(1, 0.2, {"m": 0.9})
    c.load_state_dict(b.state_dict())
    assert c.history == b.history


def _cfg(tmp_path, action):
    cfg = small_cfg(tmp_path, train__iterations=8, train__lr=3e-2, train__eval_every=1, grpo__clip_low=0.2)
    cfg.eval.monitors = ["tests.diffusion_rl.test_monitors:greenness", "colour_variance"]
    cfg.eval.patience = 2
    cfg.eval.action = action
    return cfg


def test_hacked_reward_trips_the_alarm(tmp_path, capsys):
    tr = DiffusionGRPOTrainer(_cfg(tmp_path, "warn"), reward_fn=redness)
    tr.train(progress=False)
    rows = [json.loads(x) for x in open(tmp_path / "run" / "metrics.jsonl")]
    gold = [r["monitor/tests.diffusion_rl.test_monitors:greenness"] for r in rows
            if "monitor/tests.diffusion_rl.test_monitors:greenness" in r]
    assert len(gold) == 9 and gold[-1] < gold[0]  # before, 7 mid-run, after
    assert any("monitor/colour_variance" in r for r in rows)
    out = capsys.readouterr().out
    assert "reward hacking suspected" in out and "greenness" in out
    # the alarm's history is in the checkpoint: a resumed run goes on counting
    from grpo.checkpoint import latest_checkpoint

    tr3 = DiffusionGRPOTrainer(_cfg(tmp_path, "warn"), reward_fn=redness)
    tr3.load(latest_checkpoint(tmp_path / "run" / "checkpoints"))
    n = len(tr3.alarm.history)
    assert n >= 8 and tr3.alarm.history == tr.alarm.history[:n]
    tr2 = DiffusionGRPOTrainer(_cfg(tmp_path / "stop", "stop"), reward_fn=redness)
    with pytest.raises(RewardHackingError):
        tr2.train(progress=False)
    ckpts = sorted(p.name for p in (tmp_path / "stop" / "run" / "checkpoints").iterdir())
    assert any(n.startswith("step_") for n in ckpts) and tr2.iteration < 8, ckpts


def test_shipped_defaults_warn_on_a_hacked_reward(tmp_path, capsys):
    """The shapes demo recipe, its eval section as shipped, trained on a reward hacked on purpose (an empty canvas
    scores best): within a few iterations the samples lose their objects and the alarm warns (issue 36). Only the run's
    length, cadence and learning rate are shortened."""
    from diffusion_rl.config import RewardConfig
    from diffusion_rl.trainer import DiffusionRLConfig
    from grpo.config import load_config

    recipe = "configs/diffusion/shapes_branch.yaml"
    cfg = load_config(DiffusionRLConfig, recipe, [f"output_dir={tmp_path / 'run'}", "train.iterations=6",
                                                  "train.eval_every=2", "prompts.num_eval=8", "train.lr=0.006",
                                                  "train.prompts_per_iter=2", "train.log_images=false",
                                                  "train.save_every=100"])
    assert cfg.eval == load_config(DiffusionRLConfig, recipe).eval and cfg.eval.action == "warn"
    cfg.reward = RewardConfig(name="tests.bad_rewards:empty_canvas")
    DiffusionGRPOTrainer(cfg).train(progress=False)
    out = capsys.readouterr().out
    assert "reward hacking suspected" in out and "monitor 'shapes_verifier' fell" in out, out[-2000:]


def test_a_run_too_short_for_the_alarm_says_so(tmp_path, capsys):
    """Evaluations before, every eval_every short of the last, and after: 2 + (iterations - 1) // eval_every; fewer
    than patience + 1 and the alarm cannot fire (was: silent; shapes_branch.yaml's patience 2 at 20 iterations with
    eval_every 20 let a monitor fall 0.84 -> 0.42 unannounced)."""
    assert "makes 2" in unarmed_alarm_note(2, 20, 20) and "train.eval_every=20" in unarmed_alarm_note(2, 20, 20)
    assert unarmed_alarm_note(2, 100, 50) is None and unarmed_alarm_note(2, 21, 20) is None  # 0, 50, 100 / 0, 20, 21
    assert unarmed_alarm_note(1, 5, 0) is None and "makes 2" in unarmed_alarm_note(3, 5, 0)
    assert "rl.iterations=4" in unarmed_alarm_note(3, 4, 2, "rl")  # 0, 2, 4: three of the four needed
    assert unarmed_alarm_note(3, 200, 25, "rl", before=False) is None  # the VLA demo: 25, 50, ..., 200
    assert "makes 1" in unarmed_alarm_note(3, 30, 30, "rl", before=False)  # vla-rl: no training reward before RL
    cfg = _cfg(tmp_path, "warn")
    cfg.train.iterations, cfg.train.eval_every = 1, 0
    DiffusionGRPOTrainer(cfg, reward_fn=redness).train(progress=False)
    assert "eval.patience=2 compares 3 evaluations, and this run makes 2" in capsys.readouterr().out

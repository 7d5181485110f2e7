"""The VLA trainer's on-policy self-check on action chunks: 0 on a correct run, each injected cause raises the alarm
(the world-model loop's inner GRPO is this trainer, so it gets the same check)."""

import pytest
import torch
import torch.nn.functional as F

from grpo.config import load_config
from grpo.metrics import read_jsonl
from grpo.onpolicy import OnPolicyError
from rewards.base import RewardOutput
from vla_rl.trainer import VLARLConfig, VLARLTrainer

from .test_trainer_e2e import TINY


def _trainer(tmp_path, action="warn", tol=1e-4):
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml",
                      TINY + [f"output_dir={tmp_path / 'run'}", "rl.iterations=1", "rl.reward=binary",
                              "rl.save_every=100",
                              f"rl.onpolicy_action={action}", f"rl.onpolicy_tol={tol}", "rl.num_videos=0"])
    tr = VLARLTrainer(cfg, quiet=True)
    orig = tr.rewards

    def graded(batch, specs=None):  # distinct rewards, so every group carries signal and the update runs
        out = orig(batch, specs)
        return RewardOutput(total=torch.linspace(0, 1, len(out.total)), components={})
    tr.rewards = graded
    return tr


def _dropout(tr):  # dropout in the training forward (model.train()) only
    tr.policy.fuse.register_forward_hook(lambda m, i, o: F.dropout(o, 0.1, m.training))


def _bf16_rollout(tr):  # the rollout under bf16 autocast, the update's recompute in fp32
    orig = tr.rollout

    def rollout(it):
        tr.policy.set_mixed_precision("bf16")
        try:
            return orig(it)
        finally:
            tr.policy.set_mixed_precision("fp32")
    tr.rollout = rollout


def _batch_dependent(tr):  # a kernel whose output depends on the batch's composition (rollout: the envs' batch;
    tr.policy.fuse.register_forward_hook(lambda m, i, o: o + 1e-3 * o.mean(0, keepdim=True))  # update: a minibatch)


def _rows(tmp_path):
    return [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "rollout/success_rate" in r]


def test_correct_run_has_zero_gap(tmp_path):
    _trainer(tmp_path, action="stop").train()
    (row,) = _rows(tmp_path)
    assert row["onpolicy/checked"] > 0 and row["onpolicy/max_abs_dlogp"] == 0.0 and row["onpolicy/max_ratio_dev"] == 0.0


@pytest.mark.parametrize("inject,cause,tol", [(_dropout, "dropout", 1e-4), (_bf16_rollout, "precision", 1e-4),
                                              (_batch_dependent, "batch-size-dependent", 1e-6)])
def test_injected_cause_is_caught(tmp_path, capsys, inject, cause, tol):
    tr = _trainer(tmp_path, tol=tol)
    inject(tr)
    tr.train()
    (row,) = _rows(tmp_path)
    assert row["onpolicy/max_abs_dlogp"] > tol and row["onpolicy/mean_abs_dlogp"] > 0
    out = capsys.readouterr().out
    assert "off-policy before the first update" in out and cause in out and "rl.onpolicy_tol" in out
    tr2 = _trainer(tmp_path / "stop", action="stop", tol=tol)
    inject(tr2)
    with pytest.raises(OnPolicyError, match="rl.onpolicy_action=stop"):
        tr2.train()


def test_reward_hacking_alarm_on_real_success(tmp_path, capsys):
    """The training reward rises at every evaluation while held-out real success falls: the alarm warns (the VLA's
    gold monitor is the simulator's success beside the trained reward); a user monitor list is refused."""
    tr = _trainer(tmp_path)
    tr.cfg.rl.iterations, tr.cfg.rl.eval_every, tr.alarm.patience = 3, 1, 2
    rising = iter([0.1, 0.2, 0.3, 0.4])
    orig = tr.rewards

    def hacked(batch, specs=None):
        out = orig(batch, specs)
        return RewardOutput(total=next(rising) + torch.linspace(0, 1e-3, len(out.total)), components={})
    tr.rewards = hacked
    from vla_rl import heldout_eval as T  # the trainer's held-out evaluation
    falling = iter([0.9, 0.6, 0.3, 0.1])
    real = T.evaluate

    def fake_eval(*a, **k):
        res = real(*a, **k)
        res.success_rate = next(falling)
        return res
    T.evaluate = fake_eval
    try:
        tr.train()
    finally:
        T.evaluate = real
    rows = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "monitor/success_rate" in r]
    assert len(rows) == 3, rows
    out = capsys.readouterr().out
    assert "reward hacking suspected" in out, [(r["monitor/train_reward"], r["monitor/success_rate"]) for r in rows]
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", TINY + [f"output_dir={tmp_path / 'x'}",
                                                                               "eval.monitors=[foo]"])
    with pytest.raises(ValueError, match="eval.monitors: vla-rl's gold monitor"):
        VLARLTrainer(cfg, quiet=True)

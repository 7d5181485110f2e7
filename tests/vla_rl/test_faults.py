"""Faults in a vla-rl run: a NaN reward skips that iteration's update (logged, weights untouched) and the run goes
on; NaN rewards K iterations in a row abort with a clear message."""

import math

import pytest
import torch

from grpo.checkpoint import load_checkpoint
from grpo.config import load_config
from grpo.metrics import read_jsonl
from grpo.train_step import NonFiniteError
from rewards.base import RewardOutput
from vla_rl.trainer import VLARLConfig, VLARLTrainer

from .test_trainer_e2e import TINY, tiny_policy_and_pool


def _trainer(tmp_path, *extra):
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml",
                      TINY + [f"output_dir={tmp_path / 'run'}", "rl.reward=binary", "rl.save_every=100", *extra])
    return VLARLTrainer(cfg, quiet=True)


def _nan_on(trainer, bad_calls):
    """Wrap ``trainer.rewards`` so that the listed calls (0-based RL iterations) return NaN totals."""
    orig, calls, snapshots = trainer.rewards, [0], {}

    def rewards(batch, specs=None):
        out = orig(batch, specs)
        it = calls[0]
        calls[0] += 1
        snapshots[it] = [p.detach().clone() for p in trainer.policy.parameters()]
        if it in bad_calls:
            nan = torch.full_like(out.total, float("nan"))
            return RewardOutput(total=nan, components={k: nan for k in out.components})
        return out

    trainer.rewards = rewards
    return snapshots


def test_nan_reward_skips_that_update_and_the_run_continues(tmp_path):
    tr = _trainer(tmp_path, "rl.iterations=3")
    snaps = _nan_on(tr, {1})
    res = tr.train()
    assert res["iterations"] == 3
    rows = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "rollout/success_rate" in r]
    assert [r["skipped_updates"] for r in rows] == [0, 1, 1]
    assert "loss/loss" not in rows[1] and all(math.isfinite(r["reward/mean"]) for r in rows)
    # iteration 1's update was skipped: the weights seen at iteration 2's reward equal those at iteration 1's
    assert all(torch.equal(a, b) for a, b in zip(snaps[1], snaps[2]))
    assert all(math.isfinite(float(p.detach().abs().sum())) for p in tr.policy.parameters())


def test_nan_rewards_in_a_row_abort_with_a_clear_message(tmp_path):
    tr = _trainer(tmp_path, "rl.iterations=5", "grpo.max_nonfinite=2")
    _nan_on(tr, {0, 1, 2, 3, 4})
    with pytest.raises(NonFiniteError, match="2 consecutive updates skipped.*non-finite reward"):
        tr.train()


def test_simulator_that_raises_fails_its_episode_and_is_replaced():
    from vla_rl.rollout import EpisodeSpec, run_episodes

    _, pool, policy = tiny_policy_and_pool()
    broken = pool.get("tabletop/reach", 3)[1]
    step = broken.step

    def crash(action, _n=[0]):  # noqa: B006  (the list is the call counter, shared across calls on purpose)
        _n[0] += 1
        if _n[0] == 3:
            raise RuntimeError("injected simulator crash")
        return step(action)

    broken.step = crash
    specs = [EpisodeSpec("tabletop/reach", 5, 0, s) for s in range(3)]
    with pytest.warns(RuntimeWarning, match="injected simulator crash"):
        b = run_episodes(policy, pool, specs, 8, generator=torch.Generator().manual_seed(0))
    bad = b.episodes[1]
    assert bad.failed and not bad.success and "injected simulator crash" in bad.error and bad.length == 2
    assert [e.length for i, e in enumerate(b.episodes) if i != 1] == [8, 8]  # the others ran on
    assert pool.discarded == 1 and all(e is not broken for e in pool.get("tabletop/reach", 3))
    b2 = run_episodes(policy, pool, specs, 8, generator=torch.Generator().manual_seed(0))  # a fresh env took its place
    assert not any(e.error for e in b2.episodes) and [e.length for e in b2.episodes] == [8, 8, 8]
    pool.close()


def test_iteration_without_signal_leaves_the_weights_alone(tmp_path):
    """Groups kept by a wide success band but with all-equal rewards give zero advantages: no optimizer step (Adam's
    momentum from the previous update would otherwise still move the weights)."""
    tr = _trainer(tmp_path, "rl.iterations=2")
    orig, calls, snap = tr.rewards, [0], {}

    # iteration 0: distinct rewards (signal); iteration 1: all equal (every advantage is 0)
    def rewards(batch, specs=None):
        out = orig(batch, specs)
        if calls[0] == 1:
            snap["w"] = {k: v.clone() for k, v in tr.policy.state_dict().items()}
        r = torch.arange(len(out.total), dtype=torch.float32) if calls[0] == 0 else torch.zeros_like(out.total)
        calls[0] += 1
        return RewardOutput(total=r, components={k: r for k in out.components})

    tr.rewards = rewards
    tr.train()
    rows = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "rollout/success_rate" in r]
    assert rows[0]["loss/rows"] > 0 and rows[1]["loss/rows"] == 0.0 and "loss/loss" not in rows[1]
    after = tr.policy.state_dict()
    assert any(not torch.equal(snap["w"][k], v) for k, v in load_checkpoint(
        sorted((tmp_path / "run" / "checkpoints").glob("step_*"))[0])["model"].items())  # iteration 0 did update
    assert all(torch.equal(snap["w"][k], after[k]) for k in after)  # iteration 1 did not

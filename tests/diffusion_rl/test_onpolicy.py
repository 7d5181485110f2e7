"""The diffusion trainer's on-policy self-check: 0 on a correct run, and each injected cause raises the alarm."""

import contextlib

import pytest
import torch
import torch.nn.functional as F

from diffusion_rl.trainer import DiffusionGRPOTrainer
from grpo.onpolicy import OnPolicyError

from .conftest import redness
from .test_trainer import small_cfg


def _trainer(tmp_path, action="warn", tol=1e-4, **over):
    cfg = small_cfg(tmp_path, train__iterations=1, train__onpolicy_action=action, train__onpolicy_tol=tol, **over)
    return DiffusionGRPOTrainer(cfg, reward_fn=redness)


def _out(o):  # the transformer's output tensor (diffusers returns an output object or a tuple)
    return o[0] if isinstance(o, tuple) else o.sample


def _dropout(tr):  # a dropout the training forward runs (adapter.train(True)) and the rollout does not
    def hook(m, i, o):
        return (F.dropout(_out(o), 0.1, m.training),)
    tr.adapter.transformer.register_forward_hook(hook)


def _bf16_rollout(tr):  # the rollout (no grad) under bf16 autocast, the training recompute in fp32
    t = tr.adapter.transformer
    orig = t.forward

    def fwd(*a, **k):
        with torch.autocast("cpu", torch.bfloat16) if not torch.is_grad_enabled() else contextlib.nullcontext():
            return orig(*a, **k)
    t.forward = fwd


def _batch_dependent(tr):  # a kernel whose result depends on the batch's composition, and an update on a sub-batch
    def hook(m, i, o):
        v = _out(o)
        return (v + 1e-3 * v.mean(0, keepdim=True),)
    tr.adapter.transformer.register_forward_hook(hook)
    credit = tr.credit

    def drop_half(*a):
        adv, keep = credit(*a)
        keep = keep.clone()
        keep[::2] = False  # the update recomputes half of each record: another batch than the rollout's
        return adv, keep
    tr.credit = drop_half


def _unseen_noise(tr, monkeypatch):  # the sampler perturbs its sample after the log-prob was taken
    import dataclasses

    from grpo import flow_sde  # the samplers' one chain (flow_sde.flow_chain -> chain_step) steps through it

    real = flow_sde.sde_step

    def noisy(*a, **k):
        out = real(*a, **k)
        if k.get("prev_sample") is None and float(out.std.max()) > 0:
            out = dataclasses.replace(out,
                                      prev_sample=out.prev_sample + 0.05 * out.std * torch.randn_like(out.prev_sample))
        return out
    monkeypatch.setattr(flow_sde, "sde_step", noisy)


def test_sampler_noise_the_log_prob_does_not_see_is_caught(tmp_path, capsys, monkeypatch):
    tr = _trainer(tmp_path)
    _unseen_noise(tr, monkeypatch)
    s = tr.step()
    assert s["onpolicy/max_abs_dlogp"] > tr.cfg.train.onpolicy_tol
    assert "noise the log-prob does not see" in capsys.readouterr().out


def test_correct_run_has_zero_gap(tmp_path, capsys):
    tr = _trainer(tmp_path, action="stop")
    s = tr.step()
    assert s["onpolicy/checked"] > 0
    assert s["onpolicy/max_abs_dlogp"] == 0.0 and s["onpolicy/mean_abs_dlogp"] == 0.0
    assert s["onpolicy/max_ratio_dev"] == 0.0


# the default tolerance (1e-4) catches dropout (gap ~3e-2) and a bf16 rollout (~3e-4); a batch-dependent kernel's gap
# is small (here ~6e-6, on GPUs' bf16 kernels larger), caught by a strict tolerance (a correct run's gap is exactly 0)
@pytest.mark.parametrize("inject,cause,tol", [(_dropout, "dropout", 1e-4), (_bf16_rollout, "precision", 1e-4),
                                              (_batch_dependent, "batch-size-dependent", 1e-7)])
def test_injected_cause_is_caught(tmp_path, capsys, inject, cause, tol):
    tr = _trainer(tmp_path, tol=tol)
    inject(tr)
    s = tr.step()  # warn: the run goes on, the gap is logged
    assert s["onpolicy/max_abs_dlogp"] > tr.cfg.train.onpolicy_tol
    assert s["onpolicy/max_ratio_dev"] > 0
    out = capsys.readouterr().out
    assert "off-policy before the first update" in out and cause in out and "train.onpolicy_tol" in out
    tr2 = _trainer(tmp_path / "stop", action="stop", tol=tol)
    inject(tr2)
    with pytest.raises(OnPolicyError, match="train.onpolicy_action=stop"):
        tr2.step()


def test_cli_stop_is_one_line_exit_1(tmp_path, capsys, monkeypatch):
    """A run stopped by the check ends the CLI with one line naming the gap and the causes, exit 1."""
    from diffusion_rl import cli, trainer

    real_init = trainer.DiffusionGRPOTrainer.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        _dropout(self)
    monkeypatch.setattr(trainer.DiffusionGRPOTrainer, "__init__", init)
    rc = cli.main(["train", "configs/diffusion/tiny_sd3_flat.yaml", f"output_dir={tmp_path / 'run'}",
                   "train.iterations=1", "train.onpolicy_action=stop", "prompts.num_eval=2", "train.log_images=false"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]  # (the rest is the progress bar)
    assert rc == 1 and "Traceback" not in err and len(lines) == 1
    assert lines[0].startswith("error: iteration 1: off-policy") and "dropout" in lines[0]

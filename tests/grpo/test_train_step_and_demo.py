import pytest
import torch

from grpo import demo
from grpo.config import ConfigError, build_config, load_config
from grpo.metrics import read_jsonl
from grpo.train_step import (
    GRPOConfig,
    NonFiniteError,
    NonFiniteGuard,
    backward_if_finite,
    compute_advantages,
    guarded_step,
)


def test_nan_loss_and_grad_skip_then_abort():
    lin = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    guard = NonFiniteGuard(max_consecutive=2)
    w0 = lin.weight.detach().clone()
    assert not backward_if_finite(lin(torch.ones(1, 2)).sum() * float("nan"), guard)
    st = guarded_step(lin.parameters(), opt, 1.0, guard)
    assert st.skipped and "loss" in st.reason and torch.equal(lin.weight, w0)
    # a good step resets the counter and applies
    backward_if_finite(lin(torch.ones(1, 2)).sum(), guard)
    assert not guarded_step(lin.parameters(), opt, 1.0, guard).skipped and not torch.equal(lin.weight, w0)
    # non-finite gradient (finite loss): skipped, then abort on the second in a row
    for i in range(2):
        x = torch.tensor([[float("inf"), 1.0]])
        (lin(x) * 0).sum().backward()
        if i == 0:
            st = guarded_step(lin.parameters(), opt, 1.0, guard)
            assert st.skipped and "gradient" in st.reason
        else:
            with pytest.raises(NonFiniteError, match="2 consecutive updates skipped"):
                guarded_step(lin.parameters(), opt, 1.0, guard)
    assert guard.total_skipped == 3


def test_compute_advantages_dispatch():
    cfg = GRPOConfig(group_size=2, advantage="gdpo", adv_clip=None)
    g = torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="gdpo"):
        compute_advantages(cfg, torch.zeros(4), g)
    a = compute_advantages(cfg, torch.zeros(4), g, {"x": torch.tensor([0.0, 1.0, 0.0, 1.0])})
    assert a.values.shape == (4,)
    med = compute_advantages(GRPOConfig(group_size=3, advantage="median"), torch.tensor([1.0, 2.0, 3.0]),
                             torch.zeros(3))
    assert int(med.mask.sum()) == 3  # MC-GRPO's reference keeps the pivot (advantage 0) in the loss's mean
    assert med.values.tolist() == pytest.approx([-1 / 1.001 * 1.5, 0.0, 1 / 1.001 * 1.5])  # MAD 1, 3 / 2 non-zero
    med_std = compute_advantages(GRPOConfig(group_size=3, advantage="median_std"), torch.tensor([1.0, 2.0, 3.0]),
                                 torch.zeros(3))
    assert int(med_std.mask.sum()) == 2
    with pytest.raises(ConfigError, match="'grpo.kl_type' expects one of 'flow', 'flow_exact', 'k3', got 'exact'"):
        build_config(GRPOConfig, {"kl_type": "exact"}, "grpo")


def _toy(tmp_path, *extra):
    return load_config(demo.ToyConfig, "configs/grpo/toy_flow.yaml",
                       [f"output_dir={tmp_path}", "model.pretrain_steps=300", "train.eval_samples=128", *extra])


def test_demo_improves_reward(tmp_path):
    res = demo.train(_toy(tmp_path, "train.iterations=120"))
    assert res["reward_after"] > res["reward_before"] + 0.3, res
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(rows) == 121 and all(torch.isfinite(torch.tensor(r["loss/total"])) for r in rows[:-1])
    assert (tmp_path / "tb").is_dir() and (tmp_path / "checkpoints" / "latest").exists()


def test_demo_resume_is_exact(tmp_path):
    full = demo.train(_toy(tmp_path / "a", "train.iterations=4", "train.save_every=2"))["model"]
    demo.train(_toy(tmp_path / "b", "train.iterations=2", "train.save_every=2"))
    resumed = demo.train(_toy(tmp_path / "b", "train.iterations=4", "train.save_every=2"))["model"]
    for (k, v1), v2 in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(v1, v2), k
    with pytest.raises(ValueError, match="(?s)refusing to resume.*grpo.kl_coef"):
        demo.train(_toy(tmp_path / "b", "train.iterations=6", "grpo.kl_coef=0.5"))


def test_demo_cli_errors(capsys):
    assert demo.main(["configs/grpo/toy_flow.yaml", "grpo.clip_lo=0.1"]) == 2
    assert "unknown config key 'grpo.clip_lo' (did you mean 'clip_low'?)" in capsys.readouterr().err
    assert demo.main(["configs/grpo/toy_flow.yaml", "--dry-run"]) == 0
    assert "NFE 640" in capsys.readouterr().out


def test_call_with_retry_recovers_then_reports_batch():
    from grpo.retry import RetryError, call_with_retry

    calls = []

    def flaky(batch):
        calls.append(1)
        if len(calls) < 2:
            raise RuntimeError("CUDA hiccup")
        return sum(batch)

    assert call_with_retry(flaky, [1, 2], retries=2, backoff_s=0) == 3 and len(calls) == 2

    def broken(batch):
        raise ValueError("bad image")

    with pytest.raises(RetryError, match=r"reward 'x' failed 3 times; last error: ValueError\('bad image'\); batch: "
                                         r"\['a cat'\]") as e:
        call_with_retry(broken, ["a cat"], retries=2, backoff_s=0, what="reward 'x'", describe=lambda b: b)
    assert e.value.batch == ["a cat"]

import math

import pytest
import torch

from grpo.flow_sde import SDE_KINDS, flow_sigmas, sde_step


def _inputs(b=4, shape=(3, 5, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, *shape, generator=g), torch.randn(b, *shape, generator=g)


@pytest.mark.parametrize("kind", ["flow_grpo", "dance_grpo", "cps"])
def test_log_prob_equals_normal_log_prob(kind):
    v, x = _inputs()
    out = sde_step(v, x, 0.6, 0.5, kind=kind, eta=0.7, generator=torch.Generator().manual_seed(1))
    ref = torch.distributions.Normal(out.mean, out.std.expand_as(out.mean)).log_prob(out.prev_sample)
    torch.testing.assert_close(out.log_prob, ref.mean(dim=(1, 2, 3)))
    out_sum = sde_step(v, x, 0.6, 0.5, kind=kind, eta=0.7, prev_sample=out.prev_sample, reduce="sum")
    torch.testing.assert_close(out_sum.log_prob, ref.sum(dim=(1, 2, 3)))
    assert out.stochastic.all()


@pytest.mark.parametrize("kind", ["flow_grpo", "dance_grpo", "cps"])
def test_recompute_with_prev_sample_is_exact(kind):
    v, x = _inputs()
    a = sde_step(v, x, 0.8, 0.7, kind=kind, eta=0.5)
    b = sde_step(v, x, 0.8, 0.7, kind=kind, eta=0.5, prev_sample=a.prev_sample)
    assert torch.equal(a.log_prob, b.log_prob)  # PPO ratio exactly 1 before any update


@pytest.mark.parametrize("kind", ["flow_grpo", "dance_grpo", "cps"])
def test_empirical_mean_and_std(kind):
    x = torch.full((20000, 1), 0.3)
    v = torch.full((20000, 1), -0.8)
    out = sde_step(v, x, 0.5, 0.4, kind=kind, eta=0.6, generator=torch.Generator().manual_seed(0))
    mu, sd = float(out.mean[0, 0]), float(out.std.reshape(-1)[0])
    assert abs(float(out.prev_sample.mean()) - mu) < 4 * sd / math.sqrt(20000)
    assert abs(float(out.prev_sample.std()) - sd) / sd < 0.03


def test_flow_grpo_hand_computed():
    x, v, s, sn, a = torch.tensor([[1.0]]), torch.tensor([[2.0]]), 0.5, 0.4, 0.7
    out = sde_step(v, x, s, sn, kind="flow_grpo", eta=a, noise=torch.zeros(1, 1))
    dt = sn - s
    st = a * math.sqrt(s / (1 - s))
    mean = 1.0 + (2.0 + st**2 / (2 * s) * (1.0 + (1 - s) * 2.0)) * dt
    assert abs(float(out.mean) - mean) < 1e-6
    assert abs(float(out.std) - st * math.sqrt(-dt)) < 1e-6
    # DanceGRPO: std = eta sqrt(-dt); mean = x + v dt - 0.5 eta^2 score dt
    out = sde_step(v, x, s, sn, kind="dance_grpo", eta=a, noise=torch.zeros(1, 1))
    x0 = 1.0 - s * 2.0
    score = -(1.0 - (1 - s) * x0) / s**2
    assert abs(float(out.mean) - (1.0 + 2.0 * dt - 0.5 * a**2 * score * dt)) < 1e-6
    assert abs(float(out.std) - a * math.sqrt(-dt)) < 1e-6


@pytest.mark.parametrize("kind", ["flow_grpo", "dance_grpo", "cps"])
def test_eta_to_zero_recovers_ode(kind):
    v, x = _inputs()
    ode = sde_step(v, x, 0.7, 0.55, kind="ode")
    torch.testing.assert_close(ode.prev_sample, x + v * (0.55 - 0.7))
    assert torch.equal(ode.log_prob, torch.zeros(4)) and not ode.stochastic.any()
    small = sde_step(v, x, 0.7, 0.55, kind=kind, eta=1e-4, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(small.mean, ode.prev_sample, atol=1e-5, rtol=1e-5)
    zero = sde_step(v, x, 0.7, 0.55, kind=kind, eta=0.0)
    torch.testing.assert_close(zero.prev_sample, ode.prev_sample)


def test_per_sample_sigmas_and_dtype():
    v, x = _inputs(b=3)
    s = torch.tensor([0.9, 0.5, 0.2])
    out = sde_step(v.bfloat16(), x.bfloat16(), s, s - 0.1, kind="flow_grpo")
    assert out.log_prob.dtype == torch.float32 and out.prev_sample.dtype == torch.float32
    for i in range(3):
        one = sde_step(v[i:i + 1].bfloat16(), x[i:i + 1].bfloat16(), float(s[i]), float(s[i]) - 0.1,
                       prev_sample=out.prev_sample[i:i + 1])
        torch.testing.assert_close(one.log_prob, out.log_prob[i:i + 1])


def test_cps_last_step_is_deterministic():
    v, x = _inputs(b=2)
    out = sde_step(v, x, 0.1, 0.0, kind="cps", eta=0.5)
    assert not out.stochastic.any() and torch.equal(out.log_prob, torch.zeros(2))


def test_bad_inputs():
    v, x = _inputs()
    with pytest.raises(ValueError, match="unknown SDE kind"):
        sde_step(v, x, 0.5, 0.4, kind="ddim")
    with pytest.raises(ValueError, match="shape"):
        sde_step(v[:, :1], x, 0.5, 0.4)
    with pytest.raises(ValueError, match="sigma"):
        sde_step(v, x, torch.tensor([0.5, 0.4]), 0.3)
    assert set(SDE_KINDS) == {"flow_grpo", "dance_grpo", "cps", "ode"}


def test_flow_sigmas_shift():
    s = flow_sigmas(4)
    torch.testing.assert_close(s, torch.tensor([1.0, 0.75, 0.5, 0.25, 0.0]))
    s3 = flow_sigmas(4, shift=3.0)
    assert float(s3[0]) == 1.0 and float(s3[-1]) == 0.0 and float(s3[2]) == pytest.approx(0.75)

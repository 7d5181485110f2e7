import math

import pytest
import torch

from grpo.flow_sde import SDE_KINDS, flow_sigmas, sde_step


def _inputs(b=4, shape=(3, 5, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, *shape, generator=g), torch.randn(b, *shape, generator=g)


@pytest.mark.parametrize("kind", ["flow_grpo", "dance_grpo", "cps_gaussian"])
def test_log_prob_equals_normal_log_prob(kind):
    v, x = _inputs()
    out = sde_step(v, x, 0.6, 0.5, kind=kind, eta=0.7, generator=torch.Generator().manual_seed(1))
    ref = torch.distributions.Normal(out.mean, out.std.expand_as(out.mean)).log_prob(out.prev_sample)
    torch.testing.assert_close(out.log_prob, ref.mean(dim=(1, 2, 3)))
    out_sum = sde_step(v, x, 0.6, 0.5, kind=kind, eta=0.7, prev_sample=out.prev_sample, reduce="sum")
    torch.testing.assert_close(out_sum.log_prob, ref.sum(dim=(1, 2, 3)))
    assert out.stochastic.all()


@pytest.mark.parametrize("kind", ["flow_grpo", "dance_grpo", "cps", "cps_gaussian"])
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


@pytest.mark.parametrize("kind", ["flow_grpo", "dance_grpo", "cps", "cps_gaussian"])
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


@pytest.mark.parametrize("kind", ["cps", "cps_gaussian"])
def test_cps_last_step_is_deterministic(kind):
    v, x = _inputs(b=2)
    out = sde_step(v, x, 0.1, 0.0, kind=kind, eta=0.5)
    assert not out.stochastic.any() and torch.equal(out.log_prob, torch.zeros(2))
    torch.testing.assert_close(out.prev_sample, x - 0.1 * v)  # sigma_next = 0: x0_hat, no noise
    assert torch.equal(out.std_dev_t, torch.zeros_like(out.std_dev_t))


def test_bad_inputs():
    v, x = _inputs()
    with pytest.raises(ValueError, match="unknown SDE kind"):
        sde_step(v, x, 0.5, 0.4, kind="ddim")
    with pytest.raises(ValueError, match="shape"):
        sde_step(v[:, :1], x, 0.5, 0.4)
    with pytest.raises(ValueError, match="sigma"):
        sde_step(v, x, torch.tensor([0.5, 0.4]), 0.3)
    assert set(SDE_KINDS) == {"flow_grpo", "dance_grpo", "cps", "cps_gaussian", "ode"}


def test_flow_sigmas_shift():
    s = flow_sigmas(4)
    torch.testing.assert_close(s, torch.tensor([1.0, 0.75, 0.5, 0.25, 0.0]))
    s3 = flow_sigmas(4, shift=3.0)
    assert float(s3[0]) == 1.0 and float(s3[-1]) == 0.0 and float(s3[2]) == pytest.approx(0.75)


# ---- the references' formulas at the edge steps (restated by hand: Flow-GRPO's sde_step_with_logprob,
# ---- the official CPS code / Flow-GRPO's sde_type="cps") ------------------------------------------------------------
def _flow_grpo_ref(x, v, s, sn, eta, second_sigma):
    """Flow-GRPO: std_dev_t = eta sqrt(s / (1 - (second_sigma if s == 1 else s))); mean as in its code."""
    dt = sn - s
    st = eta * math.sqrt(s / (1 - (second_sigma if s == 1 else s)))
    mean = [xi * (1 + st**2 / (2 * s) * dt) + vi * (1 + st**2 * (1 - s) / (2 * s)) * dt for xi, vi in zip(x, v)]
    return mean, st * math.sqrt(-dt), st


def test_flow_grpo_sigma_one_matches_reference_example():
    # the example: 10 uniform steps, eta 0.7, sigma 1 -> 0.9, v = [0.5, -1], x = [1, 2]
    sig = flow_sigmas(10)
    x, v = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5, -1.0]])
    out = sde_step(v, x, float(sig[0]), float(sig[1]), kind="flow_grpo", eta=0.7, sigma_max=float(sig[1]),
                   noise=torch.zeros(1, 2))
    torch.testing.assert_close(out.mean, torch.tensor([[0.705, 1.610]]), atol=1e-5, rtol=0)
    assert float(out.std) == pytest.approx(0.700, abs=1e-5)
    assert float(out.std_dev_t) == pytest.approx(0.7 * math.sqrt(1 / 0.1), rel=1e-5)
    mean, std, _ = _flow_grpo_ref([1.0, 2.0], [0.5, -1.0], 1.0, 0.9, 0.7, 0.9)
    torch.testing.assert_close(out.mean, torch.tensor([mean]), atol=1e-6, rtol=1e-6)
    # the step at sigma = 1 needs the schedule's second sigma
    with pytest.raises(ValueError, match="sigma_max"):
        sde_step(v, x, 1.0, 0.9, kind="flow_grpo", eta=0.7)


def test_flow_grpo_second_sigma_above_099_is_not_capped():
    # 40 steps at shift 3: sigmas[1] = 0.9915 > 0.99; only the sigma = 1 step uses it, in the denominator only
    sig = flow_sigmas(40, shift=3.0)
    s1 = float(sig[1])
    assert s1 > 0.99
    x, v = torch.tensor([[0.3, -1.2]]), torch.tensor([[0.7, 0.1]])
    for i in (0, 1, 2):
        s, sn = float(sig[i]), float(sig[i + 1])
        out = sde_step(v, x, s, sn, kind="flow_grpo", eta=0.7, sigma_max=s1, noise=torch.zeros(1, 2))
        mean, std, st = _flow_grpo_ref([0.3, -1.2], [0.7, 0.1], s, sn, 0.7, s1)
        torch.testing.assert_close(out.mean, torch.tensor([mean]), atol=1e-5, rtol=1e-5)
        assert float(out.std) == pytest.approx(std, rel=1e-5)
        assert float(out.std_dev_t) == pytest.approx(st, rel=1e-5)
    # (a 0.99 cap on sigma, as this module once had, would have made step 1's std x0.92)
    assert math.sqrt(0.99 / 0.01) / math.sqrt(s1 / (1 - s1)) == pytest.approx(0.92, abs=0.01)


def test_flow_grpo_last_step_to_sigma_zero():
    sig = flow_sigmas(10, shift=3.0)
    s, sn = float(sig[-2]), 0.0
    x, v = torch.tensor([[0.4, -0.5]]), torch.tensor([[1.5, 0.2]])
    out = sde_step(v, x, s, sn, kind="flow_grpo", eta=0.8, sigma_max=float(sig[1]), noise=torch.ones(1, 2))
    mean, std, st = _flow_grpo_ref([0.4, -0.5], [1.5, 0.2], s, sn, 0.8, float(sig[1]))
    torch.testing.assert_close(out.mean, torch.tensor([mean]), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out.prev_sample, torch.tensor([mean]) + std, atol=1e-6, rtol=1e-5)
    lp = -0.5 - math.log(std) - 0.5 * math.log(2 * math.pi)  # (x - mean) / std = 1 in both dims
    assert float(out.log_prob) == pytest.approx(lp, rel=1e-5)


def test_cps_reference_log_prob_is_minus_squared_error():
    # official CPS / Flow-GRPO cps: log_prob = mean over dims of -(x_next - mean)^2; std = sigma_next sin(eta pi / 2)
    x, v = torch.tensor([[0.2, -0.4, 1.0]]), torch.tensor([[0.3, 0.9, -0.2]])
    s, sn, eta = 0.6, 0.5, 0.5
    xn = torch.tensor([[0.1, 0.0, 0.7]])
    out = sde_step(v, x, s, sn, kind="cps", eta=eta, prev_sample=xn)
    std = sn * math.sin(eta * math.pi / 2)
    x0 = [xi - s * vi for xi, vi in zip([0.2, -0.4, 1.0], [0.3, 0.9, -0.2])]
    e = [xi + (1 - s) * vi for xi, vi in zip([0.2, -0.4, 1.0], [0.3, 0.9, -0.2])]
    mean = [(1 - sn) * a + math.sqrt(sn**2 - std**2) * b for a, b in zip(x0, e)]
    torch.testing.assert_close(out.mean, torch.tensor([mean]), atol=1e-6, rtol=1e-6)
    ref_lp = -sum((a - b) ** 2 for a, b in zip([0.1, 0.0, 0.7], mean)) / 3
    assert float(out.log_prob) == pytest.approx(ref_lp, rel=1e-5)
    assert float(out.std) == pytest.approx(std) and float(out.std_dev_t) == pytest.approx(std)
    # cps_gaussian: the exact density; its log-ratio between two means is the reference's / (2 std^2)
    v2 = v + 0.05
    g1 = sde_step(v, x, s, sn, kind="cps_gaussian", eta=eta, prev_sample=xn).log_prob
    g2 = sde_step(v2, x, s, sn, kind="cps_gaussian", eta=eta, prev_sample=xn).log_prob
    r2 = sde_step(v2, x, s, sn, kind="cps", eta=eta, prev_sample=xn).log_prob
    assert float(g2 - g1) == pytest.approx(float(r2 - out.log_prob) / (2 * std**2), rel=1e-4)


def test_std_dev_t_is_the_references_kl_scale():
    v, x = _inputs(b=2)
    fg = sde_step(v, x, 0.6, 0.5, kind="flow_grpo", eta=0.7)
    torch.testing.assert_close(fg.std_dev_t, fg.std / math.sqrt(0.1))
    dg = sde_step(v, x, 0.6, 0.5, kind="dance_grpo", eta=0.7)
    torch.testing.assert_close(dg.std_dev_t, torch.full_like(dg.std_dev_t, 0.7))
    ode = sde_step(v, x, 0.6, 0.5, kind="ode")
    assert torch.equal(ode.std_dev_t, torch.zeros_like(ode.std_dev_t))


def test_flow_chain_is_the_loop_of_sde_and_ode_steps_per_row():
    """``flow_chain`` with a per-row ``[B, T]`` mask equals the hand-written loop: ``sde_step`` on SDE rows with the
    hooked noise, the Euler step ``x + v dt`` (log-prob 0) on the others; records keep every latent."""
    from grpo.flow_sde import flow_chain

    g = torch.Generator().manual_seed(3)
    sig = flow_sigmas(4, shift=3.0)
    w = torch.randn(5, 5, generator=g)
    x0 = torch.randn(3, 5, generator=g)
    eps = torch.randn(4, 3, 5, generator=g)
    mask = torch.tensor([[1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.bool)

    def vel(i, z):
        return torch.tanh(z @ w) * float(sig[i])

    final, steps = flow_chain(vel, x0, sig, kind="flow_grpo", eta=0.7, sde_mask=mask, noise=lambda i: eps[i])
    x = x0
    for i in range(4):
        v = vel(i, x)
        sde = sde_step(v, x, sig[i], sig[i + 1], kind="flow_grpo", eta=0.7, sigma_max=float(sig[1]), noise=eps[i])
        ode = x + v * (sig[i + 1] - sig[i])
        m = mask[:, i]
        x_next = torch.where(m[:, None], sde.prev_sample, ode)
        assert torch.equal(steps[i].x, x) and torch.equal(steps[i].x_next, x_next)
        assert torch.equal(steps[i].log_prob, torch.where(m, sde.log_prob, torch.zeros(3)))
        assert torch.equal(steps[i].sde, m) and steps[i].stochastic == bool(m.all())
        x = x_next
    assert torch.equal(final, x)
    # one flag per step: the whole batch; keep=False keeps nothing
    final2, none = flow_chain(vel, x0, sig, kind="flow_grpo", eta=0.7, sde_mask=torch.tensor([1, 0, 1, 0]).bool(),
                              noise=lambda i: eps[i], keep=False)
    assert none == [] and not torch.equal(final2, final)


def test_deterministic_steps_draw_nothing():
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    x, v = torch.randn(2, 3), torch.randn(2, 3)
    for kind, eta in (("ode", 0.7), ("flow_grpo", 0.0)):
        out = sde_step(v, x, 0.5, 0.25, kind=kind, eta=eta, generator=g)
        assert torch.equal(out.prev_sample, x + v * (0.25 - 0.5)) and torch.equal(g.get_state(), state)
    sde_step(v, x, 0.5, 0.25, kind="flow_grpo", eta=0.7, generator=g)
    assert not torch.equal(g.get_state(), state)


def test_mix_sde_mask_window_last_step_and_forced_splits():
    from grpo.flow_sde import mix_sde_mask

    assert mix_sde_mask(5).tolist() == [True, True, True, True, False]  # the last step (sigma -> 0) is ODE
    assert mix_sde_mask(5, sde_last_step=True).all()
    # MixGRPO: a window of 2 over the 4 SDE-able steps, one step per 2 iterations, wrapping around
    assert [mix_sde_mask(5, it, window=2, stride=2).nonzero().flatten().tolist() for it in range(8)] == [
        [0, 1], [0, 1], [1, 2], [1, 2], [2, 3], [2, 3], [0, 1], [0, 1]]
    # BranchGRPO-Mix: split steps are SDE whatever the window says
    assert mix_sde_mask(5, 0, window=1, force=(3,)).nonzero().flatten().tolist() == [0, 3]

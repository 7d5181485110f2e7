import math

import pytest
import torch

from grpo.loss import clipped_pg_loss, flow_kl, flow_kl_scale, k3_kl, reference_kl


def test_clip_boundaries_values_and_gradients():
    # ratios 0.5, 0.9, 1.1, 1.5 against eps_low=0.2, eps_high=0.3 with A=+1 and A=-1
    ratios = torch.tensor([0.5, 0.9, 1.1, 1.5])
    logp_old = torch.zeros(4)
    logp_new = torch.log(ratios).requires_grad_(True)
    out = clipped_pg_loss(logp_new, logp_old, torch.ones(4), clip_low=0.2, clip_high=0.3)
    # A>0: loss = -min(r, clip(r)) -> [-0.5, -0.9, -1.1, -1.3]
    assert float(out.loss.detach()) == pytest.approx((-0.5 - 0.9 - 1.1 - 1.3) / 4, abs=1e-6)
    out.loss.backward()
    # d/dlogp of -r/4 is -r/4 where unclipped; 0 where clipped (r=1.5 > 1.3)
    torch.testing.assert_close(logp_new.grad, torch.tensor([-0.125, -0.225, -0.275, 0.0]))
    assert float(out.clip_frac) == pytest.approx(0.25)

    logp_new = torch.log(ratios).requires_grad_(True)
    out = clipped_pg_loss(logp_new, logp_old, -torch.ones(4), clip_low=0.2, clip_high=0.3)
    # A<0: loss = max(r, clip(r)) -> [0.8, 0.9, 1.1, 1.5]; r=0.5 clipped at 0.8 (no grad)
    assert float(out.loss) == pytest.approx((0.8 + 0.9 + 1.1 + 1.5) / 4, abs=1e-6)
    out.loss.backward()
    torch.testing.assert_close(logp_new.grad, torch.tensor([0.0, 0.225, 0.275, 0.375]))


def test_ratio_one_gives_minus_mean_advantage_and_masks():
    logp = torch.randn(3, 4)
    adv = torch.tensor([1.0, -2.0, 0.5])
    out = clipped_pg_loss(logp, logp, adv)
    assert float(out.loss) == pytest.approx(-float(adv.mean()), abs=1e-6)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    out = clipped_pg_loss(logp, logp, adv, mask)
    assert float(out.loss) == pytest.approx(-(1.0 * 2 + 0.5) / 3, abs=1e-6)
    out_s = clipped_pg_loss(logp, logp, adv, mask, reduction="sample_mean")
    assert float(out_s.loss) == pytest.approx(-(1.0 + 0.5) / 2, abs=1e-6)


def test_ratio_in_fp32_from_bf16():
    lp_new = torch.tensor([[-1000.0, -1000.5]], dtype=torch.bfloat16)
    out = clipped_pg_loss(lp_new, lp_new.clone(), torch.tensor([1.0]))
    assert float(out.ratio_mean) == 1.0


def test_kl_terms():
    m = torch.tensor([[1.0, 2.0]])
    r = torch.tensor([[0.0, 0.0]])
    std = torch.tensor([[0.5]])
    torch.testing.assert_close(flow_kl(m, r, std), torch.tensor([(1 / 0.5 + 4 / 0.5) / 2]))
    assert float(flow_kl(m, r, torch.zeros(1, 1))) == 0.0
    lp, lr = torch.tensor([0.3]), torch.tensor([-0.2])
    d = -0.5
    torch.testing.assert_close(k3_kl(lp, lr), torch.tensor([math.exp(d) - d - 1]))
    logp = torch.zeros(2, 3, requires_grad=True)
    out = clipped_pg_loss(logp, logp.detach(), torch.zeros(2), kl=torch.full((2, 3), 2.0), kl_coef=0.1)
    assert float(out.loss) == pytest.approx(0.2) and float(out.kl) == pytest.approx(2.0)


def test_loss_bad_inputs():
    with pytest.raises(ValueError, match="shape"):
        clipped_pg_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2))
    with pytest.raises(ValueError, match="reduction"):
        clipped_pg_loss(torch.zeros(2), torch.zeros(2), torch.zeros(2), reduction="sum")


def test_flow_kl_default_scale_is_flow_grpos():
    # Flow-GRPO's train_sd3.py: kl = mean((mu - mu_ref)^2) / (2 * std_dev_t^2), std_dev_t without sqrt(-dt);
    # the exact Gaussian KL (kl_type flow_exact) is that / -dt
    import math

    from grpo.flow_sde import flow_sigmas, sde_step

    sig = flow_sigmas(10, shift=3.0)
    g = torch.Generator().manual_seed(0)
    x, v, v_ref = (torch.randn(2, 4, generator=g) for _ in range(3))
    for i in (0, 4, 9):
        s, sn = float(sig[i]), float(sig[i + 1])
        new = sde_step(v, x, s, sn, kind="flow_grpo", eta=0.7, sigma_max=float(sig[1]), noise=torch.zeros(2, 4))
        ref = sde_step(v_ref, x, s, sn, kind="flow_grpo", eta=0.7, sigma_max=float(sig[1]), noise=torch.zeros(2, 4))
        st = 0.7 * math.sqrt(s / (1 - (float(sig[1]) if s == 1 else s)))
        by_hand = ((new.mean - ref.mean) ** 2).mean(dim=1) / (2 * st**2)
        default = flow_kl(new.mean, ref.mean, flow_kl_scale("flow", new.std, new.std_dev_t))
        torch.testing.assert_close(default, by_hand, rtol=1e-5, atol=0)
        exact = flow_kl(new.mean, ref.mean, flow_kl_scale("flow_exact", new.std, new.std_dev_t))
        torch.testing.assert_close(exact, by_hand / (s - sn), rtol=1e-5, atol=0)
    with pytest.raises(ValueError, match="kl_type"):
        flow_kl_scale("k4", new.std, new.std_dev_t)


def test_reference_kl_is_the_one_kl_choice():
    """``reference_kl`` picks Flow-GRPO's mean KL on SDE steps and k3 otherwise, over any leading token dims."""
    from grpo.flow_sde import flow_sigmas, sde_step

    g = torch.Generator().manual_seed(0)
    sig = flow_sigmas(3)
    x = torch.randn(2 * 3, 4, 5, generator=g)  # [B*S, K, A]: 2 chunks x 3 steps
    s, sn = sig[:-1].repeat(2), sig[1:].repeat(2)
    new = sde_step(torch.randn(6, 4, 5, generator=g), x, s, sn, eta=0.7, sigma_max=float(sig[1]),
                   noise=torch.randn(6, 4, 5, generator=g))
    ref = sde_step(torch.randn(6, 4, 5, generator=g), x, s, sn, eta=0.7, sigma_max=float(sig[1]),
                   prev_sample=new.prev_sample)

    def tok(t):  # [B*S, ...] -> [B, S, ...]
        return t.reshape(2, 3, *t.shape[1:])

    lp, rlp = tok(new.log_prob), tok(ref.log_prob)
    for kind in ("flow", "flow_exact"):
        got = reference_kl(kind, lp, rlp, tok(new.mean), tok(ref.mean), tok(new.std), tok(new.std_dev_t))
        want = flow_kl(new.mean, ref.mean, flow_kl_scale(kind, new.std, new.std_dev_t)).reshape(2, 3)
        assert got.shape == (2, 3) and torch.equal(got, want)
    assert torch.equal(reference_kl("k3", lp, rlp, tok(new.mean), tok(ref.mean), tok(new.std), tok(new.std_dev_t)),
                       k3_kl(lp, rlp))
    # no std_dev_t (a Gaussian head's tokens are not SDE steps): k3 whatever kl_type says
    assert torch.equal(reference_kl("flow", lp, rlp, tok(new.mean), tok(ref.mean), tok(new.std)), k3_kl(lp, rlp))
    assert not torch.equal(reference_kl("flow", lp, rlp, tok(new.mean), tok(ref.mean), tok(new.std),
                                        tok(new.std_dev_t)), k3_kl(lp, rlp))
    with pytest.raises(ValueError, match="needs the Gaussian means"):
        reference_kl("flow", lp, rlp, std_dev_t=tok(new.std_dev_t))

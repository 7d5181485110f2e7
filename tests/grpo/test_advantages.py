import pytest
import torch

from grpo.advantages import PerPromptStatTracker, decoupled_advantages, group_advantages
from grpo.loss import clipped_pg_loss


def test_mean_std_advantages_sum_to_zero_per_group():
    g = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2])
    r = torch.tensor([1.0, 2.0, 4.0, 0.0, 0.0, 1.0, 5.0, 3.0, -1.0])
    a = group_advantages(r, g).values
    for k in range(3):
        assert abs(float(a[g == k].sum())) < 1e-5
    # group 0 by hand: mean 7/3, population std
    r0 = r[:3]
    exp = (r0 - r0.mean()) / (r0.std(unbiased=False) + 1e-4)
    torch.testing.assert_close(a[:3], exp)


def test_non_contiguous_groups_and_global_std():
    g = torch.tensor([3, 7, 3, 7])
    r = torch.tensor([1.0, 10.0, 3.0, 30.0])
    a = group_advantages(r, g, std_mode="global", eps=0.0).values
    s = r.std(unbiased=False)
    torch.testing.assert_close(a, torch.tensor([-1.0, -10.0, 1.0, 10.0]) / s)
    a_none = group_advantages(r, g, std_mode="none").values
    torch.testing.assert_close(a_none, torch.tensor([-1.0, -10.0, 1.0, 10.0]))


def test_constant_group_gets_zero_and_clip():
    a = group_advantages(torch.tensor([2.0, 2.0, 2.0]), torch.zeros(3, dtype=torch.long)).values
    assert torch.equal(a, torch.zeros(3))
    a = group_advantages(torch.tensor([0.0, 0.0, 0.0, 100.0]), torch.zeros(4, dtype=torch.long), std_mode="none",
                         clip=5.0).values
    assert float(a.max()) == 5.0 and float(a.min()) == -5.0


def test_median_std_pivot_zero_advantage_and_no_gradient():
    # the named option median_std: G + 1 = 5 samples per group; the median sample is the pivot, masked out
    g = torch.tensor([0] * 5 + [1] * 5)
    r = torch.tensor([0.1, 0.9, 0.5, 0.3, 0.7, 5.0, 1.0, 4.0, 2.0, 3.0])
    adv = group_advantages(r, g, method="median_std")
    assert adv.mask.tolist() == [True, True, False, True, True, True, True, True, True, False]
    assert adv.values[2] == 0 and adv.values[9] == 0
    assert int(adv.mask.sum()) == 8
    # the pivot contributes no gradient through the masked loss
    logp = torch.zeros(10, 3, requires_grad=True)
    out = clipped_pg_loss(logp, logp.detach(), adv.values, adv.mask[:, None])
    out.loss.backward()
    assert torch.all(logp.grad[2] == 0) and torch.all(logp.grad[9] == 0)
    assert torch.all(logp.grad[0] != 0)
    # centred on the median, not the mean
    assert float(adv.values[1]) > 0 and float(adv.values[0]) < 0


def test_median_std_with_ties_masks_exactly_one():
    adv = group_advantages(torch.tensor([1.0, 1.0, 1.0]), torch.zeros(3, dtype=torch.long), method="median_std")
    assert int((~adv.mask).sum()) == 1


def test_median_is_mc_grpo_reference_mad_and_nonzero_factor():
    # MC-GRPO's reference: A = (r - median) / (MAD + 1e-3) * n / #nonzero, computed here by hand
    g = torch.tensor([0] * 5 + [1] * 5)
    r = torch.tensor([0.1, 0.9, 0.5, 0.3, 0.7, 5.0, 1.0, 4.0, 2.0, 2.0])
    adv = group_advantages(r, g, method="median", clip=None)
    # group 0: median 0.5, |r - med| = [0.4, 0.4, 0, 0.2, 0.2] -> MAD 0.2; 4 non-zero of 5
    a0 = [(x - 0.5) / (0.2 + 1e-3) * 5 / 4 for x in [0.1, 0.9, 0.5, 0.3, 0.7]]
    # group 1: median 2.0 (two samples), |r - med| = [3, 1, 2, 0, 0] -> MAD 1; 3 non-zero of 5
    a1 = [(x - 2.0) / (1.0 + 1e-3) * 5 / 3 for x in [5.0, 1.0, 4.0, 2.0, 2.0]]
    torch.testing.assert_close(adv.values, torch.tensor(a0 + a1), rtol=1e-6, atol=1e-6)
    assert adv.mask.all()  # the reference averages the loss over all n samples; the factor is built for that
    # a constant group: all zero (no division by a zero count)
    c = group_advantages(torch.tensor([1.0, 1.0, 1.0]), torch.zeros(3, dtype=torch.long), method="median")
    assert torch.equal(c.values, torch.zeros(3))
    # std_mode / eps do not change the reference rule; clip still applies last
    assert torch.equal(group_advantages(r, g, method="median", std_mode="none", eps=0.5, clip=None).values, adv.values)
    assert float(group_advantages(r, g, method="median", clip=2.0).values.abs().max()) == 2.0


def test_gdpo_keeps_distinct_advantages_where_grpo_collapses():
    # GDPO paper's example: two binary rewards, two rollouts per group.
    # Group A: rollouts (0,0) and (0,1) -> totals 0, 1;  group B: (0,0) and (1,1) -> totals 0, 2.
    g = torch.tensor([0, 0, 1, 1])
    r1 = torch.tensor([0.0, 0.0, 0.0, 1.0])
    r2 = torch.tensor([0.0, 1.0, 0.0, 1.0])
    grpo = group_advantages(r1 + r2, g).values
    torch.testing.assert_close(grpo[:2], grpo[2:], atol=2e-4, rtol=0)  # GRPO: both groups collapse to (-1, +1)
    gdpo = decoupled_advantages({"a": r1, "b": r2}, g, batch_norm=False).values
    assert abs(float(gdpo[3]) - 2 * float(gdpo[1])) < 1e-3  # (1,1) earns twice (0,1)'s advantage
    assert not torch.allclose(gdpo[:2], gdpo[2:])
    gdpo_bn = decoupled_advantages({"a": r1, "b": r2}, g, weights={"a": 1.0, "b": 0.5}).values
    assert abs(float(gdpo_bn.mean())) < 1e-5 and abs(float(gdpo_bn.std(unbiased=False)) - 1) < 1e-3
    with pytest.raises(ValueError, match="unknown reward components"):
        decoupled_advantages({"a": r1}, g, weights={"zz": 1.0})


def test_constant_rewards_with_adv_eps_0_give_zero_advantages_not_nan():
    # grpo.adv_eps=0 is allowed; a constant group, batch or prompt history then has scale 0 (was: 0/0 = NaN under GDPO's
    # batch normalization and the per-prompt tracker, while group_advantages already gave 0)
    g = torch.tensor([0, 0, 1, 1])
    ones = torch.ones(4)
    for a in (decoupled_advantages({"success": ones}, g, eps=0.0).values,
              decoupled_advantages({"a": ones, "b": torch.zeros(4)}, g, eps=0.0).values,
              PerPromptStatTracker(buffer_size=0, eps=0.0).update(["p", "p", "q", "q"], ones),
              PerPromptStatTracker(buffer_size=0, eps=0.0, global_std=True).update(["p", "p", "q", "q"], ones),
              group_advantages(ones, g, std_mode="global", eps=0.0).values):
        assert torch.equal(a, torch.zeros(4)), a
    # a batch that is not constant is normalized as before
    r = torch.tensor([0.0, 1.0, 0.0, 0.0])
    a = decoupled_advantages({"a": r}, g, eps=0.0).values
    assert torch.isfinite(a).all() and abs(float(a.std(unbiased=False)) - 1) < 1e-5


def test_nonfinite_rewards_rejected():
    with pytest.raises(ValueError, match="non-finite"):
        group_advantages(torch.tensor([1.0, float("nan")]), torch.zeros(2, dtype=torch.long))


def test_per_prompt_tracker_uses_history():
    t = PerPromptStatTracker(buffer_size=8, min_count=4)
    a1 = t.update(["p", "p", "q", "q"], torch.tensor([1.0, 3.0, 10.0, 10.0]))
    # too little history: batch statistics
    r = torch.tensor([1.0, 3.0, 10.0, 10.0])
    torch.testing.assert_close(a1, (r - r.mean()) / (r.std(unbiased=False) + 1e-4))
    a2 = t.update(["p", "p"], torch.tensor([5.0, 7.0]))
    hist = torch.tensor([1.0, 3.0, 5.0, 7.0])
    torch.testing.assert_close(a2, (torch.tensor([5.0, 7.0]) - hist.mean()) / (hist.std(unbiased=False) + 1e-4))
    t2 = PerPromptStatTracker(buffer_size=8, min_count=4)
    t2.load_state_dict(t.state_dict())
    assert t2.history == t.history

"""grpo.onpolicy: the gap statistics, the warn / stop actions and the config check."""

import math

import pytest
import torch

from grpo.config import ConfigError, build_config
from grpo.onpolicy import CAUSES, OnPolicyError, OnPolicyGap, check_onpolicy, validate


def test_gap_statistics_match_their_definitions():
    new = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    old = new + torch.tensor([[0.1, -0.3, 0.0], [0.2, 9.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, False, True]])  # the 9.0 is masked out
    g = OnPolicyGap()
    g.add(new, old, mask)
    s = g.scalars()
    assert s["onpolicy/checked"] == 5
    assert s["onpolicy/max_abs_dlogp"] == pytest.approx(0.3)
    assert s["onpolicy/mean_abs_dlogp"] == pytest.approx(0.6 / 5)
    assert s["onpolicy/max_ratio_dev"] == pytest.approx(math.expm1(0.3))
    assert OnPolicyGap().scalars() == {}  # nothing checked: nothing reported


def test_exact_recompute_is_silent_and_a_gap_warns_or_stops():
    g = OnPolicyGap()
    x = torch.randn(4, 5)
    g.add(x, x.clone())
    said: list[str] = []
    check_onpolicy(g.scalars(), 1e-6, "stop", 1, "train.onpolicy_tol", said.append)  # 0 gap: nothing happens
    assert g.scalars()["onpolicy/max_abs_dlogp"] == 0.0 and not said
    g.add(x, x + 1e-3)
    check_onpolicy(g.scalars(), 1e-4, "warn", 3, "rl.onpolicy_tol", said.append)
    assert len(said) == 1 and "iteration 3" in said[0] and "rl.onpolicy_tol" in said[0] and CAUSES in said[0]
    with pytest.raises(OnPolicyError, match="dropout.*precision.*batch-size-dependent.*noise the log-prob does not "
                                            "see"):
        check_onpolicy(g.scalars(), 1e-4, "stop", 3, "rl.onpolicy_tol", said.append)
    check_onpolicy(g.scalars(), 1e-4, "off", 3, "rl.onpolicy_tol", said.append)
    assert len(said) == 1


def test_nonfinite_gap_is_reported_as_inf():
    g = OnPolicyGap()
    g.add(torch.tensor([0.0, float("nan")]), torch.zeros(2))
    s = g.scalars()
    assert s["onpolicy/nonfinite"] == 1 and s["onpolicy/max_abs_dlogp"] == float("inf")


def test_bad_settings_are_one_clear_error():
    from diffusion_rl.config import TrainConfig

    with pytest.raises(ConfigError, match="'train.onpolicy_action' expects one of 'warn', 'stop', 'off', got 'loud'"):
        build_config(TrainConfig, {"onpolicy_action": "loud"}, "train")
    with pytest.raises(ValueError, match="rl.onpolicy_tol must be >= 0, got -1"):
        validate(-1, "rl.onpolicy")

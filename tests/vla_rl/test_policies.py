"""The policy interface and factory: policy.kind / policy.type pick the class; SmallVLA implements the protocol."""

import pytest
import torch

from grpo.config import ConfigError, load_config
from vla_rl.config import VLARLConfig
from vla_rl.policies import POLICY_KINDS, TrainablePolicy, check_policy, load_policy, make_policy
from vla_rl.policy import PolicyConfig, SmallVLA


def test_builtin_kind_builds_small_vla_that_implements_the_protocol(tmp_path):
    cfg = PolicyConfig(state_dim=4, action_dim=2, cameras=["agentview"], image_size=32)
    pol = make_policy(cfg, ["reach the red ball"])
    assert isinstance(pol, SmallVLA) and isinstance(pol, TrainablePolicy)
    batch = {"observation.images.agentview": torch.zeros(2, 32, 32, 3, dtype=torch.uint8),
             "observation.state": torch.zeros(2, 4), "task": ["reach the red ball"] * 2}
    s = pol.sample_chunk(batch, generator=torch.Generator().manual_seed(0))
    # (the built-in head recomputes all T steps in one batched call: equal up to float rounding)
    torch.testing.assert_close(pol.chunk_log_prob(batch, s.record).logp.detach(), s.logp, atol=1e-5, rtol=0)
    again = load_policy(pol.save_pretrained(tmp_path / "p"))
    assert isinstance(again, SmallVLA)


def test_kinds_and_types():
    assert POLICY_KINDS["lerobot"] == ("smolvla", "pi0", "pi05")
    with pytest.raises(ValueError, match="policy.kind='hf'"):
        PolicyConfig(kind="hf")
    with pytest.raises(ValueError, match="needs policy.type"):
        PolicyConfig(kind="lerobot")
    with pytest.raises(ValueError, match="policy.type='smolvla' is not a builtin"):
        PolicyConfig(type="smolvla")
    with pytest.raises(TypeError, match="not a TrainablePolicy"):
        check_policy(torch.nn.Linear(2, 2))


def test_yaml_selects_lerobot_kind(tmp_path):
    cfg = load_config(VLARLConfig, "configs/vla/smolvla_reach_one_cpu.yaml")
    assert (cfg.policy.kind, cfg.policy.type) == ("lerobot",
                                                  "smolvla") and cfg.policy.lerobot["vlm_model_name"] == "tiny"
    with pytest.raises(ConfigError, match="pi1"):
        load_config(VLARLConfig, "configs/vla/smolvla_reach_one_cpu.yaml", ["policy.type=pi1"])
    # keys of the other kind do nothing, so they are refused
    with pytest.raises(ConfigError, match="policy.ctx_dim.*policy.kind='lerobot'"):
        load_config(VLARLConfig, "configs/vla/smolvla_reach_one_cpu.yaml", ["policy.ctx_dim=64"])
    with pytest.raises(ConfigError, match="policy.path.*policy.kind='builtin'"):
        load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", ["policy.path=/x"])
    same = load_config(VLARLConfig, "configs/vla/builtin_reach_one_cpu.yaml")  # the comparison recipe
    assert same.policy.kind == "builtin" and same.sft.demos_per_task == cfg.sft.demos_per_task

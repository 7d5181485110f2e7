"""Tiny LeRobot policies and configs for the tests (random weights, a tiny local SmolVLM, no hub)."""

from __future__ import annotations

from pathlib import Path

from vla_rl.policy import PolicyConfig

TINY = {"vlm_model_name": "tiny", "num_vlm_layers": 2, "resize_imgs_with_padding": [32, 32], "tokenizer_max_length": 16}


def tiny_policy_config(state_dim: int = 8, action_dim: int = 4, **kw) -> PolicyConfig:
    lr = dict(TINY, max_state_dim=state_dim, max_action_dim=action_dim)
    kw = {"cameras": ["agentview"], "image_size": 64, "chunk_size": 4, "n_action_steps": 4, **kw}
    cfg = PolicyConfig(kind="lerobot", type="smolvla", lerobot=lr, state_dim=state_dim, action_dim=action_dim, **kw)
    cfg.flow.num_steps = 4
    return cfg


def tiny_smolvla(tmp: Path, **kw):
    from vla_rl.policies import make_policy

    return make_policy(tiny_policy_config(**kw), ["reach the red ball"], workdir=tmp)

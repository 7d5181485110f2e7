"""One object (tabletop/reach_one, the World-VLA-Loop demo): the state-aware success head reads the single
grip-to-ball distance (no instruction grounding), and the loop's policy reads what the world model imagines."""

import pytest
import torch

from vla_rl.wm_loop import WorldLoopConfig
from world_models.data import collect_sans
from world_models.fit import ModelsConfig, success_state_config
from world_models.video_wm import VideoWorldModel, WorldModelConfig

TINY_WM = dict(image_size=32, context_frames=2, chunk=2, action_dim=4, sampling_steps=2, layers=1, ffn_dim=32)
CAMERA = [0.0, -0.4, 0.42, 1.0, 0.0, 0.0, 0.0, 0.686, 0.727, 50.0]


@pytest.fixture(scope="module")
def reach_one():
    return collect_sans("tabletop/reach_one", {"success": 3, "near": 2, "random": 1}, horizon=12, image_size=32,
                        env_kwargs={"object_state": True})


def test_single_ball_head_reads_the_success_distance(reach_one):
    """state = proprio (9) + the ball (xyz at 9): the head's extra feature is |grip - ball|, and the simulator's
    success flag is exactly "that distance < 3 cm" on every frame of every episode."""
    m = ModelsConfig(wm=WorldModelConfig(**TINY_WM), success_state=True, success_state_points=[0, 9])
    cfg = success_state_config(m, reach_one)
    assert (cfg.state_dim, cfg.state_points, cfg.state_camera) == (12, (0, 9), ())
    head = VideoWorldModel(cfg).success_head
    assert not hasattr(head, "ground")
    st = reach_one.state  # [N, T+1, 12]
    dist = head.state_features(st)[..., -1]
    assert head.state_features(st).shape == (*st.shape[:2], 13)
    assert torch.allclose(dist, (st[..., 9:12] - st[..., :3]).norm(dim=-1))
    assert torch.equal(dist < 0.03, reach_one.success > 0.5) and bool(reach_one.episode_success.any())
    x = torch.rand(2, 2, 3, 32, 32) * 2 - 1
    assert head(x, torch.zeros(2, 2, 4), None, st[:2, :2]).shape == (2, 2)  # no ref needed without grounding


def test_single_ball_rejects_grounding(reach_one):
    with pytest.raises(ValueError, match=r"among >= 2 objects, state_points=\(0, 9\)"):
        WorldModelConfig(**TINY_WM, state_dim=12, state_points=(0, 9), state_camera=tuple(CAMERA))
    m = ModelsConfig(wm=WorldModelConfig(**TINY_WM), success_state=True, success_camera=CAMERA)
    with pytest.raises(ValueError, match="success_state_points, which is empty"):
        success_state_config(m, reach_one)


def test_loop_policy_reads_only_the_imagined_camera():
    from grpo.config import ConfigError, load_config

    cfg = load_config(WorldLoopConfig, "configs/world_models/loop_reach_one.yaml", [])
    assert cfg.vla.policy.cameras == ["agentview"] and cfg.vla.env.kwargs["object_state"]
    with pytest.raises(ConfigError, match=r"cameras=\['agentview', 'wrist'\].*imagines only the 'agentview'"):
        load_config(WorldLoopConfig, "configs/world_models/loop_reach_one.yaml",
                    ["vla.policy.cameras=[agentview, wrist]"])

import pytest
import torch

from rewards.eva import (
    EmbodimentLimits,
    EVAConfig,
    EVAReward,
    calibrate_p0,
    eva_reward_from_penalty,
    executability_penalty,
)
from world_models.encoders import (
    DinoV2Encoder,
    SmallEncoderConfig,
    SmallVideoEncoder,
    VJEPA2Encoder,
    build_encoder,
    time_contrastive_loss,
    train_small_encoder,
)
from world_models.idm import IDMConfig, InverseDynamicsModel, idm_action_error, train_idm


def moving_square_videos(n: int, t: int, size: int = 32, seed: int = 0):
    """A bright square moved by random per-step displacements (the actions), rendered to frames."""
    g = torch.Generator().manual_seed(seed)
    actions = (torch.rand(n, t - 1, 2, generator=g) * 2 - 1) * 3.0  # pixels per step
    pos = torch.full((n, 2), size / 2.0) + (torch.rand(n, 2, generator=g) - 0.5) * 8
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    frames = []
    for i in range(t):
        if i:
            pos = (pos + actions[:, i - 1]).clamp(4, size - 5)
        d = torch.maximum((xx[None] - pos[:, 0, None, None]).abs(), (yy[None] - pos[:, 1, None, None]).abs())
        img = torch.sigmoid((3.0 - d) * 3)  # soft square, sub-pixel position visible
        frames.append(torch.stack([img, img * 0.5, 1 - img], dim=1))
    return torch.stack(frames, dim=1), actions / 3.0


def test_small_encoder_shapes_and_training():
    enc = SmallVideoEncoder(SmallEncoderConfig(dim=16, channels=(8, 8), image_size=32))
    v, _ = moving_square_videos(6, 10)
    assert enc.encode(v).shape == (6, 16) and enc.encode_frames(v).shape == (6, 10, 16)
    assert enc.encode((v * 255).to(torch.uint8)).shape == (6, 16)
    losses = train_small_encoder(enc, v, steps=40, batch=6, frames=6)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
    with pytest.raises(ValueError, match=r"\[B, T, C, H, W\]"):
        enc.encode(v[0])
    with pytest.raises(ValueError, match="window"):
        time_contrastive_loss(torch.randn(2, 1, 4))


def test_transformers_encoders_from_local_tiny_weights(tmp_path):
    from transformers import Dinov2Config, Dinov2Model, VJEPA2Config, VJEPA2Model

    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                             image_size=28, patch_size=14)).save_pretrained(tmp_path / "dino")
    VJEPA2Model(VJEPA2Config(crop_size=32, frames_per_clip=4, tubelet_size=2, patch_size=16, hidden_size=32,
                             num_hidden_layers=1, num_attention_heads=2, pred_hidden_size=32, pred_num_hidden_layers=1,
                             pred_num_attention_heads=2, pred_num_mask_tokens=2)).save_pretrained(tmp_path / "vjepa")
    v, _ = moving_square_videos(2, 5)
    dino = build_encoder("dinov2", str(tmp_path / "dino"))
    assert isinstance(dino, DinoV2Encoder)
    assert dino.encode(v).shape == (2, 32) and dino.encode_frames(v).shape == (2, 5, 32)
    vj = build_encoder("vjepa2", str(tmp_path / "vjepa"))
    assert isinstance(vj, VJEPA2Encoder)
    assert vj.encode_frames(v[:, :3]).shape == (2, 2, 32)  # 3 frames padded to 4 -> 2 tubelets
    assert vj.encode_frames(v).shape == (2, 2, 32)  # 5 frames resampled to frames_per_clip=4
    assert vj.encode(torch.rand(2, 9, 3, 20, 20)).shape == (2, 32)  # resampled to frames_per_clip, resized
    with pytest.raises(FileNotFoundError, match="V-JEPA 2 weights not found"):
        build_encoder("vjepa2", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="unknown encoder"):
        build_encoder("clip")


def test_idm_learns_actions_from_frames():
    torch.manual_seed(0)
    train_v, train_a = moving_square_videos(48, 8, seed=1)
    test_v, test_a = moving_square_videos(12, 8, seed=2)
    idm = InverseDynamicsModel(IDMConfig(action_dim=2, channels=(16, 32, 32), hidden=64, image_size=32))
    assert idm.decode_video(test_v).shape == (12, 7, 2)
    before = idm_action_error(idm, test_v, test_a)
    train_idm(idm, train_v, train_a, steps=250, batch=32, lr=2e-3)
    after = idm_action_error(idm, test_v, test_a)
    assert after["mse"] < 0.5 * before["mse"] and after["r2"] > 0.6, (before, after)
    with pytest.raises(ValueError, match="actions must be"):
        train_idm(idm, train_v, train_a[:, :3], steps=1)


def test_eva_penalty_zero_for_constant_velocity_and_grows():
    cfg = EVAConfig(dt=0.1, limits=EmbodimentLimits(v_max=1.0, a_max=50.0, q_min=-10.0, q_max=10.0))
    const = torch.full((1, 20, 3), 0.5)
    pen, per_frame = executability_penalty(const, cfg)
    assert float(pen) == 0.0 and per_frame.shape == (1, 20)
    g = torch.Generator().manual_seed(0)
    jitter = lambda s: const + s * torch.randn(1, 20, 3, generator=g)  # noqa: E731
    p_small, p_big = executability_penalty(jitter(0.01), cfg)[0], executability_penalty(jitter(0.2), cfg)[0]
    assert 0 < float(p_small) < float(p_big)
    # limit violations: too fast, and drifting out of the joint range
    assert float(executability_penalty(torch.full((1, 20, 3), 1.5), cfg)[0]) > 0
    far = EVAConfig(dt=1.0, limits=EmbodimentLimits(v_max=None, q_max=5.0))
    assert float(executability_penalty(torch.full((1, 20, 1), 0.5), far)[0]) > 0
    r = eva_reward_from_penalty(torch.tensor([0.0, 1.0, 10.0]), p0=2.0, gamma=1.0)
    assert r[0] > r[1] > r[2] and float(r[1]) == pytest.approx(1.0)
    assert calibrate_p0(torch.tensor([1.0, 3.0, 5.0])) == 4.0


def test_eva_reward_through_idm_prefers_smooth_video():
    torch.manual_seed(0)
    v, a = moving_square_videos(48, 8, seed=3)
    idm = InverseDynamicsModel(IDMConfig(action_dim=2, channels=(16, 32, 32), hidden=64, image_size=32))
    train_idm(idm, v, a, steps=250, batch=32, lr=2e-3)
    smooth = torch.zeros(1, 7, 2)
    smooth[..., 0] = 0.5  # constant velocity to the right
    rough = smooth.clone()
    rough[0, ::2, 0] = -0.5  # back and forth
    sv = _render(smooth)
    rv = _render(rough)
    reward = EVAReward(idm, EVAConfig(dt=1.0, limits=EmbodimentLimits(v_max=1.0)))
    out_s, out_r = reward.score_videos(sv), reward.score_videos(rv)
    assert float(out_s["total"]) > float(out_r["total"])
    assert out_s["per_frame"].shape == (1, 7)


def _render(actions: torch.Tensor, size: int = 32) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    pos = torch.tensor([[12.0, 16.0]])
    frames = []
    for i in range(actions.shape[1] + 1):
        if i:
            pos = pos + actions[:, i - 1] * 3.0
        d = torch.maximum((xx[None] - pos[:, 0, None, None]).abs(), (yy[None] - pos[:, 1, None, None]).abs())
        img = torch.sigmoid((3.0 - d) * 3)
        frames.append(torch.stack([img, img * 0.5, 1 - img], dim=1))
    return torch.stack(frames, dim=1)


def test_video_world_model_learns_and_env_is_deterministic():
    import numpy as np

    from world_models.video_wm import (
        VideoWorldModel,
        WorldModelConfig,
        train_world_model,
        window_dataset,
        world_model_metrics,
    )
    from world_models.wm_env import WorldModelVecEnv

    torch.manual_seed(0)
    v, a = moving_square_videos(40, 6, seed=1)
    succ = (v[:, :, 0, :, 16:].amax(dim=(-1, -2)) > 0.9).float()  # "success": the square is in the right half
    cfg = WorldModelConfig(image_size=32, chunk=2, context_frames=2, action_dim=2, sampling_steps=4)
    wm = VideoWorldModel(cfg)
    train = window_dataset(v[:32], a[:32], succ[:32], cfg)
    test = window_dataset(v[32:], a[32:], succ[32:], cfg)
    assert train.context.shape == (32 * 3, 2, 3, 32, 32) and train.actions.shape == (96, 2, 2) and len(train) == 96
    before = world_model_metrics(wm, test)
    losses = train_world_model(wm, train, steps=120, batch=24, lr=2e-3)
    after = world_model_metrics(wm, test)
    assert losses[-1] < 0.5 * losses[0]
    assert after["frame_mse"] < 0.5 * before["frame_mse"], (before, after)
    with pytest.raises(ValueError, match="actions must be"):
        wm.predict(test.context[:1], test.actions[:1, :1])

    env = WorldModelVecEnv(wm, v[:4, :2], ["push the square right"] * 4, num_envs=3, max_chunks=2)
    obs, _ = env.reset(seed=5)
    assert obs["images"]["agentview"].shape == (3, 32, 32, 3) and obs["instruction"][0] == "push the square right"
    act = np.full((3, 2, 2), 0.5, np.float32)
    o1, r1, term1, trunc1, _ = env.step(act)
    env.reset(seed=5)
    o2, r2, *_ = env.step(act)
    assert np.array_equal(o1["images"]["agentview"], o2["images"]["agentview"]) and np.array_equal(r1, r2)
    with pytest.raises(ValueError, match="actions must have shape"):
        env.step(np.zeros((3, 1, 2), np.float32))

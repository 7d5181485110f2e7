"""The VLA frontend's side of SRPO: the encoders it injects (vla_rl.srpo_encoders) and dynamic sampling."""

import pytest
import torch

from rewards import RewardBatch
from rewards.srpo import RandomConvEncoder, SRPOConfig, SRPOReward
from rewards.success import episode_metadata
from vla_rl.srpo_encoders import PolicyImageEncoder, build_trajectory_encoder
from vla_rl.trainer import group_keep_mask


def test_build_trajectory_encoder_names_and_errors():
    assert isinstance(build_trajectory_encoder(SRPOConfig(encoder="random_conv")), RandomConvEncoder)
    with pytest.raises(ValueError, match="needs the policy"):
        build_trajectory_encoder(SRPOConfig(encoder="policy"))
    with pytest.raises(ValueError, match="image encoder"):
        build_trajectory_encoder(SRPOConfig(encoder="policy"), torch.nn.Linear(2, 2))


def test_policy_encoder_feeds_the_reward():
    class Policy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.image_encoder = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 4, stride=4), torch.nn.Flatten())

    enc = build_trajectory_encoder(SRPOConfig(encoder="policy"), Policy())
    assert isinstance(enc, PolicyImageEncoder) and enc.device == torch.device("cpu")
    g = torch.Generator().manual_seed(0)
    videos = [torch.randint(0, 256, (int(t), 32, 32, 3), dtype=torch.uint8, generator=g) for t in (4, 6, 5)]
    cfg = SRPOConfig(encoder="policy", num_frames=3, frame_size=32, min_samples=1)
    out = SRPOReward(cfg, enc)(RewardBatch(videos=videos,
                                           metadata=episode_metadata(["t"] * 3, torch.tensor([1, 0, 0]))))
    assert out.total[0] == 1 and (out.total[1:] < 1).all() and (out.total[1:] >= 0).all()


def test_dynamic_sampling_drops_all_zero_and_all_one_groups():
    succ = torch.tensor([0, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0, 0], dtype=torch.bool)
    gids = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])
    keep, kept = group_keep_mask(succ, gids, (0.0, 1.0))
    assert kept == 1 and keep.tolist() == [False] * 6 + [True] * 3 + [False] * 3
    # a wider band keeps the all-failure groups (useful with SRPO, whose failures are graded)
    keep, kept = group_keep_mask(succ, gids, (-0.1, 1.0))
    assert kept == 3 and not keep[3:6].any()

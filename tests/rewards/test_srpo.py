"""SRPO reward properties (rewards.srpo), the binary success reward (rewards.success), injected encoders (built-in
and tiny random DINOv2 / V-JEPA 2), both behind the Reward(RewardBatch) -> RewardOutput protocol."""

import math

import pytest
import torch

from grpo.train_step import GRPOConfig, compute_advantages
from rewards import Reward, RewardBatch
from rewards.srpo import RandomConvEncoder, SRPOConfig, SRPOReward, srpo_progress, trajectory_embeddings
from rewards.success import episode_fields, episode_metadata, success_reward


def _sig(t: float) -> float:
    return 1 / (1 + math.exp(-t))


def _reference_failure_rewards(d: list[float]) -> torch.Tensor:
    """siiRL's map, restated: u = min-max(d) (0.5 if the range < 1e-6), reward = 0.6 sigmoid(10 (0.5 - u))."""
    lo, hi = min(d), max(d)
    u = [0.5] * len(d) if hi - lo < 1e-6 else [(x - lo) / (hi - lo) for x in d]
    return torch.tensor([0.6 * _sig(10 * (0.5 - x)) for x in u])


def test_srpo_one_mode_cluster_ignores_noise_successes():
    # successes: a tight mode at x ~ 0.01 and one outlier at x = 10. Standardized on the successes only (x std 4.33),
    # the mode is one DBSCAN(0.5, 2) cluster and the outlier is noise, ignored: the one centre is the mode's raw mean
    emb = torch.tensor([[0.0, 0.0], [0.01, 0.0], [0.02, 0.0], [10.0, 0.0], [1.0, 0.0], [3.0, 0.0], [9.9, 0.0]])
    succ = torch.tensor([1, 1, 1, 1, 0, 0, 0], dtype=torch.bool)
    r = srpo_progress(emb, ["A"] * 7, succ, SRPOConfig())
    assert r.num_clusters["A"] == 1
    d = [0.99, 2.99, 9.89]  # raw distances to the centre (0.01, 0)
    torch.testing.assert_close(r.distance[4:], torch.tensor(d))
    torch.testing.assert_close(r.total[4:], _reference_failure_rewards(d))
    assert torch.equal(r.total[:4], torch.ones(4))
    assert r.total[6] < 0.01  # next to the noise success, but far from the cluster: the lowest reward


def test_srpo_two_mode_clusters_and_no_cluster_fallback():
    # two tight success modes far apart -> two centres (raw means (0.025, 0) and (10.025, 10))
    emb = torch.tensor([[0.0, 0.0], [0.05, 0.0], [10.0, 10.0], [10.05, 10.0], [9.5, 9.5], [5.0, 5.0], [1.0, 1.0]])
    succ = torch.tensor([1, 1, 1, 1, 0, 0, 0], dtype=torch.bool)
    r = srpo_progress(emb, ["A"] * 7, succ, SRPOConfig())
    assert r.num_clusters["A"] == 2
    d = [math.hypot(0.525, 0.5), math.hypot(4.975, 5.0), math.hypot(0.975, 1.0)]
    torch.testing.assert_close(r.distance[4:], torch.tensor(d))
    torch.testing.assert_close(r.total[4:], _reference_failure_rewards(d))
    # spread successes (standardized pairwise distances > 0.5): DBSCAN finds no cluster, the single centre is the
    # successes' mean (2, 4/3)
    emb2 = torch.tensor([[0.0, 0.0], [4.0, 0.0], [2.0, 4.0], [2.0, 7 / 3], [5.0, 16 / 3]])
    r2 = srpo_progress(emb2, ["B"] * 5, torch.tensor([1, 1, 1, 0, 0], dtype=torch.bool), SRPOConfig())
    assert r2.num_clusters["B"] == 1
    torch.testing.assert_close(r2.distance[3:], torch.tensor([1.0, 5.0]))
    torch.testing.assert_close(r2.total[3:], _reference_failure_rewards([1.0, 5.0]))


def test_srpo_single_failure_and_flat_distances_get_03():
    emb = torch.tensor([[0.0, 0.0], [0.1, 0.0], [3.0, 4.0]])
    r = srpo_progress(emb, ["A"] * 3, torch.tensor([1, 1, 0], dtype=torch.bool), SRPOConfig())
    assert float(r.total[2]) == pytest.approx(0.3)  # u = 0.5 -> 0.6 sigmoid(0)
    emb = torch.tensor([[0.0, 0.5], [0.0, 1.0], [0.0, -1.0], [0.0, -0.5]])  # failures equidistant from the mean (0, 0)
    r = srpo_progress(emb, ["A"] * 4, torch.tensor([1, 0, 0, 1], dtype=torch.bool), SRPOConfig(min_samples=2))
    torch.testing.assert_close(r.total[1:3], torch.full((2,), 0.3))


def test_srpo_successes_get_one_failures_ordered_by_distance():
    cfg = SRPOConfig(min_samples=1, progress_max=0.8)
    # task A: two successes near the origin, failures at increasing distance along one axis
    emb = torch.tensor([[0.0, 0.0], [0.1, 0.0], [1.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
    tasks = ["A"] * 5
    succ = torch.tensor([1, 1, 0, 0, 0], dtype=torch.bool)
    r = srpo_progress(emb, tasks, succ, cfg)
    assert torch.equal(r.total[:2], torch.ones(2))
    f = r.total[2:]
    assert (f >= 0).all() and (f < 1).all() and (f <= cfg.progress_max).all()
    assert f[0] > f[1] > f[2]  # closer to the success cluster -> higher reward
    assert torch.all(r.distance[2:].diff() > 0)
    # min_samples 1: each success is a centre; raw distances 0.9, 1.9, 3.9 -> u = 0, 1/3, 1
    torch.testing.assert_close(r.distance[2:], torch.tensor([0.9, 1.9, 3.9]))
    torch.testing.assert_close(f, torch.tensor([0.8 * _sig(10 * (0.5 - u)) for u in (0.0, 1 / 3, 1.0)]))


def test_srpo_normalizes_per_task_and_falls_back_to_binary_without_success():
    cfg = SRPOConfig(min_samples=1)
    # task B is the same geometry as task A scaled by 100: per-task standardization gives equal rewards
    base = torch.tensor([[0.0, 0.0], [0.2, 0.1], [1.0, 0.5], [3.0, 0.2]])
    emb = torch.cat([base, base * 100, torch.randn(3, 2)])
    tasks = ["A"] * 4 + ["B"] * 4 + ["C"] * 3
    succ = torch.tensor([1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0], dtype=torch.bool)
    r = srpo_progress(emb, tasks, succ, cfg)
    torch.testing.assert_close(r.total[:4], r.total[4:8])
    assert torch.equal(r.total[8:], torch.zeros(3))  # task C: no success -> binary 0
    assert r.num_clusters["C"] == 0 and r.num_clusters["A"] >= 1


def test_srpo_dbscan_clusters_and_all_success_task():
    cfg = SRPOConfig(min_samples=2, dbscan_eps=0.3)
    # two success modes far apart; a failure near the second mode is rewarded as close
    emb = torch.tensor([[0.0, 0.0], [0.05, 0.0], [10.0, 10.0], [10.05, 10.0], [9.5, 9.5], [5.0, 5.0],
                        [1.0, 1.0], [1.1, 1.0]])
    tasks = ["A"] * 6 + ["D"] * 2
    succ = torch.tensor([1, 1, 1, 1, 0, 0, 1, 1], dtype=torch.bool)
    r = srpo_progress(emb, tasks, succ, cfg)
    assert r.num_clusters["A"] == 2
    assert r.total[4] > r.total[5]
    assert torch.equal(r.total[6:], torch.ones(2))  # a task with only successes


def test_srpo_reward_end_to_end_with_builtin_encoder_and_components():
    cfg = SRPOConfig(num_frames=4, frame_size=32, min_samples=1)
    g = torch.Generator().manual_seed(0)
    videos = [torch.randint(0, 256, (int(t), 32, 32, 3), dtype=torch.uint8, generator=g) for t in (5, 9, 7, 12)]
    succ = torch.tensor([1, 0, 1, 0], dtype=torch.bool)
    reward = SRPOReward(cfg, RandomConvEncoder())
    assert isinstance(reward, Reward) and isinstance(success_reward, Reward)
    batch = RewardBatch(videos=videos, metadata=episode_metadata(["t"] * 4, succ))
    assert len(batch) == 4
    out = reward(batch)
    assert out.total.shape == (4,) and set(out.components) == {"success", "progress"}
    # the distributed path (embed each rank's episodes, reward the gathered rows) gives the same numbers
    same = reward.from_embeddings(torch.cat([reward.embed(videos[:2]), reward.embed(videos[2:])]), batch.metadata)
    assert torch.equal(same.total, out.total) and torch.equal(same.components["progress"], out.components["progress"])
    assert torch.equal(out.total[succ], torch.ones(2)) and (out.total[~succ] < 1).all()
    # GDPO combination of the components through grpo
    adv = compute_advantages(GRPOConfig(group_size=4, advantage="gdpo"), out.total, torch.zeros(4, dtype=torch.long),
                             out.components)
    assert torch.isfinite(adv.values).all()
    binary = success_reward(batch)
    assert binary.total.tolist() == [1.0, 0.0, 1.0, 0.0] and torch.equal(binary.components["success"], binary.total)


def test_episode_metadata_round_trip_and_errors():
    meta = episode_metadata(["a", "b", "a"], torch.tensor([True, False, True]), [0, 1, 0])
    assert meta[1] == {"task": "b", "success": False, "group": 1}
    tasks, succ, groups = episode_fields(meta, "x")
    assert tasks == ["a", "b", "a"] and succ.tolist() == [True, False, True] and groups == [0, 1, 0]
    assert episode_fields(episode_metadata(["a"], torch.tensor([False])), "x")[2] is None
    with pytest.raises(ValueError, match="3 success flags but 2 tasks"):
        episode_metadata(["a", "b"], torch.tensor([True, False, True]))
    with pytest.raises(ValueError, match="'srpo' needs metadata with 'task' and 'success'.*rows \\[1\\]"):
        SRPOReward(SRPOConfig(), RandomConvEncoder()).from_embeddings(torch.zeros(2, 3), [meta[0], {"task": "a"}])
    with pytest.raises(ValueError, match="needs an encoder"):
        SRPOReward(SRPOConfig(), None)
    with pytest.raises(ValueError, match="videos"):
        SRPOReward(SRPOConfig(), RandomConvEncoder())(RewardBatch(metadata=meta))


@pytest.mark.parametrize("which", ["dinov2", "vjepa2"])
def test_transformers_encoders_with_tiny_random_configs(which):
    from world_models.encoders import DinoV2Encoder, VJEPA2Encoder

    torch.manual_seed(0)
    if which == "dinov2":
        from transformers import Dinov2Config, Dinov2Model

        enc = DinoV2Encoder(Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                     intermediate_size=64, image_size=32, patch_size=8)))
    else:
        from transformers import VJEPA2Config, VJEPA2Model

        enc = VJEPA2Encoder(VJEPA2Model(VJEPA2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                     mlp_ratio=2.0,
                                                     crop_size=32, patch_size=8, frames_per_clip=4, tubelet_size=2,
                                                     pred_hidden_size=32, pred_num_hidden_layers=1,
                                                     pred_num_attention_heads=2,
                                                     pred_num_mask_tokens=2)))
    cfg = SRPOConfig(num_frames=4, frame_size=32, min_samples=1)
    videos = [torch.randint(0, 256, (6, 32, 32, 3), dtype=torch.uint8) for _ in range(3)]
    emb = trajectory_embeddings(enc, videos, cfg)
    assert emb.shape[0] == 3 and torch.isfinite(emb).all()
    out = SRPOReward(cfg, enc)(RewardBatch(videos=videos,
                                           metadata=episode_metadata(["t"] * 3, torch.tensor([True, False, False]))))
    assert out.total[0] == 1 and (out.total[1:] < 1).all()


def test_srpo_config_errors():
    with pytest.raises(ValueError, match="progress_max"):
        SRPOConfig(progress_max=1.0)
    with pytest.raises(ValueError, match="pooling"):
        SRPOConfig(pooling="max")


def test_srpo_group_reference_uses_the_groups_own_successes():
    # group 0 succeeds at x=0, group 1 at x=10; failure 3 (group 1) lies near group 0's success (x=3), so the task
    # reference (nearest success centre) and the group reference (its own group's success) measure it differently
    emb = torch.tensor([[0.0, 0.0], [10.0, 0.0], [2.0, 0.0], [3.0, 0.0], [9.5, 0.0]])
    succ = torch.tensor([1, 1, 0, 0, 0], dtype=torch.bool)
    groups = [0, 1, 0, 1, 1]
    r_task = srpo_progress(emb, ["A"] * 5, succ, SRPOConfig(min_samples=1))
    r_group = srpo_progress(emb, ["A"] * 5, succ, SRPOConfig(min_samples=1, reference="group"), groups)
    assert r_task.distance.tolist() == [0.0, 0.0, 2.0, 3.0, 0.5]
    assert r_group.distance.tolist() == [0.0, 0.0, 2.0, 7.0, 0.5]
    assert r_group.total[4] > r_group.total[2] > r_group.total[3] > 0  # closer to its group's success: more reward
    # distances are normalized over the task's failures: failure 3 now the farthest, failure 2 is graded higher
    assert r_group.total[2] > r_task.total[2]
    assert torch.equal(r_task.total[:2], r_group.total[:2])


@pytest.mark.parametrize("encoder", ["random_conv", "dinov2_like", "video"])
def test_pooling_last_encodes_only_the_last_frame_of_a_per_frame_encoder(encoder):
    """``pooling: last`` reads only the last sampled frame: an encoder that embeds frames on their own
    (``per_frame``) gets only that frame (the same embeddings as encoding all of them); one that mixes frames over
    time (no ``per_frame``) still gets them all."""
    seen = []

    class Video(torch.nn.Module):  # mixes frames: the last frame's latent depends on the first
        def encode_frames(self, video):
            seen.append(video.shape[1])
            return (video.mean(dim=(2, 3, 4)) + video[:, :1].mean(dim=(1, 2, 3, 4))[:, None])[..., None]

    class PerFrame(RandomConvEncoder):
        def encode_frames(self, video):
            seen.append(video.shape[1])
            return super().encode_frames(video)

    enc = {"random_conv": RandomConvEncoder(), "dinov2_like": PerFrame(), "video": Video()}[encoder]
    g = torch.Generator().manual_seed(0)
    videos = [torch.randint(0, 256, (int(t), 16, 16, 3), dtype=torch.uint8, generator=g) for t in (7, 9, 5)]
    cfg = SRPOConfig(num_frames=4, frame_size=16, pooling="last")
    got = trajectory_embeddings(enc, videos, cfg)
    everything = trajectory_embeddings(enc, videos, SRPOConfig(num_frames=4, frame_size=16, pooling="concat"))
    assert torch.equal(got, everything.reshape(3, 4, -1)[:, -1])
    if encoder == "dinov2_like":
        assert seen == [1, 4]
    if encoder == "video":
        assert seen == [4, 4]

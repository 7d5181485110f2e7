"""Protocol plumbing: videos per frame, NaN detection, registry errors, MultiReward sum and GDPO."""

import logging

import pytest
import torch

import grpo.advantages
from rewards import NonFiniteRewardError, RewardBatch, RewardOutput, available_rewards, build_reward
from rewards.base import ImageReward
from rewards.multi import MultiReward, group_ids_of
from rewards.shapes import render


class MeanPixel(ImageReward):
    name = "mean_pixel"

    def score(self, images, prompts, metadata):
        m = images.mean(dim=(1, 2, 3))
        return RewardOutput(total=m, components={"mean_pixel": m})


def test_video_is_scored_per_frame_and_averaged():
    video = torch.stack([torch.full((4, 3, 8, 8), v) for v in (0.2, 0.6)])  # [2, 4, 3, 8, 8]
    video[0, 0] = 1.0
    out = MeanPixel()(RewardBatch(videos=video, prompts=["a", "b"]))
    torch.testing.assert_close(out.total, torch.tensor([(1.0 + 3 * 0.2) / 4, 0.6]))
    out5 = MeanPixel()(RewardBatch(images=video, prompts=["a", "b"]))  # 5-D in images (the trainer's way)
    torch.testing.assert_close(out5.total, out.total)
    with pytest.raises(ValueError, match=r"expected images \[B, 3, H, W\] or videos"):
        MeanPixel()(RewardBatch(images=torch.rand(2, 8, 8), prompts=["a", "b"]))
    with pytest.raises(ValueError, match="3 prompts for a batch of 2"):
        MeanPixel()(RewardBatch(images=torch.rand(2, 3, 8, 8), prompts=["a", "b", "c"]))


def test_nonfinite_images_and_rewards_are_detected(caplog):
    x = torch.rand(3, 3, 16, 16)
    x[1, 0, 2, 3] = float("nan")
    prompts = ["a red circle"] * 3
    with caplog.at_level(logging.WARNING):
        out = build_reward("jpeg_compressibility")(RewardBatch(images=x, prompts=prompts))
    assert torch.isnan(out.total[1]) and torch.isfinite(out.total[[0, 2]]).all()
    assert "input images hold NaN/inf at rows [1]" in caplog.text
    with pytest.raises(NonFiniteRewardError, match=r"'shapes_verifier': input images hold NaN/inf at rows \[1\]"):
        build_reward("shapes_verifier", nonfinite="raise")(RewardBatch(images=x, prompts=prompts))

    class Broken(MeanPixel):
        name = "broken"

        def score(self, images, prompts, metadata):
            out = super().score(images, prompts, metadata)
            out.total[-1] = float("inf")
            return out

    b = Broken()
    b.nonfinite = "raise"
    with pytest.raises(NonFiniteRewardError, match=r"reward 'broken' returned non-finite values at rows \[2\]"):
        b(RewardBatch(images=torch.rand(3, 3, 8, 8), prompts=["x"] * 3))


def test_registry():
    names = available_rewards()
    for n in ["shapes_verifier", "jpeg_compressibility", "jpeg_incompressibility", "ocr", "clip_score", "pickscore",
              "hpsv2", "aesthetic", "multi"]:
        assert n in names
    with pytest.raises(ValueError, match="unknown reward 'imagereward2'; available: aesthetic, clip_score"):
        build_reward("imagereward2")
    with pytest.raises(ValueError, match="unknown reward 'nope'"):
        MultiReward({"shapes_verifier": 1.0, "nope": 1.0})
    with pytest.raises(ValueError, match="normalization must be 'sum' or 'gdpo'"):
        MultiReward({"shapes_verifier": 1.0}, normalization="mean")


def test_multi_gdpo_calls_the_shared_core(monkeypatch):
    prompts = ["a red circle"] * 3 + ["a blue square left of a green triangle"] * 3
    imgs = render(prompts, 32, seed=0)
    imgs[1] = imgs[1].flip(-2)  # damage some samples so rewards differ within groups
    imgs[4] = imgs[4].flip(-1)
    imgs[5] = torch.rand(3, 32, 32)
    weights = {"shapes_verifier": 1.0, "jpeg_compressibility": 0.25}
    plain = MultiReward(weights)(RewardBatch(images=imgs, prompts=prompts))
    calls = []
    real = grpo.advantages.decoupled_advantages

    def spy(components, group_ids, w=None, *a, **k):
        calls.append((sorted(components), group_ids.tolist(), w))
        return real(components, group_ids, w, *a, **k)

    monkeypatch.setattr(grpo.advantages, "decoupled_advantages", spy)
    out = MultiReward(weights, normalization="gdpo")(RewardBatch(images=imgs, prompts=prompts))
    assert calls == [(["jpeg_compressibility", "shapes_verifier"], [0, 0, 0, 1, 1, 1], weights)]
    expected = real(plain.components, torch.tensor([0, 0, 0, 1, 1, 1]), weights).values
    torch.testing.assert_close(out.total, expected)
    torch.testing.assert_close(out.details["weighted_sum"], plain.total)
    # explicit group ids in metadata win over prompt grouping
    meta = [{"group_id": g} for g in (7, 7, 8, 8, 9, 9)]
    assert group_ids_of(RewardBatch(images=imgs, prompts=prompts, metadata=meta)).tolist() == [7, 7, 8, 8, 9, 9]

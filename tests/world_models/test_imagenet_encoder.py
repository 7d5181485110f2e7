"""``srpo.encoder: efficientnet_lite0``: a real pretrained image encoder (EfficientNet-Lite0, ImageNet) that installs
from the registry with no model hub (``branchloop[imagenet]``). Its weights are checked to be the real ImageNet ones
(the right class first on two real photos), then used as SRPO's encoder by config, from the package's file or a path."""

import numpy as np
import pytest
import torch

from grpo.config import load_config
from rewards import RewardBatch
from rewards.srpo import SRPOConfig, SRPOReward
from rewards.success import episode_metadata
from vla_rl.preflight import check_srpo_encoder
from vla_rl.srpo_encoders import build_trajectory_encoder
from world_models.encoders import EfficientNetLite0Encoder, build_encoder

# ImageNet-1k class ids: 281 tabby, 282 tiger cat, 285 Egyptian cat; 967 espresso, 968 cup
PHOTOS = {"chelsea": {281, 282, 285}, "coffee": {967, 968}}


@pytest.fixture(scope="module")
def encoder():
    return build_encoder("efficientnet_lite0")


@pytest.mark.parametrize("photo", sorted(PHOTOS))
def test_the_weights_are_imagenets(encoder, photo):
    """scikit-image's cat (Chelsea) and espresso photos: the packaged classifier's top class is theirs (so the weights
    are the trained ImageNet ones, loaded strictly, normalized as the TF Lite models were trained)."""
    from skimage import data

    img = torch.from_numpy(getattr(data, photo)()).permute(2, 0, 1)[None, None].float() / 255  # [1, 1, 3, H, W]
    m = encoder.model
    x = torch.nn.functional.interpolate(img[0], size=224, mode="bilinear", antialias=True)
    with torch.no_grad():
        logits = m._fc(m.extract_features((x - 0.5) / 0.5).mean(dim=(2, 3)))
    probs = logits.softmax(-1)[0]
    assert int(probs.argmax()) in PHOTOS[photo] and float(probs.max()) > 0.5
    feats = encoder.encode_frames(img)  # the encoder's own path: same features as the classifier read
    assert feats.shape == (1, 1, encoder.dim) == (1, 1, 1280)
    torch.testing.assert_close(m._fc(feats[:, 0]), logits, rtol=1e-4, atol=1e-4)


def test_it_is_srpos_encoder_by_config_and_grades_failures(encoder):
    cfg = SRPOConfig(encoder="efficientnet_lite0", num_frames=3, frame_size=32, min_samples=1)
    check_srpo_encoder(cfg)
    enc = build_trajectory_encoder(cfg)
    assert isinstance(enc, EfficientNetLite0Encoder)
    g = torch.Generator().manual_seed(0)
    videos = [torch.randint(0, 256, (int(t), 32, 32, 3), dtype=torch.uint8, generator=g) for t in (4, 6, 5, 3)]
    out = SRPOReward(cfg, enc)(RewardBatch(videos=videos,
                                           metadata=episode_metadata(["t"] * 4, torch.tensor([1, 0, 0, 0]))))
    assert out.total[0] == 1 and (out.total[1:] < 0.6).all() and (out.total[1:] > 0).all()
    assert len(set(np.round(out.total[1:].tolist(), 6))) == 3  # three failures, three distinct grades


def test_a_local_weights_file_loads_the_same_encoder(encoder, tmp_path):
    path = tmp_path / "lite0.pth"
    torch.save(encoder.model.state_dict(), path)
    other = build_trajectory_encoder(SRPOConfig(encoder="efficientnet_lite0", encoder_path=str(path)))
    video = torch.rand(1, 2, 3, 32, 32)
    torch.testing.assert_close(other.encode_frames(video), encoder.encode_frames(video))


def test_a_missing_weights_file_stops_the_run_at_start(tmp_path):
    with pytest.raises(ValueError, match="no such file .*efficientnet-lite0 .pth"):
        check_srpo_encoder(SRPOConfig(encoder="efficientnet_lite0", encoder_path=str(tmp_path / "nope.pth")))
    from vla_rl.trainer import VLARLConfig

    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml",
                      ["srpo.encoder=efficientnet_lite0", f"srpo.encoder_path={tmp_path}"])
    with pytest.raises(ValueError, match="no such file"):
        check_srpo_encoder(cfg.srpo)

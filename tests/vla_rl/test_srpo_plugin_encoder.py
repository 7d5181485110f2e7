"""``srpo.encoder: package.module:Name``: a user's own SRPO encoder (R3M, VC-1, a fine-tuned DINOv2 ...), imported and
checked when the config loads, built as ``Name(srpo.encoder_path)``, and used by a run's rewards like a built-in."""

from pathlib import Path

import pytest
import torch

from grpo.config import ConfigError, load_config
from rewards import RewardBatch
from rewards.srpo import SRPOConfig, SRPOReward, srpo_progress, trajectory_embeddings
from rewards.success import episode_metadata
from tests.srpo_plugin_encoders import MeanColour
from vla_rl.cli import main
from vla_rl.srpo_encoders import build_trajectory_encoder
from vla_rl.trainer import VLARLConfig, VLARLTrainer

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "configs/vla/tabletop_reach_one.yaml")
MOD = "tests.srpo_plugin_encoders"


@pytest.mark.parametrize("name", [f"{MOD}:MeanColour", f"{MOD}:mean_colour"])
def test_a_class_or_a_factory_is_built_with_the_encoder_path(name):
    enc = build_trajectory_encoder(SRPOConfig(encoder=name, encoder_path="/some/where"))
    assert isinstance(enc, MeanColour) and enc.path == "/some/where"
    video = torch.rand(2, 5, 3, 8, 8)
    torch.testing.assert_close(enc.encode_frames(video), video.mean(dim=(3, 4)))


@pytest.mark.parametrize("name, match", [
    ("dinov3", r"srpo.encoder: expected one of 'random_conv', .* or 'package.module:Name' .*got 'dinov3'"),
    (f"{MOD}:Missing", "has no attribute 'Missing'"),
    ("no_such_package_xyz:Enc", "cannot import module 'no_such_package_xyz'"),
    (f"{MOD}:NoEncodeFrames", "NoEncodeFrames lacks encode_frames"),
    (f"{MOD}:NOT_CALLABLE", "expected a class or factory called as Name"),
    (":Enc", "expected 'package.module:Name'"),
])
def test_bad_encoder_names_are_refused_when_the_config_loads(name, match):
    with pytest.raises((ValueError, ConfigError), match=match):
        load_config(VLARLConfig, RECIPE, [f"srpo.encoder={name}"])


def test_a_factory_that_returns_no_encoder_is_refused_when_built():
    with pytest.raises(ValueError, match="str lacks encode_frames"):
        build_trajectory_encoder(SRPOConfig(encoder=f"{MOD}:returns_a_string"))


def test_a_bad_plugin_stops_vla_rl_train_with_one_line(tmp_path, capsys):
    rc = main(["train", RECIPE, f"srpo.encoder={MOD}:NoEncodeFrames", f"output_dir={tmp_path / 'r'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "lacks encode_frames" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "r").exists()


def test_a_run_rewards_its_episodes_through_the_plugin(tmp_path):
    over = [f"srpo.encoder={MOD}:MeanColour", "srpo.reference=group", f"output_dir={tmp_path / 'run'}", "sft.steps=2",
            "sft.demos_per_task=1", "rl.iterations=1", "rl.groups_per_task=3", "grpo.group_size=3",
            "env.max_episode_steps=4", "rl.eval_episodes=1", "rl.eval_every=0", "rl.num_videos=0"]
    tr = VLARLTrainer(load_config(VLARLConfig, RECIPE, over), quiet=True)
    assert isinstance(tr.srpo.encoder, MeanColour)
    specs, _, batch = tr.rollout(0)
    batch.episodes[1].success = True  # one success in group 0: its failures are graded against it
    rew = tr.rewards(batch, specs)
    import numpy as np

    videos = [torch.from_numpy(np.stack(e.frames)) for e in batch.episodes]
    emb = trajectory_embeddings(MeanColour(), videos, tr.cfg.srpo)
    want = srpo_progress(emb, [s.env_name for s in specs], batch.success, tr.cfg.srpo, [s.group_id for s in specs])
    torch.testing.assert_close(rew.total, want.total)
    assert rew.total[1] == 1.0
    tr.pool.close()


def test_the_reward_moves_a_plugin_module_to_its_device():
    cfg = SRPOConfig(encoder=f"{MOD}:MeanColour", num_frames=3, frame_size=8, min_samples=1)
    r = SRPOReward(cfg, build_trajectory_encoder(cfg), device="cpu")
    videos = [torch.randint(0, 256, (4, 8, 8, 3), dtype=torch.uint8) for _ in range(3)]
    out = r(RewardBatch(videos=videos, metadata=episode_metadata(["t"] * 3, torch.tensor([1, 0, 0]))))
    assert out.total[0] == 1 and (out.total[1:] < 1).all()

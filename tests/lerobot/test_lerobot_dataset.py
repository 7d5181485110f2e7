"""LeRobotDataset in and out: sims records scripted-expert demos as one, lerobot's loader reads it back exactly,
and a dataset written by lerobot's own API trains vla-rl's SFT."""

import numpy as np
import pytest
import torch

from sims.demos import record_demos
from vla_rl.cli import main as vla_rl_main
from vla_rl.demos import load_demo_file
from vla_rl.policy import PolicyConfig, SmallVLA
from vla_rl.sft import SFTConfig, train_sft
from vla_rl.tokenizer import WordTokenizer


def test_sims_records_a_lerobot_dataset_that_lerobot_loads(tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata

    root = tmp_path / "reach_one"
    summary = record_demos("tabletop/reach_one", 2, root,
                           env_kwargs={"image_size": 32, "cameras": ("agentview", "wrist")},
                           seed_offset=500, only_success=True, fmt="lerobot")
    meta = LeRobotDatasetMetadata("local/reach_one", root=root)
    assert meta.total_episodes == 2 and meta.total_frames == summary["steps"] and meta.fps == 20
    assert meta._version.major == 3  # codebase v3.0
    ds = LeRobotDataset("local/reach_one", root=root, delta_timestamps={"action": [0.0, 0.05, 0.1]})
    fr = ds[0]
    assert fr["observation.images.agentview"].shape == (3, 32, 32) and fr["action"].shape == (3, 4)
    # round trip: what sims recorded is what lerobot's loader returns, and what our SFT reader gets
    demos = load_demo_file(root, ["agentview", "wrist"])
    import sims

    env = sims.make("tabletop/reach_one", image_size=32, cameras=("agentview", "wrist"))
    obs, _ = env.reset(seed=500, options={"init_seed": 500})
    env.close()
    assert len(demos) == 2 and demos[0].instruction == obs["instruction"]
    np.testing.assert_array_equal(demos[0].images["agentview"][0], obs["images"]["agentview"])
    np.testing.assert_array_equal(demos[0].state[0], np.asarray(obs["state"], np.float32))
    assert bool(ds[len(demos[0].actions) - 1]["next.success"]) and not bool(ds[0]["next.success"])
    # the CLI writes the same format
    assert vla_rl_main(["record-demos", "tabletop/reach_one", "1", str(tmp_path / "cli"), "--image-size", "32",
                        "--format", "lerobot",
                            "--only-success", "--seed-offset", "500"]) == 0
    assert LeRobotDatasetMetadata("local/cli", root=tmp_path / "cli").total_episodes == 1


def test_a_dataset_written_by_lerobot_trains_our_sft(tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    feats = {"observation.state": {"dtype": "float32", "shape": (3,), "names": None},
             "action": {"dtype": "float32", "shape": (2,), "names": None},
             "observation.images.front": {"dtype": "image", "shape": (24, 24, 3),
                                          "names": ["height", "width", "channels"]}}
    ds = LeRobotDataset.create("someone/toy", 10, feats, root=tmp_path / "toy", robot_type="so100", use_videos=False)
    rng = np.random.default_rng(0)
    for ep in range(3):
        for t in range(6):
            ds.add_frame({"observation.state": rng.normal(size=3).astype(np.float32),
                          "action": np.full(2, 0.1 * t, np.float32),
                          "observation.images.front": rng.integers(0, 255, (24, 24, 3), dtype=np.uint8),
                          "task": "pick up the red cube"})
        ds.save_episode()
    ds.finalize()
    demos = load_demo_file(tmp_path / "toy", ["front"], per_task=2)
    assert len(demos) == 2 and demos[0].actions.shape == (6, 2) and demos[0].images["front"].shape == (6, 24, 24, 3)
    assert demos[0].instruction == "pick up the red cube" and demos[0].env_name == "so100"
    pol = SmallVLA(PolicyConfig(head="gaussian", cameras=["front"], image_size=24, state_dim=3, action_dim=2,
                                chunk_size=2, n_action_steps=2),
                   WordTokenizer.build([demos[0].instruction]))
    losses = train_sft(pol, demos, SFTConfig(steps=60, batch_size=8, image_shift=0))
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    with pytest.raises(KeyError, match="observation.images.wrist"):
        load_demo_file(tmp_path / "toy", ["wrist"])
    assert torch.isfinite(torch.tensor(losses)).all()

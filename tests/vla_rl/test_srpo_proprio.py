"""``srpo.encoder: proprio``: SRPO's latent is the robot's own observation state at the sampled frames (no network,
no image). The rollout records each episode's states aligned with its frames; the reward embeds them as it embeds a
video (same frame sampling and pooling, ``state_dims`` selecting entries); a run's rewards are SRPO's rule on those
embeddings; bad settings stop the run at start with one line (exit 2, nothing written)."""

from pathlib import Path

import numpy as np
import pytest
import torch

from grpo.config import ConfigError, load_config
from rewards import RewardBatch
from rewards.srpo import SRPOConfig, SRPOReward, sample_frames, srpo_progress, state_embeddings
from rewards.success import episode_metadata
from vla_rl.cli import main
from vla_rl.trainer import VLARLConfig, VLARLTrainer

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "configs/vla/tabletop_reach_one.yaml")
PROPRIO = ["srpo.encoder=proprio", "srpo.reference=group", "srpo.state_dims=[0,1,2]"]


def test_state_embeddings_sample_select_and_pool_like_a_video():
    rng = np.random.default_rng(0)
    states = [rng.normal(size=(t, 9)).astype(np.float32) for t in (5, 12, 1)]
    cfg = SRPOConfig(encoder="proprio", num_frames=4, pooling="mean_last", state_dims=[2, 0])
    emb = state_embeddings(states, cfg)
    assert emb.shape == (3, 4) and emb.dtype == torch.float32
    for i, st in enumerate(states):  # the video path's frame indices, then the selected entries, mean and last
        x = sample_frames(torch.as_tensor(st), 4)[:, [2, 0]]
        torch.testing.assert_close(emb[i], torch.cat([x.mean(0), x[-1]]))
    whole = state_embeddings(states, SRPOConfig(encoder="proprio", num_frames=4, pooling="last"))
    torch.testing.assert_close(whole, torch.stack([torch.as_tensor(s[-1]) for s in states]))  # last frame included
    with pytest.raises(ValueError, match=r"srpo.state_dims=\[9\]: the observation state has 9 entries"):
        state_embeddings(states, SRPOConfig(encoder="proprio", state_dims=[9]))


def test_the_reward_grades_failures_by_the_distance_of_their_states():
    """Group rule: each failure against its own group's success; the failure that ended nearer scores higher."""
    cfg = SRPOConfig(encoder="proprio", reference="group", num_frames=2, pooling="last", state_dims=[0, 1, 2])
    end = {0: [0.0, 0.0, 0.0], 1: [0.05, 0.0, 0.0], 2: [0.3, 0.0, 0.0], 3: [1.0, 1.0, 1.0], 4: [1.1, 1.0, 1.0]}
    states = [np.array([[0.5, 0.5, 0.5, 9.0], [*end[i], float(i)]], np.float32) for i in range(5)]
    meta = episode_metadata(["t"] * 5, torch.tensor([True, False, False, True, False]), [0, 0, 0, 1, 1])
    for m, s in zip(meta, states):
        m["states"] = s
    out = SRPOReward(cfg)(RewardBatch(metadata=meta))
    want = srpo_progress(torch.tensor([e for e in end.values()]), ["t"] * 5, torch.tensor([1, 0, 0, 1, 0]).bool(),
                         cfg, [0, 0, 0, 1, 1])
    torch.testing.assert_close(out.total, want.total)
    assert out.total[0] == out.total[3] == 1.0 and out.total[1] > out.total[4] > out.total[2]  # 0.05 < 0.1 < 0.3
    with pytest.raises(ValueError, match="states"):
        SRPOReward(cfg)(RewardBatch(metadata=episode_metadata(["t"], torch.tensor([False]))))
    with pytest.raises(ValueError, match="expected no image encoder"):
        SRPOReward(cfg, encoder=object())


@pytest.mark.parametrize("over, match", [
    (["srpo.state_dims=[0,0]"], "distinct"), (["srpo.state_dims=[-1]"], "state_dims"),
    (["srpo.state_dims=[]"], "state_dims"),
    (["srpo.encoder=random_conv", "srpo.state_dims=[0]"], "only encoder=proprio"),
    (["srpo.encoder_path=/tmp/x.safetensors"], "encoder_path")])
def test_bad_settings_are_refused_by_the_config(over, match):
    with pytest.raises((ValueError, ConfigError), match=match):
        load_config(VLARLConfig, RECIPE, PROPRIO + over)


def test_a_run_rewards_its_episodes_by_their_states(tmp_path):
    over = PROPRIO + [f"output_dir={tmp_path / 'run'}", "sft.steps=2", "sft.demos_per_task=1", "rl.iterations=1",
                      "rl.groups_per_task=3", "grpo.group_size=3", "env.max_episode_steps=4", "rl.eval_episodes=1",
                      "rl.eval_every=0", "rl.num_videos=0"]
    tr = VLARLTrainer(load_config(VLARLConfig, RECIPE, over), quiet=True)
    assert tr.srpo is not None and tr.srpo.encoder is None
    specs, _, batch = tr.rollout(0)
    for e in batch.episodes:  # the states are the env's observation states, one per frame
        assert len(e.states) == len(e.frames) == e.length + 1 and e.states[0].shape == (tr.policy.cfg.state_dim,)
    batch.episodes[1].success = True  # one success in group 0: its failures are graded against it
    rew = tr.rewards(batch, specs)
    emb = state_embeddings([np.stack(e.states) for e in batch.episodes], tr.cfg.srpo)
    want = srpo_progress(emb, [s.env_name for s in specs], batch.success, tr.cfg.srpo, [s.group_id for s in specs])
    torch.testing.assert_close(rew.total, want.total)
    assert rew.total[1] == 1.0 and 0.0 < float(rew.total[[0, 2]].max()) <= tr.cfg.srpo.progress_max
    for e in batch.episodes:  # the frames are not read (nor stacked, which would raise now): the same rewards
        e.frames = e.frames[:1] + [np.zeros(0, np.uint8)] * (len(e.frames) - 1)
    assert torch.equal(tr.rewards(batch, specs).total, rew.total)
    tr.pool.close()


def test_state_dims_beyond_the_env_state_stop_the_run_at_start(tmp_path, capsys):
    rc = main(["train", RECIPE, *PROPRIO[:2], "srpo.state_dims=[0,42]", f"output_dir={tmp_path / 'r'}",
               "sft.steps=1", "rl.iterations=1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "srpo.state_dims=[0, 42]" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "r").exists()


def test_a_predicted_reference_run_checkpoints_its_memory_and_resumes_it(tmp_path):
    """``srpo.reference=predicted`` in a run: the groups' initial frames are embedded by the frozen policy image
    encoder, the successful groups enter the memory, the checkpoint holds the memory and the frozen weights, and a
    resumed trainer restores both exactly (its first reward equals the uninterrupted one)."""
    over = PROPRIO + ["srpo.reference=predicted", "srpo.predictor_min_layouts=2", "srpo.predictor_min_r2=-1e9",
                      f"output_dir={tmp_path / 'run'}", "sft.steps=2", "sft.demos_per_task=1", "rl.iterations=2",
                      "rl.groups_per_task=4", "grpo.group_size=3", "env.max_episode_steps=4", "rl.eval_episodes=1",
                      "rl.eval_every=0", "rl.num_videos=0"]
    cfg = load_config(VLARLConfig, RECIPE, over)
    tr = VLARLTrainer(cfg, quiet=True)
    specs, _, batch = tr.rollout(0)
    for k in (0, 3, 6):  # a success in groups 0, 1 and 2; group 3 fails throughout
        batch.episodes[k].success = True
    tr.rewards(batch, specs)
    assert tr.srpo.last.predicted_groups == 1 and tr.srpo.last.predictor[specs[0].env_name][1] == 3
    assert float(tr.srpo.last.total[9:].max()) > 0  # the all-failure group is graded against its prediction
    policy_w = tr.policy.image_encoder.convs[0].weight.detach().clone()
    with torch.no_grad():  # the policy moves on; the scene encoder stays the frozen copy
        tr.policy.image_encoder.convs[0].weight.add_(1.0)
    assert torch.equal(tr.srpo.scene.module.convs[0].weight, policy_w)
    tr.save()
    st = tr.srpo.state_dict()
    tr.pool.close()
    back = VLARLTrainer(load_config(VLARLConfig, RECIPE, over + ["resume=true"]), quiet=True)
    assert back.maybe_resume()
    for key in ("features", "latents"):
        for task, rows in st["memory"][key].items():
            torch.testing.assert_close(torch.as_tensor(np.stack(getattr(back.srpo.memory, key)[task])), rows)
    assert torch.equal(back.srpo.scene.module.convs[0].weight, policy_w)  # the frozen weights, not the policy's
    back.pool.close()


def test_a_predicted_reference_without_an_image_policy_stops_at_start(tmp_path, capsys):
    rc = main(["train", RECIPE, "srpo.reference=predicted", "policy.cameras=[]", "policy.use_images=false",
               "sft.base_policy=null", f"output_dir={tmp_path / 'r'}", "sft.steps=1", "rl.iterations=1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "srpo.scene_encoder=policy" in err[0] and "random_conv" in err[0]
    assert not (tmp_path / "r").exists()

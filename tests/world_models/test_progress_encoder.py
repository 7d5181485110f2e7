"""SRPO's learned progress encoder (world_models.progress_encoder): targets, training that learns, the one-command
build (`vla-rl fit-encoder`), the file's checks, and its use as `srpo.encoder: progress`."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from rewards import RewardBatch
from rewards.srpo import SRPOConfig, SRPOReward
from rewards.success import episode_metadata
from vla_rl.cli import main
from vla_rl.srpo_encoders import build_trajectory_encoder
from world_models.progress_encoder import (
    FitDataConfig,
    FitEncoderConfig,
    ProgressEncoder,
    ProgressEncoderConfig,
    ProgressTrainConfig,
    check_fit_inputs,
    expert_episode,
    frame_times,
    load_progress_encoder,
    read_progress_metadata,
    record_expert_episodes,
    record_play_episodes,
    save_progress_encoder,
    time_to_go,
    train_progress_encoder,
)

ROOT = Path(__file__).resolve().parents[2]


def test_time_to_go_targets():
    np.testing.assert_allclose(time_to_go(np.array([0, 0, 0, 0, 1, 1], bool)), [1, 0.75, 0.5, 0.25, 0, 0])
    np.testing.assert_allclose(time_to_go(np.array([1, 1], bool)), [0, 0])
    with pytest.raises(ValueError, match="successful"):
        time_to_go(np.zeros(3, bool))


def test_an_expert_episode_ends_hold_steps_after_its_first_success_on_a_built_env():
    """The bench's references (``hold_steps=0``: ending at the success) and the recorded episodes (held 2 frames) are
    the same roll of the scripted expert; the states are the observation states, one per frame."""
    import sims

    env = sims.make("tabletop/reach_one", image_size=32, cameras=("agentview",))
    try:
        frames, flags, states = expert_episode(env, 570_000, 30, "agentview", 0, 0.0)
        assert flags[-1] and not flags[:-1].any() and len(frames) == len(states) == len(flags) > 1
        assert states.dtype == np.float32 and states.shape[1] == env.observation_space["state"].shape[0]
        held = expert_episode(env, 570_000, 30, "agentview", 2, 0.0)
        assert held[1][-3:].all() and len(held[0]) == len(frames) + 2 and np.array_equal(held[0][:len(frames)], frames)
        assert expert_episode(env, 570_000, 1, "agentview", 0, 0.0) is None  # no success within one step
    finally:
        env.close()
    (want, want_flags), = record_expert_episodes("tabletop/reach_one", 1, 570_000, noise=0.0)
    assert np.array_equal(held[0], want) and np.array_equal(held[1], want_flags)


def test_training_learns_time_to_go_on_held_out_episodes():
    """Trained on 12 expert reach_one episodes, the encoder orders 6 episodes from other initial states by time to go
    (an untrained one does not: the check can fail)."""
    train = record_expert_episodes("tabletop/reach_one", 12, 900_000, max_steps=30)
    held = record_expert_episodes("tabletop/reach_one", 6, 910_000, max_steps=30)

    def corr(enc):
        cs = []
        for frames, flags in held:
            with torch.no_grad():
                r = enc.encode_frames(torch.as_tensor(frames).permute(0, 3, 1, 2)[None])[0, :, 0].numpy()
            cs.append(spearmanr(r, time_to_go(flags)).statistic)
        return float(np.mean(cs))

    torch.manual_seed(0)
    enc = ProgressEncoder(ProgressEncoderConfig(channels=[8, 16, 16], hidden=32))
    before = corr(enc)
    losses = train_progress_encoder(enc, [f for f, _ in train], [time_to_go(s) for _, s in train],
                                    ProgressTrainConfig(steps=150, batch_episodes=16, lr=3e-3), seed=0)
    after = corr(enc)
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:5])
    assert after > 0.8 and after > before + 0.3, (before, after)


def test_frame_times_stamp_successes_and_other_episodes():
    t, direct = frame_times(torch.tensor([1, 0.75, 0.5, 0.25, 0, 0]))
    assert direct and t.tolist() == [0, 1, 2, 3, 4, 4]  # frames held after the success: no time passes
    t, direct = frame_times(torch.ones(4))
    assert not direct and t.tolist() == [0, 1, 2, 3]  # play: time passes, nothing is direct
    t, direct = frame_times(torch.zeros(3))
    assert not direct  # succeeded at the first frame: no path to stamp


def test_distance_head_learns_temporal_distances_on_held_out_episodes():
    """The distance head trained on 12 expert reach_one episodes (and 4 play episodes, upper bounds only): on 6
    episodes from other initial states, the latent distance of each frame to its episode's success frame matches the
    temporal distance (steps to the success over the median success length): pooled over all frames of all
    episodes, ranked alike and within half the untrained head's error (an untrained head's distances grow along an
    episode too, but not on the steps' scale nor comparably across episodes: the check can fail)."""
    train = record_expert_episodes("tabletop/reach_one", 12, 900_000, max_steps=30)
    play = record_play_episodes("tabletop/reach_one", 4, 950_000, horizon=10)
    held = record_expert_episodes("tabletop/reach_one", 6, 910_000, max_steps=30)
    ell = float(np.median([int(np.argmax(s)) for _, s in train]))

    def fit(enc):
        d, target = [], []
        for frames, flags in held:
            with torch.no_grad():
                z = enc.encode_frames(torch.as_tensor(frames).permute(0, 3, 1, 2)[None])[0]
            ts = int(np.argmax(flags))
            d.extend((z - z[ts]).norm(dim=-1).tolist())
            target.extend((np.maximum(ts - np.arange(len(frames)), 0) / ell).tolist())
        d, target = np.array(d), np.array(target)
        return float(spearmanr(d, target).statistic), float(np.abs(d - target).mean())

    torch.manual_seed(0)
    enc = ProgressEncoder(ProgressEncoderConfig(channels=[8, 16, 16], hidden=32, head="distance", dim=8))
    rank0, err0 = fit(enc)
    losses = train_progress_encoder(enc, [f for f, _ in train] + [f for f, _ in play],
                                    [time_to_go(s) for _, s in train] + [y for _, y in play],
                                    ProgressTrainConfig(steps=150, batch_episodes=16, lr=3e-3), seed=0)
    rank, err = fit(enc)
    assert enc.dim == 8 and enc.encode_frames(torch.rand(2, 3, 3, 32, 32)).shape == (2, 3, 8)
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:5])
    assert rank > 0.8 and rank > rank0 + 0.1 and err < 0.5 * err0 and err < 0.2, (rank0, err0, rank, err)


def test_progress_model_config_refuses_bad_heads():
    for kw, msg in (({"head": "value"}, "model.head='value'"), ({"dim": 0}, "model.dim"),
                    ({"head": "distance", "context": "first"}, "model.context='first' with model.head=distance"),
                    ({"context": "last"}, "model.context='last'"), ({"aux_dim": -1}, "model.aux_dim"),
                    ({"head": "distance", "aux_dim": 4}, "model.aux_dim=4 with model.head=distance")):
        with pytest.raises(ValueError, match=msg):
            ProgressEncoderConfig(**kw)


def test_auxiliary_distance_projection_trains_and_round_trips(tmp_path):
    """model.aux_dim: the time-to-go head's features also fit temporal distances (train.distance_weight); the file
    holds the projection, the loader rebuilds it, SRPO still reads one latent; weight 0 leaves it untrained."""
    train = record_expert_episodes("tabletop/reach_one", 4, 900_000, max_steps=30)
    videos, targets = [f for f, _ in train], [time_to_go(s) for _, s in train]
    cfg = ProgressEncoderConfig(channels=[8, 16, 16], hidden=16, aux_dim=4)
    torch.manual_seed(0)
    enc = ProgressEncoder(cfg)
    w0 = enc.aux.weight.detach().clone()
    train_progress_encoder(enc, videos, targets, ProgressTrainConfig(steps=3, batch_episodes=4, distance_weight=0.0))
    assert torch.equal(enc.aux.weight, w0)  # weight 0: the projection gets no gradient
    losses = train_progress_encoder(enc, videos, targets, ProgressTrainConfig(steps=3, batch_episodes=4))
    assert not torch.equal(enc.aux.weight, w0) and all(np.isfinite(losses))
    back = load_progress_encoder(save_progress_encoder(enc, tmp_path / "aux.safetensors", {"tasks": []}))
    assert back.cfg.aux_dim == 4 and torch.equal(back.aux.weight, enc.aux.weight)
    video = torch.rand(2, 3, 3, 32, 32)
    assert back.encode_frames(video).shape == (2, 3, 1)
    torch.testing.assert_close(back.encode_frames(video), enc.encode_frames(video))
    assert "aux.weight" not in ProgressEncoder().state_dict()  # files without it keep their tensors


def test_fit_encoder_command_builds_a_file_srpo_loads(tmp_path, capsys):
    out = tmp_path / "enc.safetensors"
    rc = main(["fit-encoder", str(ROOT / "configs/vla/fit_progress_encoder.yaml"),
               "data.expert_tasks=[tabletop/reach_one]",
               "data.expert_per_task=2", "data.play_per_task=1", "data.play_horizon=4", "train.steps=3",
               "train.batch_episodes=4", f"output={out}"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["output"] == str(out)
    meta = read_progress_metadata(out)
    assert meta["trained_on"]["expert"]["tabletop/reach_one"]["play_episodes"] == 1
    assert meta["trained_on"]["expert"]["tabletop/reach_one"]["episodes"] == 2
    assert meta["trained_on"]["camera"] == "agentview"
    enc = build_trajectory_encoder(SRPOConfig(encoder="progress", encoder_path=str(out)))
    video = torch.rand(2, 5, 3, 32, 32)
    assert enc.encode_frames(video).shape == (2, 5, 1)
    cfg = SRPOConfig(encoder="progress", encoder_path=str(out), num_frames=4, frame_size=32, reference="task")
    videos = [torch.randint(0, 256, (6, 32, 32, 3), dtype=torch.uint8) for _ in range(4)]
    res = SRPOReward(cfg, enc)(RewardBatch(videos=videos,
                                           metadata=episode_metadata(["t"] * 4,
                                                                     torch.tensor([1, 0, 0, 1], dtype=torch.bool))))
    assert res.total[0] == 1 and res.total[3] == 1 and ((res.total[1:3] > 0) & (res.total[1:3] < 0.6)).all()


def test_fit_encoder_builds_a_distance_head_srpo_reads(tmp_path, capsys):
    out = tmp_path / "dist.safetensors"
    rc = main(["fit-encoder", str(ROOT / "configs/vla/fit_progress_encoder.yaml"),
               "data.expert_tasks=[tabletop/reach_one]", "data.expert_per_task=2", "data.play_per_task=1",
               "data.play_horizon=4", "train.steps=3", "train.batch_episodes=4", "model.head=distance", "model.dim=8",
               f"output={out}"])
    assert rc == 0, capsys.readouterr().err
    meta = read_progress_metadata(out)
    assert meta["config"].head == "distance" and meta["config"].dim == 8
    enc = build_trajectory_encoder(SRPOConfig(encoder="progress", encoder_path=str(out)))
    assert enc.encode_frames(torch.rand(2, 5, 3, 32, 32)).shape == (2, 5, 8)
    cfg = SRPOConfig(encoder="progress", encoder_path=str(out), num_frames=4, frame_size=32, pooling="last",
                     reference="task")
    videos = [torch.randint(0, 256, (6, 32, 32, 3), dtype=torch.uint8) for _ in range(4)]
    res = SRPOReward(cfg, enc)(RewardBatch(videos=videos,
                                           metadata=episode_metadata(["t"] * 4,
                                                                     torch.tensor([1, 0, 0, 1], dtype=torch.bool))))
    assert res.total[0] == 1 and res.total[3] == 1 and ((res.total[1:3] > 0) & (res.total[1:3] < 0.6)).all()


def test_bad_encoder_files_fail_in_one_line(tmp_path, capsys):
    enc = ProgressEncoder()
    good = save_progress_encoder(enc, tmp_path / "good.safetensors", {"tasks": []})
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_progress_encoder(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_progress_encoder(tmp_path / "junk.safetensors")
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(tmp_path / "other.safetensors"), metadata={"encoder": "small"})
    with pytest.raises(ValueError, match="metadata encoder='small', expected 'progress'"):
        load_progress_encoder(tmp_path / "other.safetensors")
    sd = {k: v for k, v in enc.state_dict().items() if not k.startswith("head.2")}
    save_file(sd, str(tmp_path / "cut.safetensors"), metadata={"encoder": "progress", "config": json.dumps(
        {"channels": [16, 32, 32], "image_size": 32, "hidden": 64})})
    with pytest.raises(ValueError, match="tensors do not match"):
        load_progress_encoder(tmp_path / "cut.safetensors")
    assert load_progress_encoder(good).dim == 1
    # through the CLI: one line, exit 2, before anything is built or written
    run = tmp_path / "run"
    for bad in (tmp_path / "missing.safetensors", tmp_path / "junk.safetensors", tmp_path / "other.safetensors"):
        capsys.readouterr()
        rc = main(["train", str(ROOT / "configs/vla/tabletop_reach_one_progress.yaml"), f"srpo.encoder_path={bad}",
                   f"output_dir={run}"])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and err.startswith("error: srpo.encoder_path="), err
        assert not run.exists()
    r = subprocess.run([sys.executable, "-m", "vla_rl.cli", "fit-encoder",
                        str(ROOT / "configs/vla/fit_progress_encoder.yaml"),
                        "output=enc.pt"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "expected a path ending in .safetensors" in r.stderr, r.stderr


def test_fit_inputs_take_the_extra_view_as_data_camera(tmp_path):
    """data.camera may name the tabletop env's extra view (data.env_kwargs.extra_view = [name, camera, size]); a
    name that is neither a camera nor that view: one line naming data.camera. Nothing is written."""
    def cfg(**kw):
        return FitEncoderConfig(output=str(tmp_path / "enc.safetensors"), model=ProgressEncoderConfig(image_size=64),
                                data=FitDataConfig(expert_tasks=["tabletop/reach_one"], image_size=64, **kw))

    check_fit_inputs(cfg(camera="srpo", env_kwargs={"extra_view": ["srpo", "agentview", 64]}))
    for kwargs in ({}, {"extra_view": ["other", "agentview", 64]}):
        with pytest.raises(ValueError, match="data.camera") as e:
            check_fit_inputs(cfg(camera="srpo", env_kwargs=kwargs))
        assert "\n" not in str(e.value) and "'srpo'" in str(e.value), e.value
    assert list(tmp_path.iterdir()) == []


def test_progress_recipe_dry_run(capsys):
    assert main(["train", str(ROOT / "configs/vla/tabletop_reach_one_progress.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "encoder: progress" in out and "reference: task" in out

"""Simulator data (SANS mix), windows, the world model as a sims env and its success head (tiny sizes); the
World-VLA-Loop command is tests/vla_rl/test_wm_loop.py."""

import dataclasses

import numpy as np
import pytest
import torch

from world_models.data import (
    KINDS,
    StatePredictor,
    Trajectories,
    collect_sans,
    state_predictor_error,
    train_state_predictor,
)
from world_models.video_wm import VideoWorldModel, WorldModelConfig
from world_models.windows import wm_windows

TINY_WM = dict(image_size=32, context_frames=2, chunk=2, action_dim=4, sampling_steps=2, layers=1, ffn_dim=32)


@pytest.fixture(scope="module")
def sans():
    return collect_sans("tabletop/reach", {"success": 3, "near": 2, "failure": 2, "random": 2}, horizon=12,
                        image_size=32)


def test_collect_sans_mix(sans, tmp_path):
    n = 9
    assert sans.frames.shape == (n, 13, 3, 32, 32) and sans.frames.dtype == torch.uint8
    assert sans.actions.shape == (n, 12, 4) and sans.success.shape == (n, 13) and sans.state.shape == (n, 13, 9)
    assert sans.kinds == ["success"] * 3 + ["near"] * 2 + ["failure"] * 2 + ["random"] * 2
    assert len(set(sans.init_seeds)) == n and all(sans.instructions)
    ok = sans.episode_success
    assert ok[:3].all() and not ok[5:7].any()  # the expert reaches; the wrong-object expert does not
    assert float(sans.actions.abs().max()) <= 1.0
    # frames move under the actions (the gripper is rendered)
    assert float((sans.videos[:, -1] - sans.videos[:, 0]).abs().mean()) > 1e-3
    both = sans.cat(sans.subset([0, 5]))
    assert len(both) == n + 2 and both.kinds[-2:] == ["success", "failure"]
    path = sans.save(tmp_path / "d.pt")
    back = Trajectories.load(path)
    assert torch.equal(back.frames, sans.frames) and back.kinds == sans.kinds
    with pytest.raises(ValueError, match="unknown episode kind"):
        collect_sans(counts={"expert": 1})
    assert set(sans.counts()) >= set(KINDS)


def test_windows_pad_the_first_frame(sans):
    w = wm_windows(sans, context_frames=2, chunk=2)
    ctx, act, fut, suc = w.context, w.actions, w.future, w.success
    assert len(w) == 99 and w.text is None and w.state is None and w.ref is None
    # 13 frames + 1 pad = 14 -> 14 - 2 - 2 + 1 = 11 windows per episode
    assert ctx.shape == (9 * 11, 2, 3, 32, 32) and act.shape == (99, 2, 4) and fut.shape == (99, 2, 3, 32, 32)
    v = sans.videos
    assert torch.equal(ctx[0, 0], ctx[0, 1]) and torch.equal(ctx[0, 1], v[0, 0])  # first window: padded start
    # the first chunk starts at the real first frame: actions 0, 1 produce frames 1, 2
    assert torch.equal(act[0], sans.actions[0, :2]) and torch.equal(fut[0], v[0, 1:3]) and suc.shape == (99, 2)
    assert len(wm_windows(sans, 2, 2, stride=3)) == 9 * 4
    assert wm_windows(sans, 2, 2, text_dim=8).text.shape == (99, 8)


def test_state_predictor_beats_copy(sans):
    torch.manual_seed(0)
    sp = StatePredictor(9, 4, hidden=64)
    train_state_predictor(sp, sans.subset(range(7)), steps=300)
    err = state_predictor_error(sp, sans.subset([7, 8]))
    assert err["state_mse"] < 0.5 * err["state_copy_mse"], err


def test_world_model_env_runs_sims_api_and_vla_trainer_unchanged(sans, tmp_path):
    import sims
    from grpo.config import load_config
    from vla_rl.trainer import VLARLConfig, VLARLTrainer
    from world_models.wm_env import StartPool, WorldModelEnv, register_world_model_env

    torch.manual_seed(0)
    wm = VideoWorldModel(WorldModelConfig(**TINY_WM))
    sp = StatePredictor(9, 4, hidden=16)
    starts = StartPool.from_sim("tabletop/reach", range(3), 32)
    name = register_world_model_env("wm/test_reach", wm, sp, starts, max_steps=5, seed=1)
    env = sims.make(name, image_size=32)
    assert isinstance(env, WorldModelEnv)
    with pytest.raises(ValueError, match="renders 32px"):
        sims.make(name, image_size=64)
    # options: its own (image_size, max_steps, cameras); registered for a simulator, that simulator's too (a run hands
    # both the same env.kwargs); anything else is refused by make and by sims.check_options, which builds nothing
    with pytest.raises(TypeError, match=r"unknown world-model env option\(s\) \['object_state'\]; valid: \['cameras'"):
        sims.make(name, image_size=32, object_state=True)
    with pytest.raises(ValueError, match="env.kwargs for wm/test_reach: unknown world-model env option"):
        sims.check_options(name, {"object_state": True})
    sims.check_options(name, {"image_size": 32, "max_steps": 5, "cameras": ["agentview"]})
    imit = register_world_model_env("wm/test_reach_sim", wm, sp, starts, "tabletop/reach", max_steps=5)
    assert isinstance(sims.make(imit, image_size=32, reward="dense"), WorldModelEnv)
    with pytest.raises(ValueError, match=r"env.kwargs for tabletop/reach: unknown TabletopConfig option\(s\) "
                                         r"\['bogus'\]"):
        sims.make(imit, image_size=32, bogus=1)
    with pytest.raises(ValueError, match="reward must be 'sparse' or 'dense'"):
        sims.check_options(imit, {"reward": "dens"})
    obs, info = env.reset(seed=0, options={"init_seed": 4})
    assert obs["images"]["agentview"].shape == (32, 32, 3) and obs["state"].shape == (9,)
    assert np.array_equal(obs["images"]["agentview"], starts.frames[1]) and obs["instruction"] == starts.instructions[1]
    a = np.array([0.5, 0.0, 0.0, 0.0], np.float32)
    o1, r, term, trunc, info = env.step(a)  # mid-chunk: the frame holds, the state moves
    assert np.array_equal(o1["images"]["agentview"],
                          obs["images"]["agentview"]) and not np.array_equal(o1["state"], obs["state"])
    o2, *_ = env.step(a)  # chunk of 2 closes: a predicted frame
    assert not np.array_equal(o2["images"]["agentview"], obs["images"]["agentview"])
    steps = 2
    while not (term or trunc):
        _, r, term, trunc, info = env.step(a)
        steps += 1
    assert steps <= 5 and (trunc or info["success"]) and info["task"] == "wm/test_reach"
    # determinism for a fixed seed
    frames = []
    for _ in range(2):
        env.reset(seed=3, options={"init_seed": 1})
        frames.append([env.step(a)[0]["images"]["agentview"] for _ in range(4)])
    assert all(np.array_equal(x, y) for x, y in zip(*frames))
    with pytest.raises(ValueError, match="finite"):
        env.step([np.nan, 0, 0, 0])

    # vla_rl's trainer, unchanged, trains a policy inside the world model
    cfg = load_config(VLARLConfig, None, [
        f"output_dir={tmp_path / 'vla'}", "env.tasks=[wm/test_reach]", "env.max_episode_steps=4",
        "env.kwargs={image_size: 32}",
        "policy.image_size=32", "policy.chunk_size=2", "policy.n_action_steps=2", "policy.flow.num_steps=2",
        "sft.steps=0",
        "rl.iterations=1", "rl.groups_per_task=2", "rl.eval_episodes=2", "rl.num_videos=0", "rl.reward=binary",
        "rl.dynamic_sampling=false", "grpo.group_size=2", "resume=false"])
    out = VLARLTrainer(cfg, quiet=True).train()
    assert out["iterations"] == 1 and 0.0 <= out["final_success"] <= 1.0


def test_success_head_learns_on_the_models_own_frames(sans):
    """The head's imagined samples are the world model's open-loop rollouts under the recorded actions,
    labelled with the real episode's success; training on them fits the head to predicted frames."""
    import copy

    from world_models.fit import imagined_success_samples, rollout_video
    from world_models.video_wm import train_success_head, train_world_model
    from world_models.windows import success_samples

    torch.manual_seed(0)
    wm = VideoWorldModel(WorldModelConfig(**TINY_WM))
    win = wm_windows(sans, 2, 2, text_dim=wm.cfg.text_dim)
    train_world_model(wm, win, steps=10, batch=8)
    n, t = sans.actions.shape[:2]
    imagined = imagined_success_samples(wm, sans, rollouts=2, seed=3, steps=2).materialize()
    fr, act, y, txt = imagined.frames, imagined.actions, imagined.labels, imagined.text
    assert imagined.state is None and imagined.ref is None
    assert fr.shape == (2 * n * t, 3, 32, 32) and act.shape == (2 * n * t, 4) and y.shape == (2 * n * t,)
    assert txt.shape == (2 * n * t, wm.cfg.text_dim)
    pred, _ = rollout_video(wm, sans.videos[:, 0], sans.actions, seed=3, steps=2, instructions=sans.instructions)
    assert torch.equal(fr[:n * t], pred[:, 1:].flatten(0, 1))  # the model's own frames, as the env sees them
    assert torch.equal(act[:n * t], sans.actions.flatten(0, 1))  # the actions that produced them
    assert torch.equal(y[:n * t], sans.success[:, 1:].flatten()) and torch.equal(y[n * t:], y[:n * t])  # real labels
    assert not torch.equal(fr[:n * t], fr[n * t:])  # the second rollout draws other noise
    real = sans.videos[:, 1:].flatten(0, 1)
    assert float((fr[:n * t] - real).abs().mean()) > 1e-2  # predicted frames, not the real ones
    assert 0 < float(y.sum()) < y.numel()

    def imagined_bce(model):
        with torch.no_grad():
            lg = model.success_head(fr[:, None] * 2 - 1, act[:, None], txt)[:, 0]
        return float(torch.nn.functional.binary_cross_entropy_with_logits(lg, y))

    real_only, mixed = copy.deepcopy(wm), copy.deepcopy(wm)
    train_success_head(real_only, win, steps=150, seed=0, balance=False)
    train_success_head(mixed, win, steps=150, seed=0, balance=False, imagined=imagined, imagined_fraction=0.5)
    assert imagined_bce(mixed) < 0.8 * imagined_bce(real_only), (imagined_bce(mixed), imagined_bce(real_only))
    # imagined_fraction=1: every sample is a predicted frame (inverted real labels change nothing)
    only, only_flipped = copy.deepcopy(wm), copy.deepcopy(wm)
    train_success_head(only, win, steps=5, seed=1, imagined=imagined, imagined_fraction=1.0)
    train_success_head(only_flipped, dataclasses.replace(win, success=1 - win.success), steps=5, seed=1,
                       imagined=imagined,
                       imagined_fraction=1.0)
    assert all(torch.equal(a, b) for a, b in zip(only.success_head.parameters(),
                                                 only_flipped.success_head.parameters()))
    for a, b in zip(mixed.transformer.parameters(), wm.transformer.parameters()):
        assert torch.equal(a, b)  # only the head trains
    with pytest.raises(ValueError, match="imagined_fraction"):
        train_success_head(mixed, win, steps=1, imagined=imagined, imagined_fraction=1.5)
    with pytest.raises(ValueError, match="leading"):
        success_samples(pred[:, 1:], sans.actions[:, 1:], sans.success[:, 1:])


def test_success_head_augmentation_keeps_the_frame_content():
    from world_models.video_wm import _augment_frames

    x = torch.rand(16, 3, 8, 8)
    flips = _augment_frames(x, torch.Generator().manual_seed(0), shift=0)
    same = [torch.equal(a, b) for a, b in zip(x, flips)]
    flipped = [torch.equal(a.flip(-1), b) for a, b in zip(x, flips)]
    assert all(s or f for s, f in zip(same, flipped)) and any(same) and any(flipped)
    y = _augment_frames(x, torch.Generator().manual_seed(1), shift=2)
    assert y.shape == x.shape and not torch.equal(y, x)
    # a shift moves content, it does not invent it: every output pixel is some input pixel of its image
    for a, b in zip(x, y):
        vals = set(a.flatten().tolist())
        assert set(b.flatten().tolist()) <= vals

"""The state-aware success head: it reads the (predicted) simulator state at each frame next to the frames."""

import numpy as np
import pytest
import torch

from world_models.data import StatePredictor, collect_sans, predict_states, train_state_predictor
from world_models.video_wm import VideoWorldModel, WorldModelConfig, train_success_head, train_world_model
from world_models.windows import wm_windows

TINY_WM = dict(image_size=32, context_frames=2, chunk=2, action_dim=4, sampling_steps=2, layers=1, ffn_dim=32)
# reach with object_state: grip point at 0, balls at 9/12/15; the agentview camera of sims/tabletop/scene.py
GROUND = dict(state_dim=18, state_points=(0, 9, 12, 15), state_camera=(0, -0.4, 0.42, 1, 0, 0, 0, 0.686, 0.727, 50))


@pytest.fixture(scope="module")
def reach():
    """Reach episodes with object positions in the state: train, and held-out trajectories from (some of) the
    same initial layouts (other actor noise; grounding the instruction in new layouts needs more data than a
    unit test has: 120 episodes in loop_reach.yaml)."""
    kw = {"object_state": True}
    train = collect_sans("tabletop/reach", {"success": 16, "near": 12, "failure": 8, "random": 4}, horizon=10,
                         image_size=32, env_kwargs=kw)
    test = collect_sans("tabletop/reach", {"success": 5, "near": 4, "failure": 3}, horizon=10, image_size=32, seed=1,
                        seed_offset=0, env_kwargs=kw)
    return train, test


def test_state_aware_head_shapes_errors_and_state_dict():
    torch.manual_seed(0)
    wm = VideoWorldModel(WorldModelConfig(**TINY_WM, state_dim=5))
    ctx, act = torch.rand(3, 2, 3, 32, 32), torch.rand(3, 2, 4) * 2 - 1
    fut, st = torch.rand(3, 2, 3, 32, 32), torch.randn(3, 2, 5)
    assert wm.success_head(fut * 2 - 1, act, None, st).shape == (3, 2)
    frames, logits = wm.predict(ctx, act, state=st, text=["reach the red ball"] * 3)
    assert frames.shape == (3, 2, 3, 32, 32) and logits.shape == (3, 2)
    out = wm.loss(ctx, act, fut, torch.ones(3, 2), state=st)
    assert torch.isfinite(out["loss"]) and float(out["success_bce"]) > 0
    with pytest.raises(ValueError, match=r"state-aware.*\[B=3, K=2, 5\]"):
        wm.predict(ctx, act)
    with pytest.raises(ValueError, match=r"state must be \[B=3, K=2, 5\]"):
        wm.predict(ctx, act, state=torch.randn(3, 2, 4))
    with pytest.raises(ValueError, match=r"\[B=3, K=2, 5\]"):
        wm.loss(ctx, act, fut, torch.ones(3, 2))
    with pytest.raises(ValueError, match="state_dim"):
        WorldModelConfig(state_dim=-1)
    # the normalizer is fit once and travels with the state dict
    wm.success_head.fit_state_stats(st * 3 + 1)
    mean = wm.success_head.state_mean.clone()
    wm.success_head.fit_state_stats(torch.randn(7, 5))  # no-op: already fit
    assert torch.equal(wm.success_head.state_mean, mean)
    other = VideoWorldModel(WorldModelConfig(**TINY_WM, state_dim=5))
    other.load_state_dict(wm.state_dict())
    assert torch.equal(other.success_head(fut * 2 - 1, act, None, st), wm.success_head(fut * 2 - 1, act, None, st))
    # state_dim=0: today's frames-only head (no state buffers, the state argument is ignored)
    plain = VideoWorldModel(WorldModelConfig(**TINY_WM))
    assert not any("state_" in k for k in plain.state_dict()) and plain.predict(ctx, act)[1].shape == (3, 2)


def test_windows_and_imagined_samples_carry_states(reach):
    from world_models.fit import imagined_success_samples, rollout_video

    train, _ = reach
    n, t = train.actions.shape[:2]
    win = wm_windows(train, 2, 2, state=True)
    assert win.text is None and win.state.shape == (len(win), 2, 18)
    assert torch.equal(win.state[:n], train.state[:, 1:3])  # first window: futures are frames 1, 2
    assert torch.equal(win.ref[:n], train.videos[:, 0]) and torch.equal(win.ref[n:2 * n], train.videos[:, 0])
    assert wm_windows(train, 2, 2, text_dim=8, state=True).text.shape == (len(win), 8)
    torch.manual_seed(0)
    wm = VideoWorldModel(WorldModelConfig(**TINY_WM, state_dim=18))
    sp = StatePredictor(18, 4, hidden=16)
    train_state_predictor(sp, train, steps=20)
    with pytest.raises(ValueError, match="state_model"):
        imagined_success_samples(wm, train, steps=1)
    st = imagined_success_samples(wm, train, rollouts=1, seed=0, steps=1, state_model=sp).materialize().state
    pred_states = predict_states(sp, train.state[:, 0], train.actions)
    assert st.shape == (n * t, 18) and torch.equal(st, pred_states.flatten(0, 1))  # open-loop predicted states
    assert not torch.equal(st, train.state[:, 1:].flatten(0, 1))
    with pytest.raises(ValueError, match="states"):
        rollout_video(wm, train.videos[:, 0], train.actions)
    with pytest.raises(ValueError, match="future states .* \\(state\\)"):
        train_success_head(wm, wm_windows(train, 2, 2), steps=1)
    # with grounding the samples also carry the episode's first real frame
    gwm = VideoWorldModel(WorldModelConfig(**TINY_WM, **GROUND))
    out = imagined_success_samples(gwm, train, rollouts=1, seed=0, steps=1, state_model=sp).materialize()
    assert out.state is not None and torch.equal(out.ref, train.videos[:, 0].repeat_interleave(t, 0))


STEPS = 300


def _balanced_acc(logits: torch.Tensor, y: torch.Tensor) -> float:
    g, t = logits > 0, y > 0.5
    return 0.5 * (float(g[t].float().mean()) + float((~g[~t]).float().mean()))


def test_state_aware_head_beats_frames_only_on_imagined_frames(reach):
    """On held-out imagined rollouts (the model's own frames, the state model's open-loop states) the head that
    also reads the state (+ distances, grounding) separates successes better than the frames-only head
    trained the same way."""
    from world_models.fit import imagined_success_samples

    train, test = reach
    torch.manual_seed(0)
    sp = StatePredictor(18, 4)
    train_state_predictor(sp, train, steps=400, seed=0)
    base = VideoWorldModel(WorldModelConfig(**TINY_WM))
    train_world_model(base, wm_windows(train, 2, 2, text_dim=base.cfg.text_dim), steps=10, batch=8)
    accs = {}
    for name, extra in (("frames", {}), ("state", GROUND)):
        wm = VideoWorldModel(WorldModelConfig(**TINY_WM, reward_pool=1, **extra))
        wm.load_state_dict({k: v for k, v in base.state_dict().items() if not k.startswith("success_head")},
                           strict=False)
        win = wm_windows(train, 2, 2, text_dim=wm.cfg.text_dim, state=bool(extra))
        imagined = imagined_success_samples(wm, train, rollouts=1, seed=1, steps=1, state_model=sp)
        train_success_head(wm, win, steps=STEPS, seed=0, imagined=imagined, imagined_fraction=0.5, augment=True,
                           ground_weight=5.0)
        held = imagined_success_samples(wm, test, rollouts=1, seed=2, steps=1, state_model=sp).materialize()
        with torch.no_grad():
            lg = wm.success_head(held.frames[:, None] * 2 - 1, held.actions[:, None], held.text,
                                 held.state[:, None] if extra else None, held.ref * 2 - 1 if extra else None)[:, 0]
        accs[name] = _balanced_acc(lg, held.labels)
    assert accs["state"] > 0.85 and accs["state"] > accs["frames"] + 0.05, accs


def test_world_model_envs_feed_predicted_states(reach):
    from world_models.wm_env import StartPool, WorldModelEnv, WorldModelVecEnv

    train, _ = reach
    torch.manual_seed(0)
    wm = VideoWorldModel(WorldModelConfig(**TINY_WM, **GROUND))
    sp = StatePredictor(18, 4, hidden=16)
    seen, refs = [], []
    predict = wm.predict

    def spy(*a, **kw):
        seen.append(kw.get("state"))
        refs.append(kw.get("ref"))
        return predict(*a, **kw)

    wm.predict = spy
    starts = StartPool.from_sim("tabletop/reach", range(2), 32, env_kwargs={"object_state": True})
    env = WorldModelEnv(wm, sp, starts, max_steps=3, seed=0)
    obs, _ = env.reset(seed=0, options={"init_seed": 1})
    states = []
    for _ in range(3):
        o, *_ = env.step(np.array([0.5, 0.0, -0.2, 0.0], np.float32))
        states.append(o["state"])
    assert len(seen) == 2 and seen[0].shape == (1, 2, 18) and seen[1].shape == (1, 2, 18)
    assert np.allclose(seen[0][0].numpy(), np.stack(states[:2]))
    assert np.allclose(seen[1][0].numpy(), states[2])  # padded
    start = torch.as_tensor(starts.frames[1]).permute(2, 0, 1).float() / 255
    assert all(torch.equal(r[0], start) for r in refs)  # grounding reads the real start frame, every chunk
    runs = []
    for _ in range(2):  # deterministic for a fixed seed
        env.reset(seed=4, options={"init_seed": 0})
        runs.append([env.step(np.array([0.2, 0.1, 0.0, 0.0], np.float32))[0]["images"]["agentview"] for _ in range(3)])
    assert all(np.array_equal(a, b) for a, b in zip(*runs))
    with pytest.raises(ValueError, match="start pool"):
        WorldModelEnv(wm, sp, StartPool.from_sim("tabletop/reach", range(1), 32), max_steps=3)

    first = train.videos[:4, :1].expand(-1, 2, -1, -1, -1)
    with pytest.raises(ValueError, match="start_states"):
        WorldModelVecEnv(wm, first, train.instructions[:4], num_envs=2)
    venv = WorldModelVecEnv(wm, first, train.instructions[:4], num_envs=2, state_model=sp,
                            start_states=train.state[:4, 0])
    venv.reset(seed=0, options={"starts": [1, 3]})
    seen.clear()
    a = np.full((2, 2, 4), 0.3, np.float32)
    venv.step(a)
    expect = predict_states(sp, train.state[[1, 3], 0], torch.as_tensor(a))
    assert torch.allclose(seen[0], expect) and torch.equal(refs[-1], first[[1, 3], 0])


def test_grounding_reads_object_colours_through_the_camera(reach):
    """The camera projection lands on the balls: the colour read at each ball of the first real frame is the
    colour the instruction names for the target slot in success episodes (the one the grip point ends at)."""
    from sims.tabletop.scene import COLORS

    train, _ = reach
    head = VideoWorldModel(WorldModelConfig(**TINY_WM, **GROUND)).success_head
    col = (head.object_colours(train.videos[:, 0] * 2 - 1, train.state[:, 0]) + 1) / 2  # [N, 3, 3] in [0, 1]
    proto = torch.tensor(list(COLORS.values()))
    named = [next(i for i, c in enumerate(COLORS) if c in s.split()) for s in train.instructions]
    ok = 0
    for e in range(len(train)):
        if not bool(train.episode_success[e]):
            continue
        t = int((train.success[e] > 0.5).nonzero()[0])
        s = train.state[e, t]
        target = int((s[9:18].reshape(3, 3) - s[:3]).norm(dim=-1).argmin())
        ok += int(((col[e, target] - proto) ** 2).sum(-1).argmin()) == named[e]
    assert ok >= 0.9 * int(train.episode_success.sum()), ok
    x = torch.rand(2, 2, 3, 32, 32) * 2 - 1
    with pytest.raises(ValueError, match="ref"):
        head(x, torch.zeros(2, 2, 4), None, torch.randn(2, 2, 18))
    assert head(x, torch.zeros(2, 2, 4), None, torch.randn(2, 2, 18), x[:, 0]).shape == (2, 2)
    assert head.ground_logits(x[:, 0], torch.randn(2, 18), None).shape == (2, 3)

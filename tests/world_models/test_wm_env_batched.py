"""Batched stepping of the world-model env (``WorldModelEnv.step_batch``, used by ``vla_rl``'s rollouts through
``step_envs``): the same episodes as stepping each env alone, with one world-model call per chunk for all envs."""

import numpy as np
import pytest
import torch

from vla_rl.rollout import step_envs
from world_models.data import StatePredictor
from world_models.video_wm import VideoWorldModel, WorldModelConfig
from world_models.wm_env import StartPool, WorldModelEnv

TINY_WM = dict(image_size=32, context_frames=2, chunk=3, action_dim=4, sampling_steps=2, layers=1, ffn_dim=32)


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    wm = VideoWorldModel(WorldModelConfig(**TINY_WM, state_dim=9)).eval()
    with torch.no_grad():  # a success head that fires for some states and not others
        for p in wm.success_head.parameters():
            p.mul_(4.0)
    sp = StatePredictor(9, 4, hidden=16).eval()
    return wm, sp, StartPool.from_sim("tabletop/reach", range(3), 32)


def _episodes(envs, actions, batched: bool):
    """Step every env through ``actions[T, B, A]``; per env the list of (frame, reward, terminated, truncated, prob)."""
    for j, e in enumerate(envs):
        e.reset(seed=10 + j, options={"init_seed": j})
    out = [[] for _ in envs]
    for a in actions:
        res = step_envs(envs, list(a)) if batched else [e.step(x) for e, x in zip(envs, a)]
        for j, (o, r, term, trunc, info) in enumerate(res):
            out[j].append((o["images"]["agentview"], o["state"], r, term, trunc, info["progress"]))
    return out


def test_step_batch_matches_stepping_alone_with_one_model_call_per_chunk(models):
    wm, sp, starts = models
    calls = []
    predict = wm.predict

    def counting(*a, **kw):
        calls.append(a[0].shape[0])
        return predict(*a, **kw)

    wm.predict = counting
    try:
        # max_steps 7 with chunk 3: chunks close at steps 3, 6 and (short, padded) 7
        envs = [WorldModelEnv(wm, sp, starts, max_steps=7, threshold=0.95, seed=s) for s in range(4)]
        actions = np.random.default_rng(0).uniform(-1, 1, (7, 4, 4)).astype(np.float32)
        alone = _episodes(envs, actions, batched=False)
        assert calls == [1] * 12
        calls.clear()
        batched = _episodes(envs, actions, batched=True)
        assert calls == [4, 4, 4]  # one call per chunk for all 4 envs
    finally:
        wm.predict = predict
    rewards = [[s[2] for s in ep] for ep in alone]
    assert 0 < sum(map(any, rewards)) < len(envs), rewards  # some envs succeed, some do not
    for ep_a, ep_b in zip(alone, batched):
        for (fa, sa, ra, ta, tra, pa), (fb, sb, rb, tb, trb, pb) in zip(ep_a, ep_b):
            assert np.abs(fa.astype(int) - fb.astype(int)).max() <= 1  # uint8 frames: float rounding of the batch
            np.testing.assert_allclose(sa, sb, atol=1e-6)
            assert (ra, ta, tra) == (rb, tb, trb)
            assert pa == pytest.approx(pb, abs=1e-5)
    assert [ep[-1][4] for ep in batched] == [r[-1] == 0 for r in rewards]  # step 7 truncates unless it succeeds


def test_step_batch_bad_action_fails_only_its_env(models):
    wm, sp, starts = models
    envs = [WorldModelEnv(wm, sp, starts, max_steps=5, seed=s) for s in range(3)]
    for j, e in enumerate(envs):
        e.reset(seed=j, options={"init_seed": j})
    with pytest.raises(ValueError, match="finite"):
        WorldModelEnv.step_batch(envs, [np.zeros(4), np.array([np.nan, 0, 0, 0]), np.zeros(4)])
    assert all(e.t == 0 for e in envs)  # raised before any env changed
    res = step_envs(envs, [np.zeros(4), np.array([np.nan, 0, 0, 0]), np.zeros(4)])
    assert isinstance(res[1], ValueError) and not isinstance(res[0], Exception) and not isinstance(res[2], Exception)
    assert [e.t for e in envs] == [1, 0, 1]


def test_step_batch_rejects_noise_of_the_wrong_shape(models):
    wm, _, _ = models
    ctx, act = torch.rand(2, 2, 3, 32, 32), torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match=r"noise must be \[2, 3, 3, 32, 32\]"):
        wm.predict(ctx, act, noise=torch.zeros(1, 3, 3, 32, 32), state=torch.zeros(2, 3, 9))

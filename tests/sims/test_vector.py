"""VectorEnv: batching, GRPO groups, per-slot tasks, and surviving crashes, hangs, exceptions and NaNs."""

import numpy as np
import pytest

import sims


@pytest.fixture(scope="module")
def venv():
    v = sims.VectorEnv("tabletop/reach", num_envs=4, env_kwargs={"cameras": ()}, step_timeout_s=5.0)
    yield v
    v.close()


def test_group_reset_same_initial_state_per_group(venv):
    opts = sims.group_options([("tabletop/reach", 5), ("tabletop/push", 9)], group_size=2)
    obs, info = venv.reset(options=opts)
    assert obs["state"].shape == (4, 9) and obs["state"].dtype == np.float32
    assert obs["images"] == {}
    assert list(info["group_id"]) == [0, 0, 1, 1] and list(info["init_seed"]) == [5, 5, 9, 9]
    assert info["task"] == ("tabletop/reach", "tabletop/reach", "tabletop/push", "tabletop/push")
    np.testing.assert_array_equal(obs["state"][0], obs["state"][1])
    np.testing.assert_array_equal(obs["state"][2], obs["state"][3])
    assert obs["instruction"][0] == obs["instruction"][1] and obs["instruction"][2] == obs["instruction"][3]
    assert "disc" in obs["instruction"][2] or "circle" in obs["instruction"][2] or "target" in obs["instruction"][2]


def test_expert_rollout_and_done_slots_stay_done(venv):
    obs, info = venv.reset(options={"task": "tabletop/reach", "init_seed": [0, 1, 2, 3]})
    experts = venv.call("expert_action")
    assert len(experts) == 4 and experts[0].shape == (4,)
    done = np.zeros(4, bool)
    for _ in range(40):
        acts = np.stack(venv.call("expert_action"))
        obs, r, term, trunc, info = venv.step(acts)
        assert not info["active"][done].any()  # finished slots are not stepped
        assert (r[done] == 0).all()
        done |= term | trunc
        if done.all():
            break
    assert info["success"].all() and done.all()
    assert all(ep.success and ep.steps > 0 for ep in venv.episodes)


def test_worker_crash_exception_and_nan_are_failed_episodes_not_failed_runs(venv):
    faults = [None, {"kind": "exit", "step": 2}, {"kind": "raise", "step": 1}, {"kind": "nan", "step": 2}]
    obs, info = venv.reset(options={"task": "tabletop/push", "init_seed": [3, 3, 3, 3], "fault": faults})
    restarts = venv.restarts
    zero = np.zeros((4, 4), np.float32)
    for _ in range(3):
        obs, r, term, trunc, info = venv.step(zero)
    assert list(info["failed"]) == [False, True, True, True]
    assert not info["success"].any() and list(term) == [False, True, True, True]
    assert "died" in info["error"][1] and "injected fault" in info["error"][2] and "diverged" in info["error"][3]
    assert venv.restarts == restarts + 3  # crashed, raising and diverged workers are all replaced
    assert np.isfinite(obs["state"]).all()
    # every slot works again after a reset, on the same task
    obs, info = venv.reset(options={"init_seed": [3, 3, 3, 3]})
    np.testing.assert_array_equal(obs["state"][0], obs["state"][1])
    obs, r, term, trunc, info = venv.step(zero)
    assert not info["failed"].any() and info["active"].all()
    assert info["task"] == ("tabletop/push",) * 4


def test_hung_worker_is_killed_and_replaced():
    v = sims.VectorEnv("tabletop/reach", num_envs=2, env_kwargs={"cameras": ()}, step_timeout_s=1.0)
    try:
        v.reset(options=[{"init_seed": 0}, {"init_seed": 0, "fault": {"kind": "hang", "step": 1}}])
        obs, r, term, trunc, info = v.step(np.zeros((2, 4), np.float32))
        assert list(info["failed"]) == [False, True] and "hung" in info["error"][1]
        assert v.restarts == 1
        v.reset(options={"init_seed": 1})
        assert not v.step(np.zeros((2, 4), np.float32))[4]["failed"].any()
    finally:
        v.close()


def test_reset_mask_and_errors(venv):
    obs, _ = venv.reset(options={"task": "tabletop/reach", "init_seed": 1})
    before = obs["state"].copy()
    obs, info = venv.reset(options={"init_seed": 2, "reset_mask": [True, False, False, False]})
    assert list(info["active"]) == [True, False, False, False]
    np.testing.assert_array_equal(obs["state"][1:], before[1:])
    assert not np.array_equal(obs["state"][0], before[0])
    with pytest.raises(ValueError, match="shape"):
        venv.step(np.zeros((3, 4)))
    with pytest.raises(RuntimeError, match="init_seed"):
        venv.reset(options={"init_seed": -5})
    with pytest.raises(ValueError, match="colour"):
        venv.reset(options={"colour": 1})
    venv.reset(options={"init_seed": 0})


def test_images_batched(can_render):
    if not can_render:
        pytest.skip("no headless OpenGL backend")
    v = sims.VectorEnv(["tabletop/stack", "tabletop/pick_place"],
                       env_kwargs={"image_size": 32, "cameras": ("agentview", "wrist")})
    try:
        obs, info = v.reset(seed=0)
        assert obs["images"]["agentview"].shape == (2, 32, 32, 3) and obs["images"]["wrist"].dtype == np.uint8
        obs, *_ = v.step(np.zeros((2, 4), np.float32))
        assert obs["images"]["wrist"].shape == (2, 32, 32, 3)
        assert v.observation_space.contains(obs) and v.action_space.shape == (2, 4)
    finally:
        v.close()

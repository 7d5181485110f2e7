"""LIBERO through sims.make: installed by the project (no skip), one task of every suite, fixed init states,
headless rendering, success from the task's goal predicates, and a crashed LIBERO worker costs one episode.

Small images (32 px) and few steps: LIBERO with a camera runs ~4-10 steps/s on 2 shared cores."""

import numpy as np
import pytest

import sims
from sims import libero_adapter

from ..libero_scene import place_bowl_over_plate

# (suite, task index, the task's language); libero_10 is LIBERO-Long
TASKS = [
    ("libero_spatial", 0, "pick up the black bowl between the plate and the ramekin and place it on the plate"),
    ("libero_object", 0, "pick up the alphabet soup and place it in the basket"),
    ("libero_goal", 0, "open the middle drawer of the cabinet"),
    ("libero_10", 0, "put both the alphabet soup and the tomato sauce in the basket"),
    ("libero_90", 0, "close the top drawer of the cabinet"),
]
STILL = np.array([0, 0, 0, 0, 0, 0, -1], np.float32)


def test_installed_with_assets_and_every_suite_listed():
    assert libero_adapter.available()
    assert libero_adapter.check_assets() == []  # every file of the five asset wheels, linked where LIBERO loads them
    names = sims.list_tasks("libero")
    for suite, n in (("libero_spatial", 10), ("libero_object", 10), ("libero_goal", 10), ("libero_10", 10),
                     ("libero_90", 90)):
        assert sum(t.startswith(f"libero/{suite}/") for t in names) == n
    with pytest.raises(ValueError, match="libero/<suite>/<index>"):
        sims.make("libero/libero_nope/0")
    with pytest.raises(TypeError, match="unknown LiberoConfig option"):
        sims.make("libero/libero_spatial/0", image_sise=32)


@pytest.mark.parametrize("suite,index,language", TASKS, ids=[t[0] for t in TASKS])
def test_suite_task_reset_step_render(suite, index, language):
    env = sims.make(f"libero/{suite}/{index}", image_size=32, cameras=("agentview", "wrist"), settle_steps=2)
    try:
        assert env.n_init_states == 50 and env.max_steps == libero_adapter.MAX_STEPS[suite]
        obs, info = env.reset(options={"init_seed": 53})  # 53 % 50: the benchmark's fixed init state 3
        assert obs["instruction"] == language and info["init_seed"] == 53 and not info["success"]
        assert obs["state"].shape == (9,) and obs["state"].dtype == np.float32
        for cam in ("agentview", "wrist"):
            im = obs["images"][cam]
            assert im.shape == (32, 32, 3) and im.dtype == np.uint8 and im.std() > 5  # a rendered scene, not blank
        for _ in range(2):
            obs, reward, terminated, truncated, info = env.step(STILL)
        assert set(info) >= {"success", "progress", "failed", "task", "init_seed", "step"}
        assert info["step"] == 2 and not info["success"] and not info["failed"] and reward == 0.0 and not terminated
        # the same init_seed is the same initial state (robot, objects and the fixtures LIBERO samples), another is not
        a, _ = env.reset(options={"init_seed": 3})
        np.testing.assert_array_equal(a["images"]["agentview"],
                                      env.reset(options={"init_seed": 3})[0]["images"]["agentview"])
        b, _ = env.reset(options={"init_seed": 4})
        assert np.abs(a["images"]["agentview"].astype(int) - b["images"]["agentview"]).max() > 0
    finally:
        env.close()


def test_success_comes_from_the_task_goal():
    """Put the bowl onto the plate by hand: the task's BDDL goal holds, the episode ends with success and reward 1."""
    env = sims.make("libero/libero_spatial/0", image_size=32, cameras=("agentview",), settle_steps=0)
    try:
        env.reset(options={"init_seed": 0})
        _, r, term, _, info = env.step(STILL)
        assert not info["success"] and r == 0.0 and not term
        place_bowl_over_plate(env)
        for _ in range(10):  # it drops the last few cm onto the plate
            _, r, term, trunc, info = env.step(STILL)
            if term:
                break
        assert info["success"] and r == 1.0 and term and not trunc and info["progress"] == 1.0 and not info["failed"]
    finally:
        env.close()


def test_scripted_expert_solves_libero_spatial():
    """The scripted expert (sims' demos for SFT) puts the bowl on the plate from a fixed init state; other suites have
    none."""
    env = sims.make("libero/libero_spatial/0", cameras=())
    try:
        env.reset(options={"init_seed": 0})
        for _ in range(env.max_steps):
            a = env.expert_action()
            assert a.shape == (7,) and a.dtype == np.float32 and np.abs(a).max() <= 1.0
            _, r, term, trunc, info = env.step(a)
            if term or trunc:
                break
        assert info["success"] and r == 1.0 and info["step"] < env.max_steps
    finally:
        env.close()
    env = sims.make("libero/libero_goal/0", cameras=(), settle_steps=0)
    try:
        env.reset(options={"init_seed": 0})
        with pytest.raises(NotImplementedError, match="no scripted expert for libero/libero_goal/0"):
            env.expert_action()
    finally:
        env.close()


def test_worker_crash_in_libero_costs_one_episode():
    v = sims.VectorEnv("libero/libero_spatial/0", num_envs=2, step_timeout_s=60.0,
                       env_kwargs={"image_size": 32, "cameras": ("agentview",), "settle_steps": 0})
    try:
        obs, info = v.reset(options={"init_seed": [5, 5], "fault": [None, {"kind": "exit", "step": 2}]})
        np.testing.assert_array_equal(obs["images"]["agentview"][0], obs["images"]["agentview"][1])
        assert obs["instruction"][0].startswith("pick up the black bowl")
        restarts = v.restarts
        for _ in range(3):
            obs, r, term, trunc, info = v.step(np.stack([STILL, STILL]))
        assert list(info["failed"]) == [False, True] and list(term) == [False, True] and not info["success"].any()
        assert "died" in info["error"][1] and v.restarts == restarts + 1
        assert list(info["step"]) == [3, 2]  # the crashed slot stopped at its crash, the other ran on
        obs, info = v.reset(options={"init_seed": [5, 5]})  # the replaced worker runs LIBERO again
        np.testing.assert_array_equal(obs["state"][0], obs["state"][1])
        obs, r, term, trunc, info = v.step(np.stack([STILL, STILL]))
        assert not info["failed"].any() and list(info["step"]) == [1, 1]
    finally:
        v.close()

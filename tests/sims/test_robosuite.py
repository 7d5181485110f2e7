"""robosuite adapter: Lift reset + a few steps (no camera: the camera path costs ~4x), success from the env."""

import numpy as np
import pytest

from sims import robosuite_adapter

pytestmark = pytest.mark.skipif(not robosuite_adapter.available(), reason="robosuite is not importable")


def test_lift_reset_steps_and_determinism():
    import sims

    env = sims.make("robosuite/Lift", cameras=(), max_steps=4)
    try:
        obs, info = env.reset(options={"init_seed": 3})
        assert obs["state"].shape == (9,) and obs["state"].dtype == np.float32 and obs["images"] == {}
        assert "red" in obs["instruction"] and not info["success"]
        cube = env._env.sim.data.body_xpos[env._env.cube_body_id].copy()
        obs2, _ = env.reset(options={"init_seed": 3})
        np.testing.assert_allclose(env._env.sim.data.body_xpos[env._env.cube_body_id], cube)
        env.reset(options={"init_seed": 4})
        assert not np.allclose(env._env.sim.data.body_xpos[env._env.cube_body_id], cube)
        assert env.action_space.shape == (7,)
        for t in range(4):
            obs, r, term, trunc, info = env.step(np.zeros(7))
        assert trunc and not info["success"] and not info["failed"] and r == 0.0
        assert info["success"] == bool(env._env._check_success())
        with pytest.raises(ValueError, match="shape"):
            env.step(np.zeros(4))
        # a diverging simulation (NaN velocities: MuJoCo warns and resets its data) ends the episode as failed
        env.reset(options={"init_seed": 3})
        env._env.sim.data.qvel[:] = np.nan
        obs, r, term, trunc, info = env.step(np.zeros(7))
        assert info["failed"] and info["diverged"] and term and not info["success"] and r == 0.0
    finally:
        env.close()


def test_lift_images_when_rendering_works(can_render):
    if not can_render:
        pytest.skip("no headless OpenGL backend")
    import sims

    env = sims.make("robosuite/Lift", image_size=32, cameras=("agentview", "wrist"), max_steps=2)
    try:
        obs, _ = env.reset(options={"init_seed": 0})
        assert obs["images"]["agentview"].shape == (32, 32, 3) and obs["images"]["wrist"].dtype == np.uint8
        assert obs["images"]["agentview"].std() > 5
    finally:
        env.close()


def test_lift_images_after_another_gl_context(can_render):
    """robosuite renders into whichever GL context is current: after a tabletop env rendered and closed (its context
    freed), a reused Lift env must still render its own scene -- the same frames for an init seed as before (it drew
    garbage, different in every process, in bench_progress's second seed)."""
    if not can_render:
        pytest.skip("no headless OpenGL backend")
    import sims

    env = sims.make("robosuite/Lift", image_size=32, cameras=("agentview",), max_steps=4)
    try:
        ref = [env.reset(seed=3, options={"init_seed": 3})[0]["images"]["agentview"]]
        ref += [env.step(np.full(7, 0.3))[0]["images"]["agentview"] for _ in range(2)]
        other = sims.make("tabletop/push", image_size=32, cameras=("agentview",))
        other.reset(seed=0, options={"init_seed": 0})
        other.close()
        got = [env.reset(seed=3, options={"init_seed": 3})[0]["images"]["agentview"]]
        got += [env.step(np.full(7, 0.3))[0]["images"]["agentview"] for _ in range(2)]
        for t, (a, b) in enumerate(zip(ref, got)):
            np.testing.assert_array_equal(b, a, err_msg=f"frame {t} differs after another GL context")
    finally:
        env.close()


@pytest.mark.parametrize("task", ["Stack", "PickPlaceCan", "Door", "NutAssembly"])
def test_other_tasks_build_reset_and_step(task):
    import sims

    env = sims.make(f"robosuite/{task}", cameras=(), max_steps=2)
    try:
        obs, info = env.reset(options={"init_seed": 0})
        assert obs["state"].shape == (9,) and obs["instruction"]
        obs, r, term, trunc, info = env.step(np.zeros(env.action_space.shape))
        assert info["success"] == bool(env._env._check_success()) and not info["failed"]
    finally:
        env.close()

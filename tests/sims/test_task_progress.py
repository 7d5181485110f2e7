"""sims.task_progress on the real simulators (robosuite, LIBERO; no cameras): the measure rises along a scripted-expert
rollout to 1 at success, stays low for an arm that does nothing, and refuses tasks it does not define."""

import numpy as np
import pytest

import sims
from sims.task_progress import TaskProgress

STILL = np.array([0, 0, 0, 0, 0, 0, -1], np.float32)


def expert_rollout(env: TaskProgress, init_seed: int, steps: int) -> tuple[list[float], list[dict], bool]:
    rng = np.random.default_rng(0)
    _, info = env.reset(options={"init_seed": init_seed})
    progress, terms = [info["progress"]], [env.terms()]
    for _ in range(steps):
        _, _, term, trunc, info = env.step(env.expert_action(rng=rng, noise=0.0))
        progress.append(info["progress"])
        terms.append(info.get("task_progress_terms", {}))
        if term or trunc:
            break
    return progress, terms, bool(info["success"])


def test_lift_progress_rises_along_the_expert_and_not_when_still():
    env = TaskProgress(sims.make("robosuite/Lift", cameras=(), max_steps=80))
    try:
        p, terms, ok = expert_rollout(env, 0, 80)
        assert ok and p[-1] == 1.0
        assert all(0.0 <= x <= 1.0 for x in p) and p[0] < 0.1
        pre = np.array(p[:-1])  # before success: reach, then grasp, then height
        assert pre[-1] > 0.5 and np.corrcoef(np.arange(len(pre)), pre)[0, 1] > 0.8
        grasp_at = next(i for i, t in enumerate(terms) if t.get("grasp") == 1.0)
        assert max(t.get("lift", 0.0) for t in terms[:grasp_at]) == 0.0  # the cube rises only once held
        assert terms[-2]["lift"] > 0.2  # the cube has risen (the lift moves up to 5 cm a step)
        _, info = env.reset(options={"init_seed": 1})
        for _ in range(10):
            _, _, _, _, info = env.step(STILL)
        assert info["progress"] < 0.1 and not info["success"]
    finally:
        env.close()


def test_libero_bowl_progress_rises_along_the_expert():
    env = TaskProgress(sims.make("libero/libero_spatial/0", cameras=(), max_steps=220))
    try:
        p, terms, ok = expert_rollout(env, 0, 220)
        assert ok and p[-1] == 1.0 and all(0.0 <= x <= 1.0 for x in p) and p[0] < 0.05
        carried = [t["carry"] for t in terms[1:-1]]
        assert carried[0] < 0.05 < 0.9 < max(carried)  # the bowl ends over the plate
        assert max(p[:-1]) > 0.6 and np.corrcoef(np.arange(len(p) - 1), p[:-1])[0, 1] > 0.8
    finally:
        env.close()


def test_unmeasured_task_is_refused():
    env = sims.make("tabletop/push", cameras=())
    with pytest.raises(ValueError, match="no progress measure for"):
        TaskProgress(env)
    env.close()

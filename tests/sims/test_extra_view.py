"""tabletop's ``extra_view``: a second render of one camera at its own size (SRPO's progress encoder's view) that
leaves the policy's cameras exactly as they were."""

import numpy as np
import pytest

import sims


def test_extra_view_is_the_native_render_and_leaves_the_cameras_alone():
    plain = sims.make("tabletop/push", image_size=32, cameras=("agentview", "wrist"))
    big = sims.make("tabletop/push", image_size=64, cameras=("agentview",))
    both = sims.make("tabletop/push", image_size=32, cameras=("agentview", "wrist"),
                     extra_view=["srpo", "agentview", 64])  # a YAML list works too
    obs = [e.reset(seed=5, options={"init_seed": 5})[0] for e in (plain, big, both)]
    act = np.array([0.4, 0.3, -0.2, 1.0], np.float32)
    for _ in range(4):
        obs = [e.step(act)[0] for e in (plain, big, both)]
    p, b, x = (o["images"] for o in obs)
    assert sorted(x) == ["agentview", "srpo", "wrist"]
    assert x["srpo"].shape == (64, 64, 3) and x["agentview"].shape == (32, 32, 3)
    np.testing.assert_array_equal(x["srpo"], b["agentview"])  # the same pixels as an env rendering at 64 px
    np.testing.assert_array_equal(x["agentview"], p["agentview"])  # the policy's view is unchanged
    np.testing.assert_array_equal(x["wrist"], p["wrist"])
    assert both.observation_space["images"]["srpo"].shape == (64, 64, 3)
    large = sims.make("tabletop/reach_one", image_size=32, cameras=(), extra_view=("srpo", "agentview", 96))
    o, _ = large.reset(seed=1)
    assert list(o["images"]) == ["srpo"] and o["images"]["srpo"].shape == (96, 96, 3)  # beyond the 64-px buffer
    for e in (plain, big, both, large):
        e.close()


@pytest.mark.parametrize("bad", [("agentview", "agentview", 64), ("srpo", "top", 64), ("srpo", "agentview", 8),
                                 ("srpo", "agentview"), ("srpo", "agentview", 64.0), ("", "agentview", 64)])
def test_bad_extra_view_is_one_line(bad):
    with pytest.raises(ValueError, match=r"^extra_view must be \(name, camera, size\)") as e:
        sims.make("tabletop/push", extra_view=bad)
    assert "\n" not in str(e.value) and str(e.value).endswith(f"got {bad!r}")

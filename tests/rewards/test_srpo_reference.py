"""``srpo.reference: predicted``: an all-failure group's SRPO reference is predicted from its initial frame by kernel
ridge regression fitted on the policy's own successful groups (``rewards.srpo_reference``). The regression's
closed-form leave-one-out residuals equal refits without each row; a group with a success keeps the ``group`` rule;
below the gate a group without success keeps 0; the memory is capped, checkpointed and restored exactly."""

import numpy as np
import pytest
import torch

from rewards import RewardBatch
from rewards.srpo import RandomConvEncoder, SRPOConfig, SRPOReward, srpo_progress
from rewards.srpo_reference import SuccessMemory, fit_kernel_ridge, rbf_kernel
from rewards.success import episode_metadata


def test_leave_one_out_residuals_equal_refits_without_each_row():
    rng = np.random.default_rng(0)
    x, z = rng.normal(size=(12, 5)), rng.normal(size=(12, 3))
    model = fit_kernel_ridge(x, z, lam=0.3, gamma=0.7)
    loo = []
    for i in range(12):  # the refit standardizes on the same rows' statistics as the full fit (the hat matrix's
        keep = np.arange(12) != i  # premise: only the row's own target is left out of the fit)
        xs = model.x
        k = rbf_kernel(xs[keep], xs[keep], 0.7)
        zc = z[keep] - z.mean(0)
        # kernel ridge without an intercept on the full fit's centring: predict row i from the others
        alpha = np.linalg.solve(k + 0.3 * np.eye(11), zc)
        loo.append(z[i] - (rbf_kernel(xs[i:i + 1], xs[keep], 0.7) @ alpha + z.mean(0))[0])
    loo = np.stack(loo)
    # the closed form: 1 - sum ||e||^2 / sum ||z - mean||^2 with e_i = (z_i - z^_i) / (1 - H_ii)
    want = 1.0 - (loo ** 2).sum() / ((z - z.mean(0)) ** 2).sum()
    assert model.r2_loo == pytest.approx(want, rel=1e-9)
    # predictions at the training rows are the fit's: z^ = H (z - mean) + mean
    k = rbf_kernel(model.x, model.x, 0.7)
    np.testing.assert_allclose(model.predict(x), k @ np.linalg.solve(k + 0.3 * np.eye(12), z - z.mean(0)) + z.mean(0))


def test_a_smooth_map_is_learned_and_passes_the_gate_noise_does_not():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size=(80, 2))
    z = np.stack([np.sin(2 * x[:, 0]), x[:, 1] ** 2], 1)
    mem = SuccessMemory(size=100, lam=0.1, gamma=0.3, min_layouts=32, min_r2=0.5)
    for xi, zi in zip(x[:31], z[:31]):
        mem.add("t", xi, zi)
    assert mem.predictor("t")[0] is None and mem.predictor("t")[2] == 31  # below min_layouts
    for xi, zi in zip(x[31:], z[31:]):
        mem.add("t", xi, zi)
    model, r2, n = mem.predictor("t")
    assert n == 80 and r2 > 0.9 and model is not None
    xt = rng.uniform(-1, 1, size=(20, 2))
    zt = np.stack([np.sin(2 * xt[:, 0]), xt[:, 1] ** 2], 1)
    assert np.abs(model.predict(xt) - zt).mean() < 0.1 * np.abs(zt - zt.mean(0)).mean() + 0.05
    noise = SuccessMemory(size=100, lam=0.1, gamma=0.3, min_layouts=32, min_r2=0.5)
    for xi in x:
        noise.add("t", xi, rng.normal(size=2))
    model, r2, _ = noise.predictor("t")
    assert model is None and r2 < 0.5  # unrelated targets: the gate refuses the predictions
    model, r2, n = mem.predictor("other")  # a task with no success yet
    assert model is None and np.isnan(r2) and n == 0


def test_the_memory_keeps_the_newest_pairs_and_round_trips():
    mem = SuccessMemory(size=3, lam=0.1, gamma=0.3, min_layouts=2, min_r2=0.0)
    for i in range(5):
        mem.add("robosuite/Lift", np.full(4, i), np.full(2, 10 * i))
    assert [f[0] for f in mem.features["robosuite/Lift"]] == [2, 3, 4]
    back = SuccessMemory(size=3, lam=0.1, gamma=0.3, min_layouts=2, min_r2=0.0)
    back.load_state_dict(mem.state_dict())
    np.testing.assert_array_equal(np.stack(back.latents["robosuite/Lift"]), np.stack(mem.latents["robosuite/Lift"]))


def test_the_rule_grades_all_failure_groups_against_their_prediction_only():
    # group 0 has a success (the group rule), group 1 has a prediction, group 2 has none (keeps 0)
    z = torch.tensor([[0.0, 0.0], [0.1, 0.0], [0.5, 0.0], [1.0, 1.0], [1.3, 1.0], [2.0, 2.0], [9.0, 9.0]])
    succ = torch.tensor([True, False, False, False, False, False, False])
    groups = [0, 0, 0, 1, 1, 2, 2]
    cfg = SRPOConfig(reference="predicted")
    res = srpo_progress(z, ["t"] * 7, succ, cfg, groups, {1: np.array([1.0, 1.0])})
    np.testing.assert_allclose(res.distance.numpy()[:5], [0.0, 0.1, 0.5, 0.0, 0.3], atol=1e-6)
    assert torch.isnan(res.distance[5:]).all() and (res.total[5:] == 0).all()
    assert res.total[3] > res.total[1] > res.total[4] > res.total[2] > 0  # min-max over the graded failures
    assert res.predicted_groups == 1 and res.num_clusters == {"t": 1}
    # without a prediction the all-failure groups keep 0 (not the task's centres, as the group rule's fallback)
    res = srpo_progress(z, ["t"] * 7, succ, cfg, groups)
    assert (res.total[3:] == 0).all() and res.predicted_groups == 0
    with pytest.raises(ValueError, match="group"):
        srpo_progress(z, ["t"] * 7, succ, cfg)


def frames_with_a_dot(pos: float, t: int = 3) -> np.ndarray:
    """uint8 ``[t, 32, 32, 3]``: a white dot at column ``pos`` (in [0, 1]) in the first frame (a layout), then grey."""
    v = np.full((t, 32, 32, 3), 60, np.uint8)
    c = int(round(2 + pos * 27))
    v[0, 14:18, c:c + 3] = 255
    return v


def test_the_reward_learns_where_each_layout_s_success_ends(tmp_path):
    """Layouts are a dot's position; a success ends at that position (state 0), failures elsewhere. After the memory
    holds enough successful layouts, an all-failure group of a new layout is graded against its own predicted end,
    so the failure that ended nearer the (unseen) layout's goal scores higher."""
    cfg = SRPOConfig(encoder="proprio", reference="predicted", scene_encoder="random_conv", num_frames=2,
                     pooling="last", state_dims=[0], predictor_min_layouts=8, predictor_min_r2=0.5)
    reward = SRPOReward(cfg, scene_encoder=RandomConvEncoder())
    rng = np.random.default_rng(0)

    def batch(layouts, ends, success):
        meta = episode_metadata(["t"] * len(ends), torch.tensor(success), [g for g, _ in layouts])
        vids = []
        for m, (g, pos), end in zip(meta, layouts, ends):
            m["states"] = np.array([[0.5, 0.0], [end, 1.0]], np.float32)
            vids.append(frames_with_a_dot(pos))
        return RewardBatch(videos=vids, metadata=meta)

    for it in range(6):  # successful groups at random layouts: the memory fills (2 episodes per group)
        pos = rng.uniform(0, 1, size=4)
        lay = [(g, p) for g, p in enumerate(pos) for _ in range(2)]
        ends = [p + (0.0 if k == 0 else 0.4) for p in pos for k in range(2)]
        reward(batch(lay, ends, [k == 0 for _ in pos for k in range(2)]))
    r2, n = reward.last.predictor["t"]
    assert n == 24 and r2 > 0.5
    # a new layout at 0.3, all four episodes fail: the one that ended at 0.32 is graded highest
    lay = [(0, 0.3)] * 4 + [(1, 0.8)] * 2
    out = reward(batch(lay, [0.9, 0.32, 0.6, 0.0, 0.8, 0.1], [False, False, False, False, True, False]))
    assert reward.last.predicted_groups == 1
    g0 = out.total[:4]
    assert int(g0.argmax()) == 1 and int(g0.argmin()) == 0 and float(g0.max()) > 0
    st = reward.state_dict()
    back = SRPOReward(cfg, scene_encoder=RandomConvEncoder(seed=1))  # other weights, replaced by the saved ones
    back.load_state_dict(st)
    again = back.from_embeddings(reward.embed(None, [np.array([[0.5, 0.0], [e, 1.0]], np.float32)
                                                     for e in (0.9, 0.32, 0.6, 0.0, 0.8, 0.1)]),
                                 batch(lay, [0.9, 0.32, 0.6, 0.0, 0.8, 0.1], [0, 0, 0, 0, 1, 0]).metadata,
                                 reward.embed_scenes([frames_with_a_dot(p) for _, p in lay]))
    assert int(again.total[:4].argmax()) == 1


@pytest.mark.parametrize("kw, match", [
    ({"reference": "nearest"}, "'task', 'group' or 'predicted'"),
    ({"predictor_memory": 1}, "predictor_memory=1"), ({"predictor_min_layouts": 0}, "predictor_min_layouts=0"),
    ({"predictor_min_layouts": 64, "predictor_memory": 32}, "exceeds srpo.predictor_memory=32"),
    ({"predictor_ridge": 0.0}, "predictor_ridge=0.0"), ({"predictor_gamma": float("nan")}, "predictor_gamma=nan"),
    ({"predictor_min_r2": 1.5}, "predictor_min_r2=1.5"), ({"scene_encoder": "vjepa2"}, "scene_encoder='vjepa2'")])
def test_bad_predictor_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        SRPOConfig(**kw)


def test_the_rule_needs_a_scene_encoder():
    with pytest.raises(ValueError, match="needs a scene encoder"):
        SRPOReward(SRPOConfig(encoder="proprio", reference="predicted"))

import random

import pytest
import torch

from rewards import RewardBatch, available_rewards, build_reward
from rewards.shapes import Spec, classify_shape, parse_prompt, render, sample_prompts


def test_parse_and_sample():
    assert parse_prompt("a red circle left of a blue square") == Spec((("red", "circle"), ("blue", "square")),
                                                                      "left of")
    assert parse_prompt("An Orange triangle") == Spec((("orange", "triangle"),))
    for p in sample_prompts(200, random.Random(0)):
        parse_prompt(p)
    for bad in ["a pink circle", "a red hexagon", "red circle", "a red circle next to a blue square",
                "a red circle above a red square", ""]:
        with pytest.raises(ValueError, match="malformed shapes prompt"):
            parse_prompt(bad)


@pytest.mark.parametrize("size", [32, 64])
def test_verifier_scores_own_renders_high_and_wrong_images_low(size):
    prompts = sample_prompts(120, random.Random(size))
    imgs = render(prompts, size, seed=2)
    assert imgs.shape == (120, 3, size, size) and 0 <= float(imgs.min()) and float(imgs.max()) <= 1
    r = build_reward("shapes_verifier")
    out = r(RewardBatch(images=imgs, prompts=prompts))
    assert float(out.details["accuracy"].mean()) >= 0.99 and float(out.total.mean()) >= 0.995
    noisy = (imgs + 0.05 * torch.randn(imgs.shape, generator=torch.Generator().manual_seed(0))).clamp(0, 1)
    assert float(r(RewardBatch(images=noisy, prompts=prompts)).details["accuracy"].mean()) >= 0.95
    assert float(out.components["color"].mean()) == 1.0
    # the same images against other prompts, and noise, score low
    other = sample_prompts(120, random.Random(99))
    assert float(r(RewardBatch(images=imgs, prompts=other)).total.mean()) < 0.4
    assert float(r(RewardBatch(images=torch.rand(8, 3, 32, 32), prompts=prompts[:8])).total.max()) < 0.5


class _Midpoint(random.Random):
    """Every draw at the middle of its range: two objects land on the same spot, so no relation ever holds."""

    def uniform(self, a, b):
        return (a + b) / 2


@pytest.mark.parametrize("relation", ["left of", "right of", "above", "below"])
def test_layout_falls_back_to_a_constructive_one_when_rejection_sampling_fails(relation, monkeypatch):
    from rewards import shapes

    prompt = f"a red circle {relation} a blue square"
    spec = parse_prompt(prompt)
    img = shapes.render_spec(spec, 32, _Midpoint())  # 200 rejected tries, then the fallback (used to raise)
    r = build_reward("shapes_verifier")
    assert float(r(RewardBatch(images=img[None], prompts=[prompt])).details["accuracy"]) == 1.0
    # the fallback's random layouts: inside the canvas and the relation holds, per the verifier
    rng = random.Random(0)
    for _ in range(8):
        assert all(rad + 1 <= c <= 31 - rad for (cx, cy, rad) in shapes._constructive_positions(spec, 32, rng)
                   for c in (cx, cy))
    monkeypatch.setattr(shapes, "_positions", shapes._constructive_positions)
    imgs = torch.stack([shapes.render_spec(spec, 32, random.Random(i)) for i in range(8)])
    assert float(r(RewardBatch(images=imgs, prompts=[prompt] * 8)).details["accuracy"].mean()) == 1.0


def test_perturbed_renders_fail_the_right_component():
    r = build_reward("shapes_verifier")
    prompts = sample_prompts(200, random.Random(3), p_relation=1.0)
    imgs = render(prompts, 32, seed=4)
    for axis, rels in ((-1, ("left of", "right of")), (-2, ("above", "below"))):
        idx = [i for i, p in enumerate(prompts) if any(f" {x} " in p for x in rels)]
        out = r(RewardBatch(images=imgs[idx].flip(axis), prompts=[prompts[i] for i in idx]))
        assert float(out.components["relation"].max()) == 0.0 and float(out.components["color"].min()) == 1.0
    recolored = r(RewardBatch(images=imgs[:, [2, 0, 1]], prompts=prompts))  # RGB -> BRG: other colors
    assert float(recolored.components["color"].mean()) < 0.15 and float(recolored.total.mean()) < 0.1
    # shape confusion matrix on single objects: only the true shape scores
    for true in ("circle", "square", "triangle"):
        p = [f"a {c} {true}" for c in ("red", "green", "blue", "yellow", "purple", "orange")] * 4
        im = render(p, 32, seed=5)
        for asked in ("circle", "square", "triangle"):
            q = [x.replace(true, asked) for x in p]
            shape = r(RewardBatch(images=im, prompts=q)).components["shape"]
            assert float(shape.mean()) == (1.0 if asked == true else 0.0), (true, asked)


def test_relation_and_shape_detection_are_specific():
    spec_prompt = "a red square left of a blue circle"
    img = render([spec_prompt], 64, seed=0)
    r = build_reward("shapes_verifier")
    assert float(r(RewardBatch(images=img, prompts=[spec_prompt])).total) == 1.0
    flipped = r(RewardBatch(images=img, prompts=["a red square right of a blue circle"]))
    assert float(flipped.components["relation"]) == 0.0 and float(flipped.components["color"]) == 1.0
    wrong_shape = r(RewardBatch(images=img, prompts=["a red triangle left of a blue circle"]))
    assert float(wrong_shape.components["shape"]) == 0.5
    yy, xx = torch.meshgrid(torch.arange(40), torch.arange(40), indexing="ij")
    assert classify_shape(((yy - 20) ** 2 + (xx - 20) ** 2 <= 144).numpy()) == "circle"
    assert classify_shape(((yy - 20).abs().maximum((xx - 20).abs()) <= 10).numpy()) == "square"


def test_jpeg_size_strictly_increases_with_noise():
    base = render(["a red circle left of a blue square"] * 2, 64, seed=0)
    g = torch.Generator().manual_seed(0)
    r = build_reward("jpeg_compressibility")
    totals = [float(r(RewardBatch(images=(base + s * torch.randn(base.shape, generator=g)).clamp(0, 1),
                                  prompts=[""] * 2)).total.mean()) for s in (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)]
    assert all(a > b for a, b in zip(totals, totals[1:])), totals  # more noise, bigger file, lower reward
    with pytest.raises(ValueError, match="JPEG quality must be in"):
        build_reward("jpeg_compressibility", quality=0)


def test_jpeg_rewards_monotone_in_noise():
    base = render(["a red circle"] * 4, 32, seed=0)
    noisy = (base + 0.3 * torch.randn(base.shape, generator=torch.Generator().manual_seed(0))).clamp(0, 1)
    comp, incomp = build_reward("jpeg_compressibility"), build_reward("jpeg_incompressibility")
    assert bool((comp(RewardBatch(images=base, prompts=[""] * 4)).total
                 > comp(RewardBatch(images=noisy, prompts=[""] * 4)).total).all())
    assert bool((incomp(RewardBatch(images=noisy, prompts=[""] * 4)).total > 0).all())


def test_registry_errors_and_multi():
    with pytest.raises(ValueError, match="unknown reward 'pickscorez'; available: .*shapes_verifier"):
        build_reward("pickscorez")
    assert {"shapes_verifier", "jpeg_compressibility", "multi"} <= set(available_rewards())
    m = build_reward("multi", rewards={"shapes_verifier": 1.0, "jpeg_compressibility": 0.5})
    prompts = ["a blue square", "a green circle"]
    imgs = render(prompts, 32, seed=0)
    out = m(RewardBatch(images=imgs, prompts=prompts))
    sv, jp = out.components["shapes_verifier"], out.components["jpeg_compressibility"]
    torch.testing.assert_close(out.total, sv + 0.5 * jp)
    assert "shapes_verifier/accuracy" in out.details and "jpeg_compressibility/jpeg_kb" in out.details
    with pytest.raises(ValueError, match="not in"):
        build_reward("multi", rewards={"shapes_verifier": 1.0}, kwargs={"jpeg_compressibility": {}})
    f = build_reward("rewards.shapes:ShapesVerifier", tol=0.3)
    assert f.tol == 0.3


def test_accuracy_weight_mixes_in_the_all_correct_score():
    prompts = sample_prompts(40, random.Random(7), p_relation=1.0)
    imgs = render(prompts, 32, seed=1)
    imgs[::2] = imgs[::2].flip(-1)  # half of them with the relation (left/right) or nothing wrong
    base = build_reward("shapes_verifier")(RewardBatch(images=imgs, prompts=prompts))
    w = build_reward("shapes_verifier", accuracy_weight=0.5)(RewardBatch(images=imgs, prompts=prompts))
    assert torch.allclose(w.total, 0.5 * base.total + 0.5 * base.details["accuracy"])
    assert torch.equal(w.details["verifier"], base.total) and "verifier" not in base.details
    assert torch.equal(w.components["relation"], base.components["relation"])
    with pytest.raises(ValueError, match="accuracy_weight"):
        build_reward("shapes_verifier", accuracy_weight=1.5)


def test_graded_shape_credit_keeps_exact_accuracy():
    from rewards.shapes import FILL_CLASSES, shape_credit, shape_of_fill

    for shape, (lo, hi) in FILL_CLASSES.items():  # inside its interval: full credit, exactly what the classifier says
        mid = 0.95 if hi == float("inf") else 0.4 if lo == float("-inf") else (lo + hi) / 2
        assert shape_of_fill(mid) == shape and shape_credit(mid, shape) == 1.0
    assert shape_credit(0.80, "square", width=0.2) == pytest.approx(1 - 0.09 / 0.2)  # a circle-ish blob asked square
    assert shape_credit(0.60, "square", width=0.2) == 0.0
    assert shape_credit(0.70, "triangle", width=0.2) == pytest.approx(0.85)
    # renders of other shapes: exact credit 0, graded credit in (0, 1), all-correct accuracy identical
    prompts = [f"a red {s}" for s in ("circle", "square", "triangle")]
    imgs = render([f"a red {s}" for s in ("square", "circle", "circle")], 32, seed=0)
    exact = build_reward("shapes_verifier")(RewardBatch(images=imgs, prompts=prompts))
    graded = build_reward("shapes_verifier", shape_width=0.3)(RewardBatch(images=imgs, prompts=prompts))
    assert torch.equal(exact.components["shape"], torch.zeros(3))
    assert bool(((graded.components["shape"] > 0) & (graded.components["shape"] < 1)).all())
    assert torch.equal(graded.details["accuracy"],
                       exact.details["accuracy"]) and float(exact.details["accuracy"].sum()) == 0
    with pytest.raises(ValueError, match="shape_width"):
        build_reward("shapes_verifier", shape_width=-0.1)

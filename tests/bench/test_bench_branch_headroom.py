"""bench/bench_branch_headroom.py (issue 25's BranchGRPO row) runs end to end in its --small mode and reruns to the same
rewards; its task's reward is the demo verifier times the size credit; its target crossing and curve reading are
right."""

import contextlib
import io
import re

import pytest
import torch

from .benchutil import load_bench, markdown_table


def _deterministic(out: str) -> list[str]:
    """What a rerun must reproduce: the evaluation curves (rewards per iteration), NFE per iteration and to target."""
    curves = [ln.split(" s/iter) ")[1] for ln in out.splitlines() if " s/iter) " in ln]
    table = [(row[0], row[1], row[2], row[6]) for row in markdown_table(out, "| mode ")]
    return curves + [str(t) for t in table]


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory):
    """``--small`` run twice, each also writing ``--json-out`` (which only saves the results): the module and the two
    printed outputs and JSON files, read by the tests below (one --small run trains all four arms: the bench's cost)."""
    mod = load_bench("bench_branch_headroom")
    d = tmp_path_factory.mktemp("headroom")
    outs = []
    for i in range(2):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert mod.main(["--small", "--json-out", str(d / f"s{i}.json")]) == 0
        outs.append(buf.getvalue())
    return mod, outs, [d / "s0.json", d / "s1.json"]


def test_small_mode_prints_the_table_and_reruns_the_same(small_runs):
    mod, outs, _ = small_runs
    rows = markdown_table(outs[0], "| mode ")
    assert [r[0] for r in rows] == list(mod.ARMS)
    assert all(len(r) == 10 for r in rows)
    flat = rows[0]
    assert float(flat[1]) == 8 * 6  # flat: 8 samples x 6 steps of NFE per iteration
    assert all(float(r[1]) < float(flat[1]) for r in rows[1:])  # the trees share prefixes
    curves = [ln for ln in outs[0].splitlines() if " s/iter) " in ln]
    assert len(curves) == 4
    starts = {ln.split(" s/iter) ")[1].split()[0] for ln in curves}
    assert len(starts) == 1 and starts.pop().startswith("0:")  # every arm starts from the same evaluation
    assert _deterministic(outs[0]) == _deterministic(outs[1])


def test_crossing_and_reading():
    mod = load_bench("bench_branch_headroom")
    curve = [(0, 0.4, 0.0), (4, 0.5, 0.0), (8, 0.7, 0.5)]
    assert mod.crossing(curve, 0.6) == pytest.approx(6.0)
    assert mod.crossing(curve, 0.45) == pytest.approx(2.0)
    assert mod.crossing(curve, 0.8) is None
    assert mod.reward_at(curve, 6.0) == pytest.approx(0.6)
    assert mod.reward_at(curve, 6.0, col=2) == pytest.approx(0.25)
    assert mod.reward_at(curve, 100.0) == pytest.approx(0.7)  # clamped to the last evaluation
    arm = {"curve": [(0, 0.4, 0.0), (4, 0.9, 0.0), (8, 0.5, 0.0)], "s_per_iter": 2.0}
    assert mod.peak_within(arm, 6.0) == pytest.approx(0.775)  # T = 3 iterations: before the peak, read at T
    assert mod.peak_within(arm, 12.0) == pytest.approx(0.9)  # the peak at iteration 4 lies within T = 6 iterations


def test_report_from_json_prints_the_runsmarkdown_table(small_runs, tmp_path, capsys):
    mod, outs, jsons = small_runs
    ran = outs[1]  # the run that wrote jsons[1]
    assert mod.main(["--small", "--report-from", str(jsons[1])]) == 0
    again = capsys.readouterr().out
    assert again.strip() and again.strip() in ran  # the same table, curves and best-reward lines, nothing run
    assert "best" in again and "@ T - flat" in again
    assert mod.main(["--small", "--report-from", str(tmp_path / "missing.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert mod.main(["--small", "--arms", "flat GRPO,Branch-parent", "--report-from", str(jsons[1])]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # runs without that arm: one line, not a KeyError
    assert len(err) == 1 and "has no arm 'Branch-parent'" in err[0]


def test_task_reward_is_verifier_times_size():
    task = load_bench("big_shapes_task")
    from rewards import shapes
    from rewards.base import RewardBatch

    prompts = ["a red circle", "a blue square left of a green triangle"]
    images = shapes.render(prompts, size=32, seed=0)  # pretraining-size renders: right, but smaller than the target
    out = task.BigShapesReward()(RewardBatch(images=images, prompts=prompts))
    for i, p in enumerate(prompts):
        v = shapes.verify(images[i], shapes.parse_prompt(p))
        areas = task.object_areas(images[i], p)
        assert all(40 < a < task.TARGET_AREA for a in areas)
        size = sum(min(1.0, a / task.TARGET_AREA) for a in areas) / len(areas)
        assert float(out.components["size"][i]) == pytest.approx(size, rel=1e-5)
        assert float(out.total[i]) == pytest.approx(v["total"] * size, rel=1e-5)
    assert torch.equal(out.details["accuracy"], torch.zeros(2))  # right but not big enough
    small = task.BigShapesReward(target_area=20.0)(RewardBatch(images=images, prompts=prompts))
    assert torch.equal(small.components["size"], torch.ones(2))
    assert torch.equal(small.total, out.details["verifier"])
    with pytest.raises(ValueError, match="target_area"):
        task.BigShapesReward(target_area=0)


def _canvas(*squares):
    """A 32 px image on the shapes background with exact palette squares ``(color, row0, col0, side)`` (pixels
    ``[row0, row0 + side) x [col0, col0 + side)``): their centroids are known to the sub-pixel."""
    from rewards import shapes

    img = torch.tensor(shapes.BACKGROUND).view(3, 1, 1).repeat(1, 32, 32)
    for color, r0, c0, side in squares:
        img[:, r0:r0 + side, c0:c0 + side] = torch.tensor(shapes.PALETTE[color]).view(3, 1, 1)
    return img


def test_layout_task_reward_on_known_layouts():
    task = load_bench("layout_shapes_task")
    from rewards.base import RewardBatch

    cases = [  # (prompt, image, expected place, expected all-correct)
        ("a red square", _canvas(("red", 12, 12, 8)), 1.0, 1.0),  # centroid (15.5, 15.5): the centre
        ("a red square", _canvas(("red", 12, 16, 8)), 0.5, 0.0),  # 4 px right of it: 1 - 4 / 8
        ("a red square", _canvas(("red", 12, 20, 8)), 0.0, 0.0),  # 8 px: no credit
        ("a red square left of a blue square",  # the pair straddles the centre: midpoint x (8.5 + 22.5) / 2
         _canvas(("red", 13, 6, 6), ("blue", 13, 20, 6)), 1.0, 1.0),
        ("a red square above a blue square",  # midpoint 2 px below the centre, relation right
         _canvas(("red", 6, 13, 6), ("blue", 24, 13, 6)), 0.75, 1.0),
        ("a red square", _canvas(), 0.0, 0.0),  # nothing drawn
    ]
    out = task.LayoutShapesReward()(RewardBatch(images=torch.stack([c[1] for c in cases]),
                                                prompts=[c[0] for c in cases]))
    for i, (prompt, _, place, acc) in enumerate(cases):
        assert float(out.components["place"][i]) == pytest.approx(place, abs=1e-5), prompt
        assert float(out.total[i]) == pytest.approx(float(out.details["verifier"][i]) * place, abs=1e-5)
        assert float(out.details["accuracy"][i]) == acc, prompt
    assert float(out.details["verifier"][0]) == 1.0 and float(out.details["verifier"][5]) == 0.0
    assert float(out.details["dist"][1]) == pytest.approx(4.0, abs=1e-5)
    with pytest.raises(ValueError, match="radius_frac"):
        task.LayoutShapesReward(radius_frac=0)


def test_small_mode_on_the_layout_task_with_the_parent_credit_arm(capsys):
    """``--task layout`` and the named-option arm: same rollouts as BranchGRPO (same NFE, same start), other credit
    (other curve); the policy-movement lines are printed."""
    mod = load_bench("bench_branch_headroom")
    assert mod.main(["--small", "--task", "layout", "--arms", "flat GRPO,BranchGRPO,Branch-parent"]) == 0
    out = capsys.readouterr().out
    assert "BranchGRPO on the layout task" in out
    rows = markdown_table(out, "| mode ")
    assert [r[0] for r in rows] == ["flat GRPO", "BranchGRPO", "Branch-parent"] and float(rows[0][1]) == 8 * 6
    assert rows[1][1] == rows[2][1]  # the same tree, the same rollout NFE
    curves = {ln.split()[2]: ln.split(" s/iter) ")[1] for ln in out.splitlines() if " s/iter) " in ln}
    assert curves["BranchGRPO"].split()[0] == curves["Branch-parent"].split()[0]  # the same start
    assert curves["BranchGRPO"] != curves["Branch-parent"]  # the credit option is applied
    moves = re.findall(r"(\S+) per update; net/path (\S+);", out)
    assert len(moves) == 3 and all(float(m) > 0 and 0 < float(r) <= 1 for m, r in moves)


@pytest.mark.parametrize("argv", [["--splits", "3,1"], ["--arms", "BranchGRPO"], ["--lr", "-1"], ["--splits", "0,30"],
                                  ["--seed-list", "a,b"], ["--task", "sizes"], ["--arms", "flat GRPO,Nope"],
                                  ["--arms", "flat GRPO,BranchGRPO,BranchGRPO"]])
def test_bad_input_exits_2_with_one_line(argv, capsys):
    mod = load_bench("bench_branch_headroom")
    assert mod.main(["--small", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and ("bench_branch_headroom:" in err[-1] or "--splits" in err[-1])

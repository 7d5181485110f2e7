"""bench/bench_tree_pool.py (issue 35): the arms' settings (tree x pool's tree holds the pool's leaves), the table and
the claim line from per-seed results (--report-from), and bad input (exit 2, one line). The training run itself is the
combined mode's trainer, tested in tests/diffusion_rl/test_tree_pool.py."""

import json

import pytest

from .benchutil import load_bench, markdown_table


def _run(seed: int, flat_u: float, tp_u: float | None) -> dict:
    def arm(u, reward_b, units_per_iter, lowp):
        return {"iters": 10, "units_per_iter": units_per_iter, "s_per_iter": 1.0, "nfe_policy": 80.0, "nfe_lowp": lowp,
                "backward": 70.0, "u_target": u, "t_target": None if u is None else u * 0.01, "spent": 3000.0,
                "reward_B": reward_b, "acc_B": 0.1, "curve": [(0.0, 0.4, 0.0), (3000.0, reward_b, 0.1)],
                "s_per_unit": 0.01}
    return {"seed": seed, "before": 0.4, "before_acc": 0.0, "target": 0.6, "B": 3000.0, "wall_run": 100.0,
            "arms": {"flat GRPO": arm(flat_u, 0.65, 290.0, 0.0), "tree+prune": arm(flat_u * 0.8, 0.66, 100.0, 0.0),
                     "pool": arm(flat_u * 1.2, 0.64, 420.0, 320.0), "tree x pool": arm(tp_u, 0.7, 300.0, 200.0)}}


def test_arms_and_report_from_per_seed_results(tmp_path, capsys):
    mod = load_bench("bench_tree_pool")
    args = type("A", (), {"format": "nvfp4", "splits": [0, 2, 4], "pool": 32, "train": 8,
                          "txp_width": "best_worst", "txp_k": 2, "txp_window": 2})()
    bc, pc, g = mod.arm_settings("tree x pool", args)
    assert bc.make_tree(10).num_leaves == pc.pool_size == 32 and pc.train_size == g == 8 and pc.enabled
    bc, pc, _ = mod.arm_settings("tree+prune", args)
    assert bc.make_tree(10).num_leaves == 8 and not pc.enabled
    files = []
    for s, tp in enumerate([1000.0, 1100.0, 900.0]):
        f = tmp_path / f"s{s}.json"
        f.write_text(json.dumps([_run(s, 2000.0 + 100 * s, tp)]))
        files.append(str(f))
    assert mod.main(["--report-from", ",".join(files)]) == 0
    out = capsys.readouterr().out
    rows = markdown_table(out, "| mode ")
    assert [r[0] for r in rows] == list(mod.ARMS[:4])  # the arms these runs have
    assert rows[3][6] == "1000 +- 58"  # units to target, mean +- SE over the 3 seeds
    assert rows[3][10] == "0.700 +- 0.000" and rows[2][2] == "320"
    # best parent per seed: tree+prune (0.8 x flat's units): 1600, 1680, 1760 -> tree x pool - best = -680 +- 90
    assert ("tree x pool - best parent, units to target: -680 +- 90 over 3 seed(s) (the claim holds when below -2 SE: "
            "yes)") in out
    # a seed where tree x pool never reached the target leaves the claim to the seeds that did, and says so
    f = tmp_path / "miss.json"
    f.write_text(json.dumps([_run(9, 2000.0, None)]))
    assert mod.main(["--report-from", f"{files[0]},{f}"]) == 0
    rows = markdown_table(capsys.readouterr().out, "| mode ")
    assert rows[3][6] == "1000 (1/2 reached)"


def test_a_fifth_arm_from_another_run_joins_its_seed(tmp_path, capsys):
    """tree x pool+prune: the pool's tree with BranchGRPO's pruning on top; its runs join the four-arm runs of the same
    seed when the shared arm (flat) reproduces its curve, and a differing curve stops the report (exit 2)."""
    mod = load_bench("bench_tree_pool")
    args = type("A", (), {"format": "nvfp4", "splits": [0, 2, 4], "pool": 32, "train": 8,
                          "txp_width": "topk_per_parent", "txp_k": 1, "txp_window": 2})()
    bc, pc, g = mod.arm_settings("tree x pool+prune", args)
    bt, pt, _ = mod.arm_settings("tree x pool", args)
    assert (bc.width_prune, bc.prune_k, bc.depth_window) == ("topk_per_parent", 1, 2) and bt.width_prune == "none"
    assert bc.make_tree(10).num_leaves == bt.make_tree(10).num_leaves == 32 and pc == pt and g == 8
    files, extra = [], []
    for s, (tp, txp) in enumerate([(1000.0, 600.0), (1100.0, 700.0), (900.0, 650.0)]):
        four = _run(s, 2000.0 + 100 * s, tp)
        (tmp_path / f"s{s}.json").write_text(json.dumps([four]))
        five = dict(four, arms={"flat GRPO": four["arms"]["flat GRPO"],
                                "tree x pool+prune": dict(four["arms"]["tree x pool"], u_target=txp, reward_B=0.8)})
        (tmp_path / f"p{s}.json").write_text(json.dumps([five]))
        files.append(str(tmp_path / f"s{s}.json"))
        extra.append(str(tmp_path / f"p{s}.json"))
    assert mod.main(["--report-from", ",".join(files + extra)]) == 0
    out = capsys.readouterr().out
    rows = markdown_table(out, "| mode ")
    assert [r[0] for r in rows] == list(mod.ARMS[:5]) and rows[4][6] == "650 +- 29"
    # best parent per seed 1600, 1680, 1760 -> 600 - 1600, 700 - 1680, 650 - 1760 = -1030 +- 40
    assert "tree x pool+prune - best parent, units to target: -1030 +- 40 over 3 seed(s)" in out
    assert "reward @ B - best parent's 0.140 +- 0.000" in out  # 0.8 - tree+prune's 0.66
    # the reward line needs no target: every seed, against the parents' highest reward @ B (tree+prune's 0.66)
    assert ("tree x pool+prune reward @ B - the best parent's (per seed, the parents' highest reward @ B), all 3 "
            "seed(s): 0.140 +- 0.000; behind on 0 of 3") in out
    # the four-arm files alone: four rows (the arms every seed has)
    assert mod.main(["--report-from", ",".join(files)]) == 0
    assert len(markdown_table(capsys.readouterr().out, "| mode ")) == 4
    # a flat arm that does not reproduce its curve: the runs cannot be joined
    bad = json.loads((tmp_path / "p0.json").read_text())
    bad[0]["arms"]["flat GRPO"]["curve"][1][1] = 0.66
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert mod.main(["--report-from", f"{files[0]},{tmp_path / 'bad.json'}"]) == 2
    err = capsys.readouterr().err
    assert "seed 0: arm 'flat GRPO' has different evaluation curves" in err and len(err.strip().splitlines()) == 1


def test_lookahead_arms_run_join_older_runs_of_the_seed_and_pair_with_tree_prune(tmp_path, capsys):
    """lookahead@1 (+prune): tree+prune's tree (factor 2) whose first split keeps 2 of --cands NVFP4 previews, +prune
    with tree+prune's pruning. A run of the new arm (--small, real trainers) joins another run's tree+prune of the same
    seed (flat's curve reproduces across runs) and the report pairs it with tree+prune."""
    mod = load_bench("bench_tree_pool")
    args = type("A", (), {"format": "nvfp4", "splits": [0, 2, 4], "pool": 32, "train": 8, "cands": 4,
                          "txp_width": "topk_per_parent", "txp_k": 1, "txp_window": 2})()
    bl, pl, g = mod.arm_settings("lookahead@1+prune", args)
    bt, _, _ = mod.arm_settings("tree+prune", args)
    b1, _, _ = mod.arm_settings("lookahead@1", args)
    assert bl.lookahead_candidates == b1.lookahead_candidates == 4 and bl.branch == bt.branch == [2] and g == 8
    assert (bl.width_prune, bl.prune_k, bl.depth_window) == (bt.width_prune, bt.prune_k, bt.depth_window)
    assert b1.width_prune == "none" and not pl.enabled and pl.quant.format == "nvfp4"
    bp, _, _ = mod.arm_settings("Prune-parent", args)  # the parent credit on tree+prune's tree, and on the lookahead's
    blp, _, _ = mod.arm_settings("lookahead@1+prune-parent", args)
    for c in (bp, blp):
        assert (c.adv_baseline, c.adv_scale, c.width_prune, c.depth_window) == ("parent", "leaf", "topk_per_parent", 2)
    assert (bp.lookahead_candidates, blp.lookahead_candidates) == (0, 4) and mod.LOOKAHEAD[
        "lookahead@1+prune-parent"] == "Prune-parent"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    o = ["--small", "--out", str(tmp_path / "o"), "--seed-list", "0"]
    assert mod.main([*o, "--arms", "flat GRPO,tree+prune", "--json-out", str(a)]) == 0
    assert mod.main([*o, "--arms", "flat GRPO,lookahead@1+prune", "--json-out", str(b)]) == 0
    la = json.loads(b.read_text())[0]["arms"]["lookahead@1+prune"]
    assert la["nfe_lowp"] == 4 * (4 - 0) and la["nfe_policy"] == 1 * (0 + 2 * 2 + 4 * 2)  # previews; the 4-leaf tree
    capsys.readouterr()
    assert mod.main(["--small", "--report-from", f"{a},{b}"]) == 0
    out = capsys.readouterr().out
    assert [r[0] for r in markdown_table(out, "| mode ")] == ["flat GRPO", "tree+prune", "lookahead@1+prune"]
    assert "lookahead@1+prune units to target - tree+prune's: " in out
    assert "reward @ B - tree+prune's, all 1 seed(s): " in out
    # the paired numbers, from fabricated runs: 3 seeds, lookahead@1+prune 100 units sooner, +0.02 reward @ B
    files = []
    for s in range(3):
        r = _run(s, 2000.0 + 100 * s, 1000.0)
        tp = r["arms"]["tree+prune"]
        r["arms"] = {"flat GRPO": r["arms"]["flat GRPO"], "tree+prune": tp,
                     "lookahead@1+prune": dict(tp, u_target=tp["u_target"] - 100 - 10 * s, reward_B=0.68)}
        (tmp_path / f"l{s}.json").write_text(json.dumps([r]))
        files.append(str(tmp_path / f"l{s}.json"))
    assert mod.main(["--report-from", ",".join(files)]) == 0
    out = capsys.readouterr().out
    assert ("lookahead@1+prune units to target - tree+prune's: -110 +- 6 over 3 seed(s) where both reached (ahead "
            "when below -2 SE: yes); reward @ B - tree+prune's, all 3 seed(s): 0.020 +- 0.000") in out
    assert mod.main(["--cands", "2"]) == 2
    assert "--cands 2: out of range" in capsys.readouterr().err


def test_tree_pool_prune_parent_arm_is_compared_with_the_best_parent_prune_parent_included(tmp_path, capsys):
    """tree x pool+prune-parent: tree x pool+prune's rollout and pruning with the parent credit. Its runs join older
    runs of the seed, and the claim line takes the best parent over every parent run, Prune-parent included."""
    mod = load_bench("bench_tree_pool")
    args = type("A", (), {"format": "nvfp4", "splits": [0, 2, 4], "pool": 32, "train": 8,
                          "txp_width": "topk_per_parent", "txp_k": 1, "txp_window": 2})()
    bc, pc, g = mod.arm_settings("tree x pool+prune-parent", args)
    bt, pt, _ = mod.arm_settings("tree x pool+prune", args)
    assert (bc.adv_baseline, bc.adv_scale) == ("parent", "leaf") and bt.adv_baseline == "depth"
    assert (bc.width_prune, bc.prune_k, bc.depth_window, bc.branch) == (bt.width_prune, bt.prune_k, bt.depth_window,
                                                                         bt.branch)
    assert pc == pt and g == 8 and "tree x pool+prune-parent" in mod.COMBOS
    files = []
    for s in range(3):
        r = _run(s, 2000.0, 1000.0)
        tp = r["arms"]["tree+prune"]  # 1600 units
        r["arms"] = {"flat GRPO": r["arms"]["flat GRPO"], "tree+prune": tp, "pool": r["arms"]["pool"],
                     "Prune-parent": dict(tp, u_target=1200.0 + 10 * s, reward_B=0.7),
                     "tree x pool+prune-parent": dict(tp, u_target=1000.0 + 30 * s, reward_B=0.72)}
        (tmp_path / f"q{s}.json").write_text(json.dumps([r]))
        files.append(str(tmp_path / f"q{s}.json"))
    assert mod.main(["--report-from", ",".join(files), "--arms",
                     "flat GRPO,tree+prune,pool,Prune-parent,tree x pool+prune-parent"]) == 0
    out = capsys.readouterr().out
    # best parent per seed: Prune-parent (1200, 1210, 1220), not tree+prune (1600): -200, -180, -160
    assert "tree x pool+prune-parent - best parent, units to target: -180 +- 12 over 3 seed(s)" in out
    assert ("tree x pool+prune-parent reward @ B - the best parent's (per seed, the parents' highest reward @ B), all "
            "3 seed(s): 0.020 +- 0.000; behind on 0 of 3") in out


def test_bad_input_is_one_line_exit_2(capsys):
    mod = load_bench("bench_tree_pool")
    for argv, msg in ((["--train", "4"], "--train 4: must be 2^(number of splits) = 8"),
                      (["--pool", "6"], "--pool 6: must be >= --train 8 and a multiple of --train / 2"),
                      (["--arms", "pool"], "expected 'flat GRPO' first"),
                      (["--splits", "0,2,12"], "expected increasing steps in [0, --steps 10)"),
                      (["--txp-window", "4"], "--txp-window 4: out of range"),
                      (["--json-out", "/no/s0.json"], "--json-out '/no/s0.json': expected a file path"),
                      (["--report-from", "/nonexistent.json"], "--report-from '/nonexistent.json'")):
        assert mod.main(argv) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1, err


def test_layout_task_is_wired_and_runs_of_another_task_are_refused(tmp_path, capsys):
    """``--task layout``: the arms' trainers score with issue 35's second task (the reward of
    bench_branch_headroom.task_reward, not a copy), the run records its task and names it; --report-from refuses to
    put runs of another task (old runs without the field are the big task's) into the table, one line, exit 2."""
    mod = load_bench("bench_tree_pool")
    layout = load_bench("layout_shapes_task")
    out = tmp_path / "L0.json"
    assert mod.main(["--small", "--task", "layout", "--arms", "flat GRPO", "--out", str(tmp_path / "o"),
                     "--json-out", str(out)]) == 0
    assert "tree x pool on the layout task" in capsys.readouterr().out
    run = json.loads(out.read_text())[0]
    assert run["task"] == "layout" and list(run["arms"]) == ["flat GRPO"]
    args = type("A", (), {"task": "layout", "format": "nvfp4", "splits": [0, 2], "pool": 8, "train": 4,
                          "txp_width": "topk_per_parent", "txp_k": 1, "txp_window": 2, "out": str(tmp_path / "o"),
                          "model_path": "builtin:shapes_sd3", "steps": 4, "eta": 0.7, "lr": 1e-3, "eval_steps": 3,
                          "eval_prompts": 4, "target_area": 100.0})()
    assert type(mod.build(args, "tree x pool+prune", 0).reward_fn).__name__ == layout.LayoutShapesReward.__name__
    args.task = "big"
    assert type(mod.build(args, "tree x pool+prune", 0).reward_fn).__name__ == "BigShapesReward"
    # the layout run read back as the big task's (the default --task), and an old run (no task field) as layout's
    for argv, f, msg in ((["--arms", "flat GRPO"], out, "runs of another task than --task big: layout (seed 0)"),
                         (["--task", "layout", "--arms", "flat GRPO"], None,
                          "runs of another task than --task layout: big (seed 3)")):
        if f is None:
            f = tmp_path / "old.json"
            f.write_text(json.dumps([_run(3, 2000.0, 1000.0)]))
        assert mod.main([*argv, "--report-from", str(f)]) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1, err
    assert mod.main(["--task", "layout", "--arms", "flat GRPO", "--report-from", str(out)]) == 0
    assert mod.main(["--task", "sizes"]) == 2
    assert "--task 'sizes': expected one of big, layout" in capsys.readouterr().err


def test_join_seeds_and_missing_arms_shared_by_the_report_benches(capsys):
    """bench/arm_runs.py: a seed's arms from two runs are joined (a shared arm must agree), seeds come out in order;
    a run that lacks an asked-for arm is named on one line."""
    arm_runs = load_bench("arm_runs")
    a = {"seed": 1, "x": "first", "arms": {"flat": {"curve": [1]}, "tree": {"curve": [2]}}}
    b = {"seed": 1, "x": "second", "arms": {"flat": {"curve": [1]}, "pool": {"curve": [3]}}}
    c = {"seed": 0, "arms": {"flat": {"curve": [5]}}}
    runs = arm_runs.join_seeds([a, b, c], "curve", "curves")
    assert [r["seed"] for r in runs] == [0, 1] and runs[1]["x"] == "first"
    assert runs[1]["arms"] == {"flat": {"curve": [1]}, "tree": {"curve": [2]}, "pool": {"curve": [3]}}
    with pytest.raises(ValueError, match="^seed 1: arm 'flat' has different curves in two runs"):
        arm_runs.join_seeds([a, dict(b, arms={"flat": {"curve": [9]}})], "curve", "curves")
    assert not arm_runs.missing_arms("b", runs, ["flat"])
    assert capsys.readouterr().err == ""
    assert arm_runs.missing_arms("b", runs, ["flat", "tree", "pool"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["b: seed 0 has no arm 'tree', 'pool' (it has flat): pass --arms with the arms the runs hold"]

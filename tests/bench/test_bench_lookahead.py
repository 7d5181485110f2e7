"""bench/bench_lookahead.py (issue 35, item 3): the small mode grows the four arms on the real shapes model and its
emulated NVFP4 copy and prints both tables with one row per split depth and per arm; a rerun prints the same numbers
(every draw is keyed); the pieces the tables rest on (average ranks, depth spreads, the cost rows) against hand
values; bad input exits 2 with one line."""

import re

from .benchutil import load_bench, markdown_table


def _numbers(out: str) -> str:
    """The output without its wall-clock seconds."""
    return re.sub(r"\(\d+ s\)|seed \d+ \d+ s", "", out)


def test_small_mode_prints_both_tables_and_a_rerun_is_identical(capsys, tmp_path):
    mod = load_bench("bench_lookahead")
    argv = ["--small", "--out", str(tmp_path / "o")]
    assert mod.main([*argv, "--json-out", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    pred = markdown_table(out, "| depth ")
    assert [r[:5] for r in pred] == [["1", "0", "4", "2", pred[0][4]], ["2", "2", "2", "4", pred[1][4]]]
    assert "(chance 0.25)" in pred[0][7] and "(chance 0.08)" in pred[0][8]
    assert pred[1][9] == "-" and pred[1][10] == "-"  # no subtree below the last split's children
    val = {r[0]: r for r in markdown_table(out, "| arm ")}
    assert set(val) == {"random", "lookahead", "oracle", "tree x pool", "lookahead@1", "fp 4-ary tree (reference)"}
    # per tree: 4 steps, splits 0, 2, keep 2 of 4: fp 2 x 2 + 4 x 2 = 12; lookahead previews 4 x 4 + 2 x 4 x 2 = 32
    assert val["random"][1:3] == ["12", "0"] and val["lookahead"][1:3] == ["12", "32"]
    assert val["oracle"][1:3] == ["44", "0"]  # the previews in full precision
    assert val["lookahead@1"][1:3] == ["12", "16"]  # previews at the first split only: 4 x 4
    assert val["tree x pool"][2] == "36"  # its 16-leaf tree (factors 2, 8) in nvfp4: 2 x 2 + 16 x 2
    assert val["fp 4-ary tree (reference)"][1] == "40"
    for arm in ("random", "lookahead", "oracle", "tree x pool", "lookahead@1"):
        assert re.fullmatch(r"0\.\d{3} \+- 0\.\d{3}", val[arm][5]), val[arm]  # leaf reward std, mean +- SE
    assert "lookahead   leaf std" in out and "lookahead - tree x pool: leaf std" in out
    assert mod.main(argv) == 0
    again = capsys.readouterr().out
    assert _numbers(again) == _numbers(out)
    # the tables read back from the JSON: the same numbers (progress lines aside)
    assert mod.main(["--small", "--report-from", str(tmp_path / "r.json")]) == 0
    back = capsys.readouterr().out
    assert markdown_table(back, "| depth ") == pred and markdown_table(back, "| arm ") == markdown_table(out, "| arm ")


def test_ranks_spreads_and_costs_against_hand_values():
    mod = load_bench("bench_lookahead")
    assert mod.ranks([0.3, 0.1, 0.3, 0.2]) == [2.5, 0.0, 2.5, 1.0]
    assert abs(mod.pearson([1, 2, 3], [2, 4, 6]) - 1.0) < 1e-12 and abs(mod.pearson([1, 2, 3], [3, 2, 1]) + 1) < 1e-12
    assert mod.pearson([1, 1], [0, 1]) is None
    # k = 2, D = 2: depth 1 nodes (0 + 2) / 2 = 1 and (4 + 4) / 2 = 4 -> std 1.5; leaves std of [0, 2, 4, 4]
    assert mod.depth_spreads([0.0, 2.0, 4.0, 4.0], 2, 2) == [1.5, mod.pstd([0.0, 2.0, 4.0, 4.0])]
    args = type("A", (), {"keep": 2, "cands": 4, "splits": [0, 2, 4], "steps": 10, "eta": 0.7, "format": "nvfp4"})()
    c = mod.costs(args)
    # binary tree of splits 0, 2, 4 of 10: 2 x 2 + 4 x 2 + 8 x 6 = 60 fp calls; previews 1 x 4 x 10 + 2 x 4 x 8 +
    # 4 x 4 x 6 = 200; the 4-ary tree 4 x 2 + 16 x 2 + 64 x 6 = 424
    assert (c["random"]["nfe_fp"], c["lookahead"]["nfe_lowp"], c["oracle"]["nfe_fp"]) == (60, 200, 260)
    assert c["fp 4-ary tree"]["nfe_fp"] == 424
    assert c["tree x pool"]["nfe_lowp"] == 204  # the 32-leaf tree of bench_tree_pool.py
    # units: trained row-steps (the last step is ODE: 2 x 2 + 4 x 2 + 8 x 5 = 52) x 3 + NFE; lowp / 2.4
    assert c["random"]["units"] == 60 + 3 * 52 and abs(c["lookahead"]["units"] - (216 + 200 / 2.4)) < 1e-9


def test_bad_input_is_one_line_exit_2(capsys, tmp_path):
    mod = load_bench("bench_lookahead")
    for argv, msg in ((["--keep", "4"], "--keep 4 / --cands 4: expected 2 <= keep < cands"),
                      (["--splits", "0,2,12"], "expected increasing steps in [0, --steps 10)"),
                      (["--splits", "a"], "--splits 'a': expected comma-separated step indices"),
                      (["--arms", "best"], "--arms 'best': expected a subset of"),
                      (["--prompts", "0"], "--prompts 0: out of range"),
                      (["--seed-list", "x"], "--seed-list 'x': expected comma-separated integers"),
                      (["--report-from", "/nonexistent.json"], "--report-from '/nonexistent.json'")):
        assert mod.main([*argv, "--json-out", str(tmp_path / "r.json")]) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "r.json").exists()

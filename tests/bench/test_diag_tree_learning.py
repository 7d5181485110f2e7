"""bench/diag_tree_learning.py (issue 35 item 1): one iteration's LoRA gradient per variant, at unchanged weights."""

import pytest
import torch

from .benchutil import load_bench, markdown_table


def test_small_probe_prints_a_row_per_variant_and_never_steps(capsys):
    mod = load_bench("diag_tree_learning")
    assert mod.main(["--small", "--only", "BranchGRPO,tree parent/leaf credit"]) == 0
    rows = markdown_table(capsys.readouterr().out, "| variant ")
    assert [r[0] for r in rows] == ["flat GRPO", "BranchGRPO", "tree parent/leaf credit"]
    for r in rows:
        c1 = float(r[1].split(" +- ")[0])
        assert -1 <= c1 <= 1 and -1 <= float(r[2]) <= 1 and float(r[3]) >= 0 and float(r[4]) > 0


def test_summary_and_cos_on_known_vectors():
    mod = load_bench("diag_tree_learning")
    G = torch.tensor([1.0, 0.0])
    grads = [torch.tensor([1.0, 1.0]), torch.tensor([1.0, -1.0])]  # mean (1, 0): cos 1 with G, each 1/sqrt(2)
    s = mod.summary(grads, G)
    assert s["cos1"] == pytest.approx(2 ** -0.5) and s["cosbar"] == pytest.approx(1.0)
    assert s["snr"] == pytest.approx(1.0 / 2.0)  # |mean|^2 = 1 over the unbiased noise 2 * 1 * 2 / 2


@pytest.mark.parametrize("argv", [["--only", "nope"], ["--task", "sizes"], ["--k", "1"], ["--splits", "0,30"]])
def test_bad_input_exits_2_with_one_line(argv, capsys):
    mod = load_bench("diag_tree_learning")
    assert mod.main(["--small", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("diag_tree_learning:" in err[0] or "--splits" in err[0])

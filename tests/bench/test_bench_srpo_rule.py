"""bench/bench_srpo_rule.py: its table (per-rule means and the paired difference) from --json-out files, and bad
arguments exit 2 with one line. The training it runs is the setting of
tests/vla_rl/test_reach_one.py::test_grpo_raises_success_on_its_training_state, tested there."""

import json

import pytest

from .benchutil import load_bench


def _rows():
    # hand values: paired differences task - group after RL = -0.2, -0.1, 0.0 -> mean -0.1, SE 0.1/sqrt(3)
    return [{"seed": s, "task": {"before": b, "after": ta, "wall_s": 1.0},
             "group": {"before": b, "after": ga, "wall_s": 1.0}}
            for s, b, ta, ga in [(0, 0.5, 0.6, 0.8), (1, 0.1, 0.2, 0.3), (2, 0.3, 0.4, 0.4)]]


def test_report_from_joins_files_and_pairs_the_rules(tmp_path, capsys):
    mod = load_bench("bench_srpo_rule")
    rows = _rows()
    (tmp_path / "a.json").write_text(json.dumps({"rows": [rows[2], rows[0]]}))
    (tmp_path / "b.json").write_text(json.dumps({"rows": [rows[1]]}))
    assert mod.main(["--report-from", f"{tmp_path / 'a.json'},{tmp_path / 'b.json'}"]) == 0
    out = capsys.readouterr().out
    assert "| task | 0.300 +- 0.115 | 0.400 +- 0.115 | 0.100 +- 0.000 |" in out
    assert "| group | 0.300 +- 0.115 | 0.500 +- 0.153 | 0.200 +- 0.058 |" in out
    assert "task - group after RL: -0.100 +- 0.058 (within 2 SE)" in out
    assert out.index("0: task 0.500") < out.index("1: task 0.100") < out.index("2: task 0.300")  # seeds in order


@pytest.mark.parametrize("argv, word", [(["--seed-list", "0,x"], "'0,x'"), (["--iterations", "0"], "positive"),
                                        (["--report-from", "/nonexistent/r.json"], "/nonexistent/r.json")])
def test_bad_arguments_are_one_line(argv, word, capsys):
    mod = load_bench("bench_srpo_rule")
    with pytest.raises(SystemExit) as e:
        code = mod.main(argv)
        raise SystemExit(code)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err and "Traceback" not in err

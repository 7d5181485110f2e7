"""Issue 25's World-VLA-Loop and EVA seed benches (bench/bench_wm_loop_seeds.py, bench/bench_eva_seeds.py) run end
to end in their --small mode (so they cannot rot), print their tables, and rerun to the same numbers."""

import json
from pathlib import Path

import pytest

from .benchutil import load_bench, markdown_table


def _history(run_dir: Path) -> list[dict]:
    """A loop run's history without its wall-clock fields."""
    return [{k: v for k, v in h.items() if not k.startswith("time/")}
            for h in json.loads((run_dir / "history.json").read_text())]


def test_wm_loop_seeds_small(tmp_path, capsys):
    mod = load_bench("bench_wm_loop_seeds")
    assert mod.main(["--small", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    per_cycle = markdown_table(out, "| cycle |")
    assert [r[0] for r in per_cycle] == ["0", "1", "2"] and [r[1] for r in per_cycle] == ["0", "1", "2"]
    assert all(cell.count("+-") == 1 for r in per_cycle for cell in r[2:]) and len(per_cycle[0]) == 4  # loop + control
    per_seed = markdown_table(out, "| seed |")
    assert [r[0] for r in per_seed] == ["0",
                                        "1"] and all(len(r[1].split()) == 3 and len(r[3].split()) == 3
                                                     for r in per_seed)
    assert "loop gain cycle 0 -> 2, paired over seeds:" in out and "loop - control at cycle 2" in out
    assert "warning" not in out  # the control starts from the loop's own SFT policy: same cycle-0 success
    for s in (0, 1):
        hist = json.loads((tmp_path / "a" / f"loop_seed{s}" / "history.json").read_text())
        ctrl = json.loads((tmp_path / "a" / f"control_seed{s}" / "control.json").read_text())
        assert [float(c) for c in per_seed[s][1].split()] == pytest.approx([round(h["real_success"], 3) for h in hist],
                                                                           abs=1e-3)
        assert ctrl["success"][0] == hist[0]["real_success"] and len(ctrl["success"]) == 3
    # --reuse keeps both finished loop runs and their controls: the same tables, nothing rerun
    assert mod.main(["--small", "--reuse", "--out", str(tmp_path / "a")]) == 0
    again = capsys.readouterr().out
    assert again.count("reused run") == 4 and markdown_table(again, "| cycle |") == per_cycle
    # seeded: a fresh run of seed 0 writes the same history (every world-model and policy metric, not only success)
    assert mod.main(["--small", "--seeds", "1", "--no-control", "--out", str(tmp_path / "b")]) == 0
    assert _history(tmp_path / "b" / "loop_seed0") == _history(tmp_path / "a" / "loop_seed0")
    # --reuse keeps a finished run whose recorded config matches
    assert mod.main(["--small", "--seeds", "1", "--no-control", "--reuse", "--out", str(tmp_path / "b")]) == 0
    assert "reused run" in capsys.readouterr().out


def test_eva_seeds_small_is_seeded(tmp_path, capsys):
    mod = load_bench("bench_eva_seeds")
    assert mod.main(["--small", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    summary = markdown_table(out, "| rows | metric |")
    assert [(r[0], r[1]) for r in summary][::4] == [("train", "EVA reward"),
                                                    ("heldout", "EVA reward")] and len(summary) == 8
    assert all(cell.count("+-") == 1 for r in summary for cell in r[2:5])
    per_seed = markdown_table(out, "| seed | EVA reward |")
    assert [r[0] for r in per_seed] == ["0", "1"] and all(c.count("->") == 1 for r in per_seed for c in r[1:])
    assert mod.main(["--small", "--seeds", "1", "--out", str(tmp_path / "b")]) == 0
    # seeded: same numbers on a rerun
    assert markdown_table(capsys.readouterr().out, "| seed | EVA reward |") == per_seed[:1]
    # --reuse takes a finished seed's reports when the settings match, and reruns it when they do not
    assert mod.main(["--small", "--seeds", "1", "--reuse", "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "seed 0: reused" in out and markdown_table(out, "| seed | EVA reward |") == per_seed[:1]
    assert mod.main(["--small", "--seeds", "1", "--iterations", "1", "--reuse", "--out", str(tmp_path / "b")]) == 0
    assert "reused" not in capsys.readouterr().out


@pytest.mark.parametrize("name,argv,what", [
    ("bench_wm_loop_seeds", ["--seeds", "0"], "--seeds >= 1"),
    ("bench_wm_loop_seeds", ["--config", "nope.yaml"], "--config nope.yaml"),
    ("bench_eva_seeds", ["--iterations", "0"], "--iterations >= 1"),
    ("bench_eva_seeds", ["--config", "nope.yaml"], "--config nope.yaml")])
def test_bad_arguments_exit_2_with_one_line(name, argv, what, tmp_path, capsys):
    assert load_bench(name).main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert what in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())

"""grpo.report.load_run on damaged metrics: a cut last row (a run killed mid-write) is dropped, a bad row in the middle
or an unreadable run_info.json is one ValueError naming the file."""
import pytest

from grpo.report import load_run


def test_cut_last_row_is_dropped(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "a": 1}\n{"step": 1, "a": 2}\n{"step": 2, "a"')
    assert [r["step"] for r in load_run(tmp_path).rows] == [0, 1]


def test_bad_middle_row_and_bad_run_info_are_refused(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\nnot json\n{"step": 1}\n')
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        load_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n')
    (tmp_path / "run_info.json").write_text("{broken")
    with pytest.raises(ValueError, match="run_info.json is not JSON"):
        load_run(tmp_path)


def test_logger_cuts_a_killed_runs_last_row_before_appending(tmp_path):
    from grpo.metrics import MetricsLogger

    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "a": 1}\n{"step": 1, "a"')
    log = MetricsLogger(tmp_path, tensorboard=False)
    log.log(1, {"a": 2.0})
    log.close()
    assert [(r["step"], r["a"]) for r in load_run(tmp_path).rows] == [(0, 1), (1, 2.0)]

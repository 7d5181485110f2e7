"""grpo.cli.run_command: bad input and a missing third-party package become one line and exit 2; a missing module of
this project is a bug and is raised."""
import pytest

from grpo.cli import run_command
from grpo.preflight import check_new_output


def _raise(exc):
    def fn():
        raise exc
    return fn


def test_bad_input_is_one_line(capsys):
    assert run_command(_raise(ValueError("rl.lr=-1: expected > 0"))) == 2
    err = capsys.readouterr().err
    assert err == "error: rl.lr=-1: expected > 0\n"


def test_missing_optional_package_names_it_and_how(capsys):
    assert run_command(_raise(ModuleNotFoundError("No module named 'lerobot.policies'", name="lerobot.policies"))) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'lerobot'" in err and "make lerobot" in err


def test_missing_unknown_package_says_pip(capsys):
    assert run_command(_raise(ModuleNotFoundError("No module named 'foo_bar'", name="foo_bar"))) == 2
    assert "pip install foo_bar" in capsys.readouterr().err


def test_missing_own_module_is_raised():
    with pytest.raises(ModuleNotFoundError):
        run_command(_raise(ModuleNotFoundError("No module named 'grpo.nothing'", name="grpo.nothing")))


def test_check_new_output(tmp_path):
    assert check_new_output(tmp_path / "new", "out", None) == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    check_new_output(tmp_path / "empty", "out", False)
    f = tmp_path / "f.hdf5"
    f.write_bytes(b"x")
    with pytest.raises(ValueError, match="already exists .*--force"):
        check_new_output(f, "out", False)
    with pytest.raises(ValueError) as e:
        check_new_output(f, "out", None)
    assert "--force" not in str(e.value)
    assert check_new_output(f, "out", True) == f


def test_os_errors_name_the_path(capsys, tmp_path):
    def write_under_a_file():
        (tmp_path / "f").write_text("x")
        (tmp_path / "f" / "out").mkdir(parents=True)  # NotADirectoryError / FileExistsError from the OS
        return 0

    assert run_command(write_under_a_file) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot use") and str(tmp_path / "f") in err and err.count("\n") == 1


def test_own_file_not_found_message_is_kept(capsys):
    assert run_command(_raise(FileNotFoundError("model.path='x': no diffusers pipeline there"))) == 2
    assert capsys.readouterr().err == "error: model.path='x': no diffusers pipeline there\n"


def test_atomic_output_leaves_no_half_file(tmp_path):
    from grpo.checkpoint import atomic_output

    out = tmp_path / "demos.hdf5"
    out.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(out) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt  # a Ctrl-C mid-write
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["demos.hdf5"]
    with atomic_output(out) as tmp:
        tmp.write_text("new")
    assert out.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["demos.hdf5"]


def test_interrupt_is_one_line_exit_130(capsys):
    import os
    import signal

    def long_job():
        os.kill(os.getpid(), signal.SIGTERM)  # a scheduler's stop while the command runs
        raise AssertionError("not reached: SIGTERM interrupts")

    old = signal.getsignal(signal.SIGTERM)
    try:
        assert run_command(long_job) == 130
    finally:
        signal.signal(signal.SIGTERM, old)
    err = capsys.readouterr().err
    assert err.startswith("error: interrupted") and err.count("\n") == 1

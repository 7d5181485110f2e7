"""Shared by the 2-process tests: the torchrun command line (:func:`torchrun`, on a free port of its own), and
launching ``torchrun --nproc_per_node 2 -m <module> ...`` to SIGTERM it once it has logged a few iterations."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable


def torchrun(nproc: int = 2) -> list[str]:
    """``python -m torch.distributed.run --nproc_per_node NPROC --master_port PORT``, PORT a port free now: torchrun's
    default (29500) is one per machine, so two runs at once (parallel test workers, another job) would meet there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_port", str(port)]


def sigterm_two_ranks(module: str, args: list[str], out: Path, rows: Callable[[Path], list], env: dict, cwd: Path,
                      timeout_s: float = 120.0, min_rows: int = 2) -> str:
    """Run ``module`` on 2 ranks, send SIGTERM after ``min_rows`` logged iterations (``rows(out)``), and check that
    both ranks received it, rank 0 alone reported the stop, and no worker failed before the save. Returns the log."""
    proc = subprocess.Popen([*torchrun(2), "-m", module, *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None and (
            not (out / "metrics.jsonl").exists() or len(rows(out)) < min_rows):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=timeout_s)
    assert log.count("SIGTERM received") == 2 and log.count("stopped by SIGTERM") == 1, log[-3000:]
    assert "Traceback" not in log.split("stopped by SIGTERM")[0]  # no worker failed before the save
    return log

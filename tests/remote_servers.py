"""Reward servers for the remote-reward tests, on the loopback interface only: ``diffusion-rl serve-reward`` started
as a subprocess (:func:`serve`), and rewards served by import path that misbehave on purpose (slow once, crash the
server after N answers)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(name: str, port: int = 0, *extra: str, env: dict | None = None, cli: str = "diffusion_rl.cli"
          ) -> tuple[subprocess.Popen, str]:
    """``python -m <cli> serve-reward NAME --port PORT`` in a subprocess; returns it and the URL it printed."""
    proc = subprocess.Popen([sys.executable, "-m", cli, "serve-reward", name, "--host", "127.0.0.1", "--port",
                             str(port), *extra], env={**ENV, **(env or {})}, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if " at http://" not in line:
        proc.kill()
        raise RuntimeError(f"serve-reward did not start: {line!r} {proc.stderr.read()[-2000:]}")
    return proc, line.split(" at ")[1].split()[0]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def redness_dies_after(batch):
    """``tests.diffusion_rl.conftest.redness``, except that the serving process exits (a crash, no answer) when it is
    asked for its ``DIE_AFTER + 1``-th score."""
    n = int(os.environ["DIE_AFTER"])
    redness_dies_after.calls = getattr(redness_dies_after, "calls", 0) + 1
    if redness_dies_after.calls > n:
        os._exit(3)
    im = batch.images
    return types.SimpleNamespace(total=im[:, 0].mean((1, 2)) - im[:, 1:].mean((1, 2, 3)), components={})


class SlowOnce:
    """A reward whose first call takes ``first_s`` seconds (a model warming up); then the row mean of the images."""

    def __init__(self, first_s: float = 1.0):
        self.first_s, self.calls = first_s, 0

    def __call__(self, batch):
        self.calls += 1
        if self.calls == 1:
            time.sleep(self.first_s)
        x = batch.images if batch.images is not None else \
            torch.stack([torch.as_tensor(v).float().mean() for v in batch.videos])
        return types.SimpleNamespace(total=x.flatten(1).mean(1) if x.dim() > 1 else x, components={})

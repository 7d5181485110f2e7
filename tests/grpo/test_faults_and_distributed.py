"""Provoked faults (SIGTERM mid-run) and a 2-process run vs a 1-process run of the core demo."""

import os
import signal
import subprocess
import sys
import time

import torch

from grpo import demo
from grpo.checkpoint import load_checkpoint
from grpo.config import load_config
from grpo.metrics import read_jsonl

from ..torchrun_util import torchrun

ARGS = ["model.pretrain_steps=100", "train.eval_samples=64", "train.save_every=1000"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.getcwd()}


def _run(out, *extra):
    return demo.train(load_config(demo.ToyConfig, "configs/grpo/toy_flow.yaml", [f"output_dir={out}", *ARGS, *extra]))


def test_sigterm_saves_and_resume_matches_uninterrupted(tmp_path):
    # diffusion-rl toy
    proc = subprocess.Popen([sys.executable, "-m", "diffusion_rl.cli", "toy", "configs/grpo/toy_flow.yaml",
                             f"output_dir={tmp_path / 'k'}", "train.iterations=100000", *ARGS], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    metrics = tmp_path / "k" / "metrics.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "stopped by SIGTERM" in out
    state = load_checkpoint(tmp_path / "k" / "checkpoints")
    k = state["iteration"]
    assert k >= 3 and len(read_jsonl(metrics)) == k  # nothing lost: every finished iteration is logged and saved
    resumed = _run(tmp_path / "k", f"train.iterations={k + 2}")["model"]
    straight = _run(tmp_path / "s", f"train.iterations={k + 2}")["model"]
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_two_processes_match_one_process(tmp_path):
    one = _run(tmp_path / "one", "train.iterations=3")["model"].state_dict()
    cmd = [*torchrun(2), "-m", "diffusion_rl.cli", "toy", "configs/grpo/toy_flow.yaml",
           f"output_dir={tmp_path / 'two'}", "train.iterations=3", *ARGS]
    res = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    two = load_checkpoint(tmp_path / "two" / "checkpoints")
    assert two["iteration"] == 3
    for k, v in one.items():
        torch.testing.assert_close(two["model"][k], v, atol=1e-5, rtol=1e-5)
    # rank 0 alone wrote metrics and the checkpoint; a 2-process checkpoint resumes in 1 process
    assert len(read_jsonl(tmp_path / "two" / "metrics.jsonl")) == 4
    res1 = _run(tmp_path / "two", "train.iterations=4")
    assert res1["stopped"] is None

"""``vla-rl train`` with a reward server (rl.reward=http://HOST:PORT, loopback only): the episodes' videos and
metadata are served to the reward; serving the binary success reward gives the numbers of ``rl.reward=binary``."""

import subprocess
import sys

import pytest
import torch

from grpo.checkpoint import load_checkpoint
from grpo.metrics import read_jsonl
from rewards.remote import make_server, start_in_thread
from vla_rl.trainer import VLARLTrainer

from ..remote_servers import free_port
from .test_distributed import CONFIG, ENV, ROOT, TINY, _cfg

FAST = ["rl.iterations=2", "rl.reward=binary"]


@pytest.fixture()
def server():
    srv = make_server("rewards.success:success_reward")
    start_in_thread(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


def test_served_success_reward_equals_binary(tmp_path, server):
    # each arm in a fresh process: two trainers built one after the other in one process do not repeat each other's
    # numbers (measured: two rl.reward=binary runs in one process differ after the first update), two processes do
    for tag, extra in {"binary": [], "remote": [f"rl.reward={server.url}", "rl.remote.batch_size=4"]}.items():
        cmd = [sys.executable, "-m", "vla_rl.cli", "train", CONFIG, *TINY, f"output_dir={tmp_path / tag}", *FAST,
               *extra]
        res = subprocess.run(cmd, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=400)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert server.scored_items == 2 * 6  # 2 iterations x 6 episodes (requests of 4 + 2), each scored once
    a, b = (load_checkpoint(tmp_path / t / "checkpoints") for t in ("binary", "remote"))
    assert a["trainer"]["iteration"] == b["trainer"]["iteration"] == 2
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    ra = [r["reward/mean"] for r in read_jsonl(tmp_path / "binary" / "metrics.jsonl") if "reward/mean" in r]
    rb = [r["reward/mean"] for r in read_jsonl(tmp_path / "remote" / "metrics.jsonl") if "reward/mean" in r]
    assert ra == rb and len(ra) == 2 and 0 < sum(ra) < 2  # some episodes succeeded, some failed: a real signal


def test_dead_reward_server_is_bad_input(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ValueError, match=f"rl.reward='{url}': reward server {url}: GET /health failed 1 time;"):
        VLARLTrainer(_cfg(tmp_path / "run", *FAST, f"rl.reward={url}", "rl.remote.retries=0"), quiet=True)
    assert not (tmp_path / "run").exists()

"""``diffusion-rl train`` with a reward server (rewards.remote, loopback only): the same numbers as the reward in
process (flat and BranchGRPO, with and without overlapping the scoring with the rollout), a dead server stops the
command at start (exit 2, nothing written), a server that dies mid-run stops the run with a checkpoint and a rerun
resumes to the same result as an uninterrupted run."""

import subprocess
import sys

import pytest
import torch

from diffusion_rl.cli import main
from diffusion_rl.trainer import DiffusionGRPOTrainer
from grpo.checkpoint import load_checkpoint
from grpo.metrics import read_jsonl
from rewards.remote import make_server, start_in_thread

from ..remote_servers import ENV, ROOT, free_port, serve, stop
from .test_distributed import _cfg

REDNESS = "tests.diffusion_rl.conftest:redness"


@pytest.fixture(scope="module")
def server():
    proc, url = serve(REDNESS)
    yield url
    stop(proc)


def _train(name, out, *extra):
    tr = DiffusionGRPOTrainer(_cfg(name, out, "train.iterations=2", *extra))
    res = tr.train(progress=False)
    return tr, res


def _rows(out):
    return [r for r in read_jsonl(out / "metrics.jsonl") if "reward/mean" in r or "eval/reward" in r]


@pytest.mark.parametrize("name", ["flat", "branch"])
def test_remote_equals_in_process_with_and_without_overlap(tmp_path, server, name):
    remote = [f"reward.name={server}", "reward.remote.batch_size=3", "reward.remote.max_in_flight=2"]
    runs = {}
    for tag, extra in {"local": [], "remote": remote, "local2": ["reward.overlap=2"],
                       "remote2": [*remote, "reward.overlap=2"]}.items():
        tr, res = _train(name, tmp_path / tag, *extra)
        assert res["error"] is None and res["stopped"] is None
        runs[tag] = (tr.adapter.trainable_state_dict(), load_checkpoint(tmp_path / tag / "checkpoints"), tr)
    assert runs["remote"][2].remote is not None and runs["remote"][2].remote.requests_sent > 2
    for a, b in (("local", "remote"), ("local2", "remote2")):  # bit-identical: weights, rewards, advantages, logs
        wa, wb = runs[a][0], runs[b][0]
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
        for k in ("rewards", "advantages"):
            assert torch.equal(runs[a][1]["last_iteration"][k], runs[b][1]["last_iteration"][k])
        ra, rb = _rows(tmp_path / a), _rows(tmp_path / b)
        for x, y in zip(ra, rb):
            assert {k: x[k] for k in x if k.startswith(("reward/", "eval/", "loss/", "onpolicy/"))} == \
                   {k: y[k] for k in y if k.startswith(("reward/", "eval/", "loss/", "onpolicy/"))}
    # overlap: the same algorithm (rewards of the same samples up to float rounding)
    torch.testing.assert_close(runs["local2"][1]["last_iteration"]["rewards"],
                               runs["local"][1]["last_iteration"]["rewards"], atol=1e-5, rtol=1e-4)
    assert runs["local"][0].keys() == runs["local2"][0].keys()
    gaps = [r["onpolicy/max_abs_dlogp"] for r in _rows(tmp_path / "remote2") if "onpolicy/max_abs_dlogp" in r]
    # the joined record's log-probs come from the parts' smaller denoiser batches: float rounding, not more
    assert len(gaps) == 2 and max(gaps) < 1e-5, gaps


def test_dead_server_stops_the_command_at_start(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "run"
    rc = main(["train", "configs/diffusion/tiny_sd3_flat.yaml", f"output_dir={out}", f"reward.name={url}",
               "reward.remote.retries=1", "reward.remote.backoff_s=0.05", "reward.remote.timeout_s=2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert url in err[0] and "GET /health failed 2 times" in err[0] and "serve-reward" in err[0]
    assert not out.exists()


def test_server_dying_mid_run_stops_with_a_checkpoint_and_resumes_to_the_same_result(tmp_path):
    # uninterrupted, in process
    ref, _ = _train("flat", tmp_path / "ref", "train.iterations=4", "train.save_every=1")
    # served by a process that crashes on its 4th score: eval_before + iterations 1, 2 answered, iteration 3 is not
    port = free_port()
    proc, url = serve("tests.remote_servers:redness_dies_after", port, env={"DIE_AFTER": "3"})
    args = [sys.executable, "-m", "diffusion_rl.cli", "train", "configs/diffusion/tiny_sd3_flat.yaml",
            f"output_dir={tmp_path / 'run'}", *_overrides(), f"reward.name={url}", "reward.remote.retries=2",
            "reward.remote.backoff_s=0.1", "reward.remote.timeout_s=5", "train.iterations=4", "train.save_every=1"]
    try:
        res = subprocess.run(args, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        stop(proc)
    err = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    assert len(err) == 1 and url in err[0] and "request" in err[0] and "failed 3 times" in err[0], err
    assert "checkpoint of iteration 2 saved" in err[0]
    assert load_checkpoint(tmp_path / "run" / "checkpoints")["iteration"] == 2
    # the server is back (same address, the plain reward): the same run resumes and finishes
    srv = make_server(REDNESS, port=port)  # in this process this time
    start_in_thread(srv)
    try:
        assert srv.url == url
        tr = DiffusionGRPOTrainer(_cfg("flat", tmp_path / "run", f"reward.name={url}", "reward.remote.retries=2",
                                      "reward.remote.backoff_s=0.1", "reward.remote.timeout_s=5", "train.iterations=4",
                                      "train.save_every=1"))
        out = tr.train(progress=False)
    finally:
        srv.shutdown()
        srv.server_close()
    assert out["error"] is None and out["stopped"] is None
    a, b = ref.adapter.trainable_state_dict(), load_checkpoint(tmp_path / "run" / "checkpoints")
    assert b["iteration"] == 4 and all(torch.equal(a[k], b["trainable"][k]) for k in a)
    ra = [r["reward/mean"] for r in read_jsonl(tmp_path / "ref" / "metrics.jsonl") if "reward/mean" in r]
    rb = [r["reward/mean"] for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "reward/mean" in r]
    assert ra == rb and len(ra) == 4


def _overrides():
    from .test_distributed import BASE, CONFIGS

    return [x for x in BASE if not x.startswith("reward.")] + CONFIGS["flat"][1]

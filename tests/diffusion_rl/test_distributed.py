"""Scale-out and faults of ``diffusion-rl train``: 2 processes (torchrun, gloo) match 1 process over the same global
batch (flat, BranchGRPO, tree x pool and lookahead@1), a 2-process checkpoint resumes in 1 process, SIGTERM saves and
a rerun resumes exactly, a raising reward is retried and then reported with its prompts."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from diffusion_rl.cli import main
from diffusion_rl.trainer import DiffusionGRPOTrainer, DiffusionRLConfig
from grpo.checkpoint import load_checkpoint
from grpo.config import load_config
from grpo.metrics import read_jsonl
from grpo.retry import RetryError

from ..torchrun_util import sigterm_two_ranks, torchrun
from .conftest import redness

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
# the closed-form stand-in reward, by import path, so that the CLI subprocesses need no rewards/ package
BASE = ["prompts.source=list", "prompts.prompts=[a red circle,a blue square,a green triangle,a red square]",
        "prompts.num_eval=4", "reward.name=tests.diffusion_rl.conftest:redness", "reward.retry_backoff_s=0",
        "model.tiny.with_vae=false", "train.log_images=false", "train.eval_steps=4", "train.save_every=2",
        "train.keep_last=3"]
CONFIGS = {
    # 2 prompts x 6 samples: the 12 samples split 6/6, timestep subsets and a KL term (tiny_sd3_flat.yaml)
    "flat": ("configs/diffusion/tiny_sd3_flat.yaml", ["sampler.num_steps=6", "grpo.group_size=6", "train.lr=0.003",
                                                     "train.updates_per_iter=2", "grpo.clip_low=0.2"]),
    # 2 trees (one per process) of 2 x 2 leaves, width pruning, path-probability fusion (tiny_sd3_branch.yaml)
    "branch": ("configs/diffusion/tiny_sd3_branch.yaml", ["sampler.num_steps=6", "branch.split_steps=[1,3]",
                                                         "branch.branch=[2]", "train.lr=0.003", "grpo.clip_low=0.2"]),
    # tree x pool: 2 trees of 4 leaves grown by an NVFP4 copy, the best and worst leaf's pruned tree regenerated
    "treepool": ("configs/diffusion/tiny_sd3_branch.yaml", ["sampler.num_steps=6", "branch.split_steps=[1,3]",
                                                           "branch.branch=[2]", "branch.width_prune=none",
                                                           "pool.enabled=true", "pool.pool_size=4",
                                                           "pool.train_size=2", "pool.quant.format=nvfp4",
                                                           "train.lr=0.003", "grpo.clip_low=0.2"]),
    # lookahead@1: 2 full-precision trees of 2 x 2 leaves whose first split keeps the best and worst of 4 NVFP4 previews
    "lookahead": ("configs/diffusion/tiny_sd3_branch.yaml", ["sampler.num_steps=6", "branch.split_steps=[1,3]",
                                                            "branch.branch=[2]", "branch.lookahead_candidates=4",
                                                            "pool.quant.format=nvfp4", "train.lr=0.003",
                                                            "grpo.clip_low=0.2"]),
}


def _cfg(name, out, *extra):
    path, over = CONFIGS[name]
    return load_config(DiffusionRLConfig, str(ROOT / path), [f"output_dir={out}", *BASE, *over, *extra])


def _run(name, out, *extra):
    tr = DiffusionGRPOTrainer(_cfg(name, out, *extra))
    return tr, tr.train(progress=False)


def _cli(nproc, name, out, *extra, timeout=240):
    path, over = CONFIGS[name]
    args = ["train", path, f"output_dir={out}", *BASE, *over, *extra]
    cmd = [sys.executable, "-m", "diffusion_rl.cli", *args] if nproc == 1 else \
        [*torchrun(nproc), "-m", "diffusion_rl.cli", *args]
    res = subprocess.run(cmd, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def _iter_rows(out):
    return [r for r in read_jsonl(Path(out) / "metrics.jsonl") if "reward/mean" in r]


@pytest.mark.parametrize("name", ["flat", "branch", "treepool", "lookahead"])
def test_two_processes_match_one_process_and_resume_in_one(tmp_path, name):
    one, _ = _run(name, tmp_path / "one", "train.iterations=3")  # checkpoints at 2 and 3
    _cli(2, name, tmp_path / "two", "train.iterations=2")
    a = load_checkpoint(tmp_path / "one" / "checkpoints" / "step_000002")
    b = load_checkpoint(tmp_path / "two" / "checkpoints")
    assert b["iteration"] == 2
    # same global credit (advantages per global row / node, rewards), same loss, same updated weights
    # (the rewards differ in the last bits only: a rank's denoiser batch holds other rows than one process's; the
    # advantages divide those differences by the group / per-depth reward std, ~1e-3 on this untrained tiny model)
    torch.testing.assert_close(b["last_iteration"]["rewards"], a["last_iteration"]["rewards"], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(b["last_iteration"]["advantages"], a["last_iteration"]["advantages"], atol=1e-4,
                               rtol=1e-4)
    assert a["last_iteration"]["advantages"].abs().sum() > 0
    r1, r2 = _iter_rows(tmp_path / "one")[:2], _iter_rows(tmp_path / "two")
    assert len(r2) == 2  # rank 0 alone logs
    for x, y in zip(r1, r2):
        for k in ("loss/objective", "reward/mean", "cost/nfe_rollout", "cost/backward"):
            assert y[k] == pytest.approx(x[k], abs=1e-5), k
    for k, v in a["trainable"].items():
        torch.testing.assert_close(b["trainable"][k], v, atol=1e-5, rtol=1e-5)
    assert max(float(v.abs().max()) for k, v in a["trainable"].items() if "lora_B" in k) > 0  # LoRA B starts at 0
    for k, v in a["optimizer"]["state"].items():
        torch.testing.assert_close(b["optimizer"]["state"][k]["exp_avg"], v["exp_avg"], atol=1e-5, rtol=1e-4)
    # the 2-process checkpoint resumes in 1 process and lands where the 1-process run did
    tr, res = _run(name, tmp_path / "two", "train.iterations=3")
    assert res["stopped"] is None and tr.iteration == 3
    final = one.adapter.trainable_state_dict()
    for k, v in tr.adapter.trainable_state_dict().items():
        torch.testing.assert_close(v, final[k], atol=1e-5, rtol=1e-5)


def test_world_size_must_split_the_batch(tmp_path, monkeypatch):
    from diffusion_rl import trainer as T
    from grpo.distributed import DistInfo

    monkeypatch.setattr(T, "init_distributed", lambda: DistInfo(0, 3, 0))
    with pytest.raises(ValueError, match="whole trees"):
        DiffusionGRPOTrainer(_cfg("branch", tmp_path), reward_fn=redness)
    with pytest.raises(ValueError, match="does not split evenly"):
        DiffusionGRPOTrainer(_cfg("flat", tmp_path, "grpo.group_size=4"), reward_fn=redness)


def test_sigterm_saves_exits_zero_and_resume_matches_uninterrupted(tmp_path):
    path, over = CONFIGS["flat"]
    out = tmp_path / "k"
    proc = subprocess.Popen([sys.executable, "-m", "diffusion_rl.cli", "train", path, f"output_dir={out}", *BASE, *over,
                             "train.iterations=100000", "train.save_every=100000"], env=ENV, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics = out / "metrics.jsonl"
    deadline = time.time() + 90
    while time.time() < deadline and proc.poll() is None and (not metrics.exists() or len(_iter_rows(out)) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, log[-3000:]
    assert "stopped by SIGTERM" in log
    state = load_checkpoint(out / "checkpoints")
    k = state["iteration"]
    assert k >= 3 and len(_iter_rows(out)) == k  # every finished iteration is logged and saved, nothing after
    resumed, res = _run("flat", out, f"train.iterations={k + 2}")
    assert res["stopped"] is None and len(_iter_rows(out)) == k + 2
    straight, _ = _run("flat", tmp_path / "s", f"train.iterations={k + 2}")
    s = straight.adapter.trainable_state_dict()
    for name, v in resumed.adapter.trainable_state_dict().items():
        assert torch.equal(v, s[name]), name


def _trainer(tmp_path, reward, **kw):
    cfg = _cfg("flat", tmp_path / "r", "train.iterations=1", "resume=false")
    for k, v in kw.items():
        setattr(cfg.reward, k, v)
    return DiffusionGRPOTrainer(cfg, reward_fn=reward)


def test_flaky_reward_is_retried(tmp_path):
    calls = {"n": 0}

    def flaky(batch):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("scorer unreachable")
        return redness(batch)

    tr = _trainer(tmp_path, flaky)
    s = tr.step()
    assert calls["n"] == 2 and s["cost/backward"] > 0 and s["skipped_updates"] == 0


def always_fails(batch):
    raise RuntimeError("reward model crashed")


def test_failing_reward_is_reported_with_its_prompts(tmp_path, capsys):
    calls = {"n": 0}

    def bad(batch):
        calls["n"] += 1
        always_fails(batch)

    tr = _trainer(tmp_path, bad, retries=1)
    with pytest.raises(RetryError, match="reward model crashed") as e:
        tr.step()
    assert calls["n"] == 2 and e.value.batch and set(e.value.batch) <= set(tr.prompts.pool)
    assert "reward 'bad' failed 2 times" in str(e.value) and all(repr(p) in str(e.value) for p in e.value.batch)
    # the CLI: a custom reward is probed on a small batch before the run (grpo.preflight), so one that always raises
    # stops at start (exit 2, one line naming it and its error) and writes nothing
    path, over = CONFIGS["flat"]
    assert main(["train", str(ROOT / path), f"output_dir={tmp_path / 'cli'}", *BASE, *over, "train.iterations=1",
                 "reward.name=tests.diffusion_rl.test_distributed:always_fails", "reward.retries=1"]) == 2
    err = capsys.readouterr().err
    assert "always_fails" in err and "reward model crashed" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "cli").exists()


def test_sigterm_under_torchrun_stops_every_rank_after_the_same_iteration(tmp_path):
    """torchrun forwards SIGTERM to its workers; they agree on the iteration to stop after, rank 0 saves, and the
    checkpoint resumes in one process. (torchrun itself exits non-zero after a SIGTERM: its agent re-raises the
    signal; the workers exit 0.)"""
    path, over = CONFIGS["branch"]
    out = tmp_path / "t"
    sigterm_two_ranks("diffusion_rl.cli", ["train", path, f"output_dir={out}", *BASE, *over, "train.iterations=100000",
                                           "train.save_every=100000"], out, _iter_rows, ENV, ROOT, timeout_s=90)
    k = load_checkpoint(out / "checkpoints")["iteration"]
    assert k >= 2 and len(_iter_rows(out)) == k
    tr, res = _run("branch", out, f"train.iterations={k + 1}")
    assert res["stopped"] is None and tr.iteration == k + 1


def test_keyed_noise_any_shard_reproduces_the_full_rollout(sd3):
    from diffusion_rl.branch import BranchConfig, tree_rollout
    from diffusion_rl.sampling import SamplerConfig, flat_rollout

    sc = SamplerConfig(num_steps=4, eta=1.0)
    prompts = ["a red circle", "a blue square"]
    full = flat_rollout(sd3, prompts, 3, sc, iteration=5, seed=7)
    parts = [flat_rollout(sd3, prompts, 3, sc, iteration=5, seed=7, rows=r) for r in (range(0, 2), range(2, 6))]
    assert torch.equal(torch.cat([p.records[0].x for p in parts]), full.records[0].x)  # the group straddles shards
    assert torch.equal(torch.cat([p.final_rows for p in parts]), full.final_rows)
    torch.testing.assert_close(torch.cat([p.final for p in parts]), full.final, atol=1e-5, rtol=1e-5)
    # keyed by iteration
    assert not torch.equal(flat_rollout(sd3, prompts, 3, sc, iteration=6, seed=7).final, full.final)
    tree = BranchConfig(enabled=True, split_steps=[1, 2], branch=[2]).make_tree(4)
    whole = tree_rollout(sd3, prompts, tree, sc, iteration=3, seed=7)
    second = tree_rollout(sd3, prompts, tree, sc, iteration=3, seed=7, prompt_ids=[1])
    L = tree.num_leaves
    assert torch.equal(second.final_rows, whole.final_rows[L:]) and second.final_prompt_idx.tolist() == [1] * L
    torch.testing.assert_close(second.final, whole.final[L:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(second.extra["edge_log_prob"], whole.extra["edge_log_prob"][1:], atol=1e-4, rtol=1e-5)

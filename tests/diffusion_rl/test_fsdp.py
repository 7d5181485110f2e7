"""``dist.strategy: fsdp`` (FSDP2 on CPU/gloo): a 2-process sharded run matches 1 process (hence 2-process DDP, which
test_distributed pins to 1 process at the same tolerance), its full checkpoint resumes in 1 process, and a full
checkpoint resumes into the sharded model. The MC-GRPO median pivot is masked out of the loss, so ranks hold
different row counts per record: one rank needs a pre-update old log-prob pass that the other does not, or has no
row at all, and runs zero-weight dummy passes to keep FSDP's collectives in step."""

import torch

from grpo.checkpoint import load_checkpoint

from .test_distributed import _cli, _iter_rows, _run

# 1 prompt per iteration; median advantages mask the pivot; EMA kept (gathered / sharded with the weights)
FSDP = ["train.prompts_per_iter=1", "grpo.advantage=median", "train.ema_decay=0.5", "train.eval_steps=2"]


def _close(a, b, atol=1e-5):
    assert a.keys() == b.keys()
    for k, v in a.items():
        torch.testing.assert_close(b[k], v, atol=atol, rtol=1e-5)


def _same_checkpoint(a, b):
    _close(a["trainable"], b["trainable"])
    _close(a["ema"], b["ema"])
    assert max(float(v.abs().max()) for k, v in a["trainable"].items() if "lora_B" in k) > 0  # LoRA B starts at 0
    assert a["optimizer"]["state"].keys() == b["optimizer"]["state"].keys()
    for k, v in a["optimizer"]["state"].items():
        torch.testing.assert_close(b["optimizer"]["state"][k]["exp_avg"], v["exp_avg"], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(b["optimizer"]["state"][k]["exp_avg_sq"], v["exp_avg_sq"], atol=1e-8, rtol=1e-4)
    assert [g["params"] for g in b["optimizer"]["param_groups"]] == [g["params"]
                                                                     for g in a["optimizer"]["param_groups"]]


def test_fsdp_two_processes_match_one_process_and_resume_in_one(tmp_path):
    """G=4 split 2/2: the rank holding the pivot re-computes old log-probs for the second chunk, the other runs a
    dummy."""
    g = ["grpo.group_size=4", *FSDP]
    one, _ = _run("flat", tmp_path / "one", "train.iterations=3", *g)  # checkpoints at 2 and 3
    log = _cli(2, "flat", tmp_path / "two", "train.iterations=2", "dist.strategy=fsdp", *g).stdout
    assert "2 process(es)" in log
    a = load_checkpoint(tmp_path / "one" / "checkpoints" / "step_000002")
    b = load_checkpoint(tmp_path / "two" / "checkpoints")
    assert b["iteration"] == 2 and b["config"]["dist"]["strategy"] == "fsdp"
    _same_checkpoint(a, b)
    for x, y in zip(_iter_rows(tmp_path / "one")[:2], _iter_rows(tmp_path / "two"), strict=True):
        for k in ("loss/objective", "reward/mean", "cost/backward", "grad_norm"):
            assert abs(y[k] - x[k]) <= 1e-5, k
    # the sharded run's full checkpoint resumes in 1 process (any strategy: dist.* is not a resume mismatch)
    tr, res = _run("flat", tmp_path / "two", "train.iterations=3", *g)
    assert res["stopped"] is None and tr.iteration == 3
    _close(one.adapter.trainable_state_dict(), tr.adapter.trainable_state_dict())


def test_fsdp_resumes_a_full_checkpoint_sharded(tmp_path):
    """G=2 split 1/1: the pivot's rank has no trained row at all and runs dummy forward/backward passes."""
    g = ["grpo.group_size=2", *FSDP]
    _run("flat", tmp_path / "one", "train.iterations=3", *g)
    _run("flat", tmp_path / "two", "train.iterations=2", *g)  # a 1-process (unsharded) checkpoint at 2
    log = _cli(2, "flat", tmp_path / "two", "train.iterations=3", "dist.strategy=fsdp", *g).stdout
    assert "resumed from" in log
    a = load_checkpoint(tmp_path / "one" / "checkpoints" / "step_000003")
    b = load_checkpoint(tmp_path / "two" / "checkpoints")
    assert b["iteration"] == 3
    _same_checkpoint(a, b)

"""``vla-rl train`` scale-out options: ``dist.strategy=fsdp`` (FSDP2 on CPU/gloo) with 2 processes matches 1 process
(hence 2-process DDP, which test_distributed pins to 1 process at the same tolerance), its full checkpoint resumes
sharded (Adam state sharded onto the ranks) and in 1 process; ``rl.grad_accum`` (micro-batches, one optimizer step per
minibatch) gives the update of no accumulation.

The tiny config (test_distributed.TINY) splits 6 episodes 3/3 over the ranks with minibatches of 8 global rows, so a
rank often holds fewer rows of a minibatch than the other and, with ``rl.grad_accum=4``, empty micro-batches: under
FSDP it then runs zero-weight forward/backward passes to keep the collectives in step."""

import torch

from grpo.checkpoint import load_checkpoint
from grpo.fsdp import submodule_units
from vla_rl.trainer import VLARLTrainer

from .test_distributed import _cfg, _cli2, _rl_rows, assert_same_weights


def _ck(out, step):
    return load_checkpoint(out / "checkpoints" / f"step_{step:06d}")


def test_fsdp_two_processes_match_one_process_grad_accum_and_resume_in_one(tmp_path):
    one = VLARLTrainer(_cfg(tmp_path / "one", "rl.iterations=4"), quiet=True)
    one.train()
    # 2 processes, sharded, with micro-batches (empty ones on a rank -> dummy passes)
    log = _cli2(tmp_path / "two", "rl.iterations=2", "dist.strategy=fsdp", "rl.grad_accum=4").stdout
    assert "sharded over 2 processes" in log
    for step in (1, 2):
        a, b = _ck(tmp_path / "one", step), _ck(tmp_path / "two", step)
        assert b["config"]["dist"]["strategy"] == "fsdp"
        torch.testing.assert_close(b["last_iteration"]["advantages"], a["last_iteration"]["advantages"], atol=1e-5,
                                   rtol=1e-5)
        assert_same_weights(b["model"], a["model"], f"after iteration {step}")
        # the optimizer state is gathered FULL, in the unsharded optimizer.state_dict() format
        assert b["optimizer"]["state"].keys() == a["optimizer"]["state"].keys()
        assert [g["params"] for g in b["optimizer"]["param_groups"]] == [g["params"]
                                                                         for g in a["optimizer"]["param_groups"]]
        for k, v in a["optimizer"]["state"].items():
            torch.testing.assert_close(b["optimizer"]["state"][k]["exp_avg"], v["exp_avg"], atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(b["optimizer"]["state"][k]["exp_avg_sq"], v["exp_avg_sq"], atol=1e-8, rtol=1e-4)
    assert _ck(tmp_path / "one", 2)["last_iteration"]["advantages"].abs().sum() > 0  # a real update is compared
    for x, y in zip(_rl_rows(tmp_path / "one")[:2], _rl_rows(tmp_path / "two"), strict=True):
        assert ("loss/loss" in x) == ("loss/loss" in y)
        for k in ("loss/loss", "loss/rows", "loss/clip_frac", "loss/grad_norm"):
            assert k not in x or abs(y[k] - x[k]) <= 1e-5, k
    # the full checkpoint (with Adam state now) resumes sharded: the optimizer state is sharded onto the ranks
    log = _cli2(tmp_path / "two", "rl.iterations=3", "dist.strategy=fsdp").stdout
    assert "resumed from" in log
    assert_same_weights(_ck(tmp_path / "two", 3)["model"], _ck(tmp_path / "one", 3)["model"], "after a sharded resume")
    # the sharded run's full checkpoint resumes in 1 process (no strategy, no accumulation) where one process lands
    res = VLARLTrainer(_cfg(tmp_path / "two", "rl.iterations=4"), quiet=True).train()
    assert res["resumed"] and res["iterations"] == 4 and res["world_size"] == 1
    assert_same_weights(res["policy"].state_dict(), one.policy.state_dict(), "after resuming in 1 process")
    # gradient accumulation alone, 1 process: redo iteration 2 of the 1-process run from its checkpoint of iteration 1
    # with 3 micro-batches per minibatch (same SFT start, same rollout; the same update within fp tolerance)
    one_ck, ref = tmp_path / "one" / "checkpoints", tmp_path / "ref"
    ref.mkdir()
    for step in (2, 3, 4):
        (one_ck / f"step_{step:06d}").rename(ref / f"step_{step:06d}")
    n_rows = len(_rl_rows(tmp_path / "one"))
    res = VLARLTrainer(_cfg(tmp_path / "one", "rl.iterations=2", "rl.grad_accum=3"), quiet=True).train()
    assert res["resumed"] and res["iterations"] == 2
    assert_same_weights(_ck(tmp_path / "one", 2)["model"], load_checkpoint(ref / "step_000002")["model"],
                        "with rl.grad_accum=3")
    x, y = _rl_rows(tmp_path / "one")[1], _rl_rows(tmp_path / "one")[n_rows]
    assert y["loss/rows"] == x["loss/rows"] > 0
    for k in ("loss/loss", "loss/clip_frac", "loss/grad_norm"):
        assert abs(y[k] - x[k]) <= 1e-5, k


def test_fsdp_units_of_the_small_vla():
    from .test_trainer_e2e import tiny_policy_and_pool

    _, pool, policy = tiny_policy_and_pool()
    pool.close()
    units = submodule_units(policy)
    assert units[-1] not in ("", None) and "head" in units and "fuse" in units
    if hasattr(policy, "image_encoder"):
        assert "image_encoder" in units and "image_encoder.convs.0" in units
        assert units.index("image_encoder.convs.0") < units.index("image_encoder")  # children before parents

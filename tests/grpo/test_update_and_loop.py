"""grpo.update (scaled backward, zero-weight passes, guarded step) and grpo.loop (resume, cadence, graceful stop),
tested directly in one process; the 2-process behaviour is covered by tests/grpo/test_faults_and_distributed.py and
the frontends' distributed tests."""

import os
import signal

import pytest
import torch

from grpo.checkpoint import save_checkpoint
from grpo.distributed import DistInfo
from grpo.loop import LoopResult, no_phase, resume_latest, run_loop
from grpo.train_step import NonFiniteError, NonFiniteGuard
from grpo.update import DistributedUpdate, agree_on_skip


def _linear(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Linear(3, 1)


def test_scale_is_the_share_of_the_global_rows_times_the_world_size():
    m = _linear()
    one = DistributedUpdate(m.parameters(), torch.optim.SGD(m.parameters(), lr=0.1), NonFiniteGuard(), 1.0)
    two = DistributedUpdate(m.parameters(), torch.optim.SGD(m.parameters(), lr=0.1), NonFiniteGuard(), 1.0,
                            info=DistInfo(rank=1, world_size=2))
    assert one.world_size == 1 and two.world_size == 2
    assert one.scale(3, 4) == 0.75 and two.scale(3, 4) == 1.5  # (n_k / n) * N
    assert one.scale(0, 0) == 1.0 and two.scale(0, 0) == 2.0  # no global rows: the loss as it is
    # an even split over N ranks weights every rank's mean loss by exactly 1
    assert two.scale(8, 16) == 1.0


def test_accumulated_backward_equals_the_mean_over_all_rows():
    """Micro-batches weighted by local/global rows give the gradient of the mean over all of them."""
    x, y = torch.randn(10, 3, generator=torch.Generator().manual_seed(1)), torch.randn(10, 1)
    m_ref, m = _linear(), _linear()
    ((m_ref(x) - y) ** 2).mean().backward()
    upd = DistributedUpdate(m.parameters(), torch.optim.SGD(m.parameters(), lr=0.1), NonFiniteGuard(), 1e9)
    for part in (slice(0, 3), slice(3, 10)):
        n = x[part].shape[0]
        assert upd.backward(((m(x[part]) - y[part]) ** 2).mean(), n, 10) == n / 10
    for a, b in zip(m.parameters(), m_ref.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-6)
    st = upd.step()
    assert not st.skipped and st.grad_norm > 0
    assert all(p.grad is None for p in m.parameters())  # zeroed after the step


def test_nonfinite_loss_is_not_backpropagated_and_the_step_is_skipped():
    m = _linear()
    before = [p.detach().clone() for p in m.parameters()]
    guard = NonFiniteGuard(max_consecutive=2)
    upd = DistributedUpdate(m.parameters(), torch.optim.SGD(m.parameters(), lr=0.1), guard, 1.0)
    upd.backward(m(torch.ones(1, 3)).sum() * float("nan"))
    assert guard.pending == "non-finite loss" and all(p.grad is None for p in m.parameters())
    st = upd.step()
    assert st.skipped and st.reason == "non-finite loss" and guard.pending is None and guard.total_skipped == 1
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), before))
    upd.backward(m(torch.ones(1, 3)).sum() * float("inf"))
    with pytest.raises(NonFiniteError, match="2 consecutive updates skipped"):
        upd.step()


def test_zero_weight_pass_runs_only_under_fsdp_and_counts_are_local_without_it():
    m = _linear()
    calls = []

    def loss():
        calls.append(1)
        return m(torch.ones(1, 3)).sum()

    ddp = DistributedUpdate(m.parameters(), torch.optim.SGD(m.parameters(), lr=0.1), NonFiniteGuard(), 1.0)
    assert not ddp.zero_weight_pass(loss) and not calls and ddp.stand_in_rows == 0
    assert ddp.lockstep([0, 2, 1]) == [0.0, 2.0, 1.0] and ddp.global_sum([1, 2]) == [1.0, 2.0]
    assert ddp.global_max([3]) == [3.0] and ddp.mean_over_ranks([0.5]) == [0.5]
    fsdp = DistributedUpdate(m.parameters(), torch.optim.SGD(m.parameters(), lr=0.1), NonFiniteGuard(), 1.0, fsdp=True)
    assert fsdp.stand_in_rows == 1
    assert not fsdp.zero_weight_pass(loss, others_have_rows=False) and not calls
    assert fsdp.zero_weight_pass(loss) and calls == [1]
    assert all(torch.equal(p.grad, torch.zeros_like(p)) for p in m.parameters())  # ran, with weight 0
    # under FSDP a non-finite loss still runs a backward (of nan_to_num(loss)): it is a collective; the step is skipped
    m.zero_grad(set_to_none=True)
    fsdp.backward(m(torch.ones(1, 3)).sum() * float("nan"))
    assert fsdp.guard.pending == "non-finite loss" and all(p.grad is not None for p in m.parameters())
    assert fsdp.step().skipped


def test_agree_on_skip_in_one_process():
    g = NonFiniteGuard()
    assert not agree_on_skip(g) and g.pending is None
    g.check("reward", torch.tensor([float("nan")]))
    assert agree_on_skip(g) and g.pending == "non-finite reward"


def _counting_loop(tmp_path, total, start=0, **kw):
    log = {"steps": [], "saves": [], "evals": [], "phases": []}
    done = [start]

    def step(phase):
        phase("rollout")
        log["phases"].append("rollout")
        done[0] += 1
        log["steps"].append(done[0])
        return {"x": float(done[0])}

    res = run_loop(step, start, total, save=lambda: log["saves"].append(done[0]), progress=False,
                   evaluate=lambda i: log["evals"].append(i), postfix=lambda s: {"x": s["x"]}, **kw)
    return res, log


def test_run_loop_cadence(tmp_path):
    res, log = _counting_loop(tmp_path, 7, save_every=3, eval_every=2)
    assert isinstance(res, LoopResult) and res.stopped is None and res.last == {"x": 7.0}
    assert log["steps"] == list(range(1, 8))
    assert log["evals"] == [2, 4, 6]  # not after the last iteration (the caller's final evaluation)
    assert log["saves"] == [3, 6, 7]  # and after the last one (save_last)
    res, log = _counting_loop(tmp_path, 7, start=4, save_every=3, eval_every=0, save_last=False)
    assert log["steps"] == [5, 6, 7] and log["saves"] == [6] and log["evals"] == []
    res, log = _counting_loop(tmp_path, 3, start=3, save_every=1)
    assert res.last == {} and log["steps"] == [] and log["saves"] == []
    no_phase("anything")  # the default phase callback accepts any label


def test_run_loop_stops_on_a_signal_after_saving(tmp_path, capsys):
    saves = []

    def step(phase):
        if len(saves) == 0 and step.n == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # handled by the loop: finish this iteration, save, stop
        step.n += 1
        return {}
    step.n = 0
    res = run_loop(step, 0, 10, save=lambda: saves.append(step.n), save_every=100, progress=False)
    assert res.stopped == "SIGTERM" and saves == [2]
    assert "stopped by SIGTERM after iteration 2; checkpoint saved" in capsys.readouterr().out


def test_resume_latest(tmp_path):
    loaded = []
    assert resume_latest(tmp_path / "ck", True, loaded.append) is None and not loaded
    save_checkpoint(tmp_path / "ck", 3, {"w": {"a": torch.zeros(1)}})
    assert resume_latest(tmp_path / "ck", False, loaded.append) is None and not loaded
    path = resume_latest(tmp_path / "ck", True, loaded.append)
    assert path is not None and path.name == "step_000003" and loaded == [path]


def test_demo_on_two_ranks_stops_together_after_a_sigterm(tmp_path):
    """grpo.demo under torchrun: SIGTERM reaches both ranks; they agree (run_loop's any_rank) to stop after the same
    iteration, rank 0 alone reports it, and the checkpoint holds every logged iteration."""
    from pathlib import Path

    from grpo.checkpoint import load_checkpoint
    from grpo.metrics import read_jsonl

    from ..torchrun_util import sigterm_two_ranks

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "k"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    args = ["toy", "configs/grpo/toy_flow.yaml", f"output_dir={out}", "train.iterations=100000",
            "model.pretrain_steps=100", "train.eval_samples=64", "train.save_every=1000"]
    sigterm_two_ranks("diffusion_rl.cli", args, out, lambda o: read_jsonl(o / "metrics.jsonl"), env, root)
    state = load_checkpoint(out / "checkpoints")
    assert state["iteration"] >= 2 and len(read_jsonl(out / "metrics.jsonl")) == state["iteration"]

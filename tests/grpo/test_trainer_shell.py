"""grpo.minibatch (the update's steps and passes, global weighting) and grpo.trainer_base / grpo.config's resume keys
(the loop settings both frontends share), in one process; the 2-process and FSDP behaviour is covered by the
frontends' distributed tests (tests/*/test_distributed.py, test_fsdp.py)."""

import pytest
import torch

from diffusion_rl.config import DiffusionRLConfig, TrainConfig
from grpo.config import check_resume_config, config_to_dict, resume_free_keys
from grpo.minibatch import Minibatches, local_index, local_minibatches
from grpo.train_step import NonFiniteGuard
from grpo.trainer_base import LoopConfig
from grpo.update import DistributedUpdate
from vla_rl.config import RLConfig, VLARLConfig


def _model_and_update():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 1)
    return m, DistributedUpdate(m.parameters(), torch.optim.SGD(m.parameters(), lr=0.1), NonFiniteGuard(), 1e9)


def test_minibatches_give_the_gradient_of_the_mean_over_each_step():
    """Passes weighted by their share of the step: the applied update equals one SGD step on the mean over the step's
    rows; an empty pass runs nothing without FSDP, a step without rows anywhere is skipped."""
    x = torch.randn(10, 3, generator=torch.Generator().manual_seed(1))
    y = torch.randn(10, 1, generator=torch.Generator().manual_seed(2))
    m, upd = _model_and_update()
    ref = torch.nn.Linear(3, 1)
    ref.load_state_dict(m.state_dict())
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    groups = [[torch.arange(0, 3), torch.arange(3, 7), torch.arange(0)], [torch.arange(0)], [torch.arange(7, 10)]]
    for rows in (torch.arange(0, 7), torch.arange(7, 10)):
        opt.zero_grad()
        ((ref(x[rows]) - y[rows]) ** 2).mean().backward()
        opt.step()

    def loss(rows):
        return ((m(x[rows]) - y[rows]) ** 2).mean()

    batches = Minibatches(upd, lambda rows: (float(len(rows)),), stand_in=lambda rows: pytest.fail("no FSDP here"))
    seen = []
    for step in batches.steps(groups):
        for mb in step:
            seen.append((step.index, len(mb.item), mb.share, mb.first))
            mb.backward(loss(mb.item))
        step.apply()
    assert seen == [(0, 3, 3 / 7, True), (0, 4, 4 / 7, True), (2, 3, 1.0, False)]  # step 1 had no rows: skipped
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_local_minibatches_keep_this_ranks_rows_in_the_global_order():
    local_of = local_index(torch.tensor([4, 1, 2]), 6)  # this rank holds global rows 4, 1, 2
    assert local_of.tolist() == [-1, 1, 2, -1, 0, -1]
    mbs = local_minibatches(torch.tensor([5, 4, 0, 2, 1, 3]), 2, local_of)
    assert [[m.tolist() for m in mb] for mb in mbs] == [[[0]], [[2]], [[1]]]
    order = torch.tensor([1, 4, 2, 0])  # rl.grad_accum=2: each minibatch's local rows in 2 micro-batches, in order
    split = local_minibatches(order, 4, local_index(torch.tensor([1, 4, 2]), 5), accum=2)
    assert [[m.tolist() for m in mb] for mb in split] == [[[0, 1], [2]]]


def test_both_frontends_share_the_loop_settings_and_their_resume_keys():
    assert issubclass(TrainConfig, LoopConfig) and issubclass(RLConfig, LoopConfig)
    d = TrainConfig(iterations=10, lr=1e-3, lr_schedule="cosine", lr_min_ratio=0.1)  # a schedule for diffusion too
    assert d.lr_at(0) == pytest.approx(1e-3) and d.lr_at(10) == pytest.approx(1e-4)
    with pytest.raises(ValueError, match=r"rl\.lr_min_ratio must be in \[0, 1\]"):
        RLConfig(lr_min_ratio=2.0)
    with pytest.raises(ValueError, match=r"train\.save_every must be >= 1"):
        TrainConfig(save_every=0)
    assert set(resume_free_keys(DiffusionRLConfig)) == {"resume", "train.iterations", "train.eval_every",
                                                         "train.save_every", "reward.retries",
                                                         "reward.retry_backoff_s", "dist"}
    assert set(resume_free_keys(VLARLConfig)) == {"resume", "rl.iterations", "rl.eval_every", "rl.save_every",
                                                   "rl.num_videos", "rl.grad_accum", "dist", "device"}


def test_resume_check_ignores_free_keys_and_keys_added_since_at_their_default():
    saved = config_to_dict(DiffusionRLConfig())
    now = DiffusionRLConfig(train=TrainConfig(iterations=99, save_every=3))
    check_resume_config(saved, now, "ckpt")  # free on resume: accepted
    del saved["train"]["lr_schedule"]  # a checkpoint written before the key existed
    check_resume_config(saved, DiffusionRLConfig(), "ckpt")
    with pytest.raises(ValueError, match=r"config differs in train\.lr_schedule: 'constant' != 'cosine'"):
        check_resume_config(saved, DiffusionRLConfig(train=TrainConfig(lr_schedule="cosine")), "ckpt")
    with pytest.raises(ValueError, match=r"train\.lr: 0\.0003 != 0\.001"):
        check_resume_config(saved, DiffusionRLConfig(train=TrainConfig(lr=1e-3)), "ckpt")

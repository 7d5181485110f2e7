"""``dist.mixed_precision: bf16`` for ``vla-rl train``: the network forwards run under bf16 autocast, weights, optimizer
state and log-probs stay fp32, the rollout's log-probs are recomputed exactly by the update's path, and the default
``fp32`` leaves the fp32 numerics untouched."""

import math

import pytest
import torch

from grpo.config import ConfigError, build_config, load_config
from grpo.fsdp import DistConfig
from grpo.metrics import read_jsonl
from vla_rl.trainer import VLARLConfig, VLARLTrainer

from .test_heads_policy import make_batch, make_policy
from .test_trainer_e2e import TINY

# measured on CPU (torch 2.13, OMP_NUM_THREADS=1; oneDNN bf16 GEMMs accumulate in fp32 and round the output to bf16):
# the recomputation over other minibatch compositions (single rows, shuffled minibatches, the whole batch) reproduced
# the rollout's log-probs bit for bit, max |ratio - 1| = 0, for the flow head (noise_mode all / one) and the Gaussian
# head, here and on the trainer's rollouts (71 decision points; also the 2-process FSDP update at lr 0: ratio 1.0,
# approx_kl 0). An fp32 run's gap is ~2e-6 (fp32 accumulation order varies with the batch). The bound is kept tight on
# purpose: a backend whose bf16 rounding flips with the batch composition would fail here visibly
RATIO_TOL = 1e-6


def _sub(batch: dict, idx: torch.Tensor) -> dict:
    return {k: (v[idx] if isinstance(v, torch.Tensor) else [v[i] for i in idx.tolist()]) for k, v in batch.items()}


def test_bad_value_and_diffusion_rejects_bf16():
    with pytest.raises(ConfigError, match="'dist.mixed_precision' expects one of 'fp32', 'bf16', got 'fp16'"):
        build_config(DistConfig, {"mixed_precision": "fp16"}, "dist")
    with pytest.raises(ValueError, match="must be one of"):
        make_policy().set_mixed_precision("bfloat16")
    from diffusion_rl.trainer import DiffusionGRPOTrainer, DiffusionRLConfig

    cfg = DiffusionRLConfig()
    cfg.dist.mixed_precision = "bf16"
    with pytest.raises(ValueError, match="model.dtype"):
        DiffusionGRPOTrainer(cfg)


@pytest.mark.parametrize("head,mode", [("flow", "all"), ("flow", "one"), ("gaussian", "all")])
def test_bf16_forward_fp32_logprobs_and_exact_recompute(head, mode):
    ref = make_policy(head, mode)
    p = make_policy(head, mode)
    p.set_mixed_precision("fp32")  # the default: bit-identical to a policy never switched
    batch = make_batch(8)
    a = ref.sample_chunk(batch, generator=torch.Generator().manual_seed(3))
    b = p.sample_chunk(batch, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.logp, b.logp) and torch.equal(a.actions, b.actions)

    p.set_mixed_precision("bf16")
    seen = []
    hooks = [m.register_forward_hook(lambda m, i, o: seen.append(o.dtype)) for m in (p.fuse, p.head.net)]
    s = p.sample_chunk(batch, generator=torch.Generator().manual_seed(3))
    assert seen and all(d == torch.bfloat16 for d in seen)  # the networks really run in bf16
    assert s.logp.dtype == s.actions.dtype == torch.float32
    assert not torch.equal(s.actions, a.actions)  # bf16 changes the numerics (it is not silently off)
    worst = 0.0
    for idx in [torch.arange(8), torch.tensor([7, 2, 5]),
                torch.tensor([0, 1, 3, 4, 6])] + list(torch.arange(8)[:, None]):
        lp = p.chunk_log_prob(_sub(batch, idx), {k: v[idx] for k, v in s.record.items()})
        assert lp.logp.dtype == torch.float32
        worst = max(worst, float((lp.logp.detach() - s.logp[idx]).exp().sub(1).abs()[s.step_mask[idx]].max()))
    assert worst <= RATIO_TOL, worst
    lp.logp[lp.step_mask].sum().backward()
    assert all(q.dtype == torch.float32 and (q.grad is None or q.grad.dtype == torch.float32) for q in p.parameters())
    for h in hooks:
        h.remove()


def test_bf16_training_run(tmp_path):
    """SFT + 2 GRPO iterations under bf16 autocast: finite losses, fp32 weights and AdamW state, bf16 activations,
    and the rollout's stored log-probs recomputed within RATIO_TOL over the update's minibatch compositions."""
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml",
                      TINY + [f"output_dir={tmp_path}", "rl.iterations=2", "rl.eval_episodes=2", "rl.num_videos=0",
                              "sft.steps=10", "rl.inner_epochs=1", "dist.mixed_precision=bf16"])
    tr = VLARLTrainer(cfg, quiet=True)
    seen = []
    for m in (tr.policy.image_encoder.convs[0], tr.policy.fuse, tr.policy.head.net):
        m.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    res = tr.train()
    assert res["iterations"] == 2
    assert seen and set(seen) == {torch.bfloat16}
    rows = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "rollout/success_rate" in r]
    assert len(rows) == 2 and all(math.isfinite(r["reward/mean"]) for r in rows)
    # the ratio before an update: recompute a rollout's log-probs as the update does (shuffled minibatches of
    # rl.minibatch_size rows, plus the whole batch and single rows)
    _, _, batch = tr.rollout(5)
    m = batch.old_logp.shape[0]
    perm = torch.randperm(m, generator=torch.Generator().manual_seed(0))
    worst = 0.0
    with torch.no_grad():
        for mb in list(perm.split(cfg.rl.minibatch_size)) + [torch.arange(m), torch.tensor([0]), torch.tensor([m - 1])]:
            lp = tr.policy.chunk_log_prob(batch.select(mb), {k: v[mb] for k, v in batch.record.items()})
            ratio = (lp.logp - batch.old_logp[mb]).exp()[batch.step_mask[mb]]
            worst = max(worst, float((ratio - 1).abs().max()))
    assert worst <= RATIO_TOL, worst
    # the update itself (its own minibatches, autocast forward + fp32 loss, backward): with lr 0 every minibatch
    # sees ratio 1 (the iterations above may have kept no group: tiny SFT, all episodes fail alike)
    n_ep = len(batch.episodes)
    adv = torch.linspace(-1, 1, n_ep)
    keep = torch.ones(n_ep, dtype=torch.bool)
    before = {k: v.clone() for k, v in tr.policy.state_dict().items()}
    for g in tr.optimizer.param_groups:
        g["lr"] = 0.0
    st = tr.update(batch, adv, keep, 5)
    assert st["loss/rows"] == m and math.isfinite(st["loss/loss"])
    assert abs(st["loss/ratio"] - 1) <= RATIO_TOL and st["loss/clip_frac"] == 0.0
    for g in tr.optimizer.param_groups:
        g["lr"] = cfg.rl.lr
    st = tr.update(batch, adv, keep, 6)
    assert math.isfinite(st["loss/loss"]) and math.isfinite(st["loss/grad_norm"]) and st["loss/grad_norm"] > 0
    assert any(not torch.equal(before[k], v) for k, v in tr.policy.state_dict().items())
    assert all(p.dtype == torch.float32 for p in tr.policy.parameters())
    assert all(v.dtype == torch.float32 for s in tr.optimizer.state.values() for v in s.values()
               if v.is_floating_point())

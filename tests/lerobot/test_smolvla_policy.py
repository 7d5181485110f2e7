"""LeRobot's SmolVLA as a vla-rl TrainablePolicy: SDE log-probs, recomputation, SFT loss, LeRobot save/load."""

import torch

from vla_rl.policies import TrainablePolicy, load_policy
from vla_rl.policies.lerobot import LeRobotVLA

from .helpers import tiny_smolvla


def _batch(b=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"observation.images.agentview": torch.randint(0, 256, (b, 64, 64, 3), generator=g, dtype=torch.uint8),
            "observation.state": torch.randn(b, 8, generator=g), "task": ["reach the red ball"] * b}


def test_lerobot_smolvla_is_a_trainable_policy(tmp_path):
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    pol = tiny_smolvla(tmp_path)
    assert isinstance(pol, LeRobotVLA) and isinstance(pol, TrainablePolicy)
    assert isinstance(pol.policy, SmolVLAPolicy)
    assert pol.tokens_per_chunk == 4


def test_recomputed_log_probs_equal_the_rollout_bit_for_bit(tmp_path):
    pol = tiny_smolvla(tmp_path)
    pol.set_state_normalization(torch.linspace(-1, 1, 8), torch.linspace(0.5, 2, 8))
    batch = _batch()
    gens = [torch.Generator().manual_seed(10 + i) for i in range(3)]  # per-row generators, as rollouts use
    s = pol.sample_chunk(batch, stochastic=True, generator=gens)
    assert s.actions.shape == (3, 4, 4) and s.logp.shape == (3, 4) and bool(s.step_mask.all())
    assert s.record["chain"].shape == (3, 5, 4, 4)
    pol.train()
    lp = pol.chunk_log_prob(batch, s.record)
    assert torch.equal(lp.logp.detach(), s.logp)  # ratio exactly 1
    assert torch.equal(torch.exp(lp.logp - s.logp), torch.ones_like(s.logp))
    lp.logp.sum().backward()  # gradients reach the action expert (the VLM is frozen: train_expert_only)
    grads = [p.grad for n, p in pol.named_parameters() if "lm_expert" in n and p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)
    # a row's sample depends only on its own generator
    s1 = pol.sample_chunk({k: v[1:2] for k, v in batch.items()}, generator=[torch.Generator().manual_seed(11)])
    torch.testing.assert_close(s1.actions, s.actions[1:2], atol=1e-5, rtol=0)


def test_one_step_noise_mode_and_deterministic_chunk(tmp_path):
    pol = tiny_smolvla(tmp_path)
    pol.cfg.flow.noise_mode = "one"
    s = pol.sample_chunk(_batch(), generator=torch.Generator().manual_seed(0))
    assert (s.step_mask.sum(1) == 1).all()
    assert torch.equal(pol.chunk_log_prob(_batch(), s.record).logp.detach(), s.logp)
    a1 = pol.predict_action_chunk(_batch(), generator=torch.Generator().manual_seed(5))
    a2 = pol.predict_action_chunk(_batch(), generator=torch.Generator().manual_seed(5))
    assert torch.equal(a1, a2)
    pol.reset()
    first = pol.select_action(_batch(), generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(first, a1[:, 0])


def test_sft_loss_backward(tmp_path):
    pol = tiny_smolvla(tmp_path)
    b = _batch()
    b["action"] = torch.rand(3, 4, 4) * 2 - 1
    b["action_is_pad"] = torch.zeros(3, 4, dtype=torch.bool)
    loss, info = pol.forward(b)
    loss.backward()
    assert torch.isfinite(loss) and info["loss"] > 0


def test_saved_in_lerobot_layout_and_reloaded_by_lerobot_to_equal_actions(tmp_path):
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    pol = tiny_smolvla(tmp_path)
    pol.set_state_normalization(torch.linspace(-1, 1, 8), torch.linspace(0.5, 2, 8))
    out = pol.save_pretrained(tmp_path / "saved")
    for f in ("config.json", "model.safetensors", "policy_preprocessor.json", "policy_postprocessor.json"):
        assert (out / f).is_file(), f
    batch = _batch(2)
    noise = torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(3))
    # lerobot's own loader and processors
    theirs = SmolVLAPolicy.from_pretrained(str(out))
    pre, post = make_pre_post_processors(theirs.config, pretrained_path=str(out))
    lb = {k: (v.permute(0, 3, 1, 2).float() / 255 if k.startswith("observation.images") else v)
          for k, v in batch.items()}
    a_theirs = post(theirs.predict_action_chunk(pre(lb), noise=noise.clone()))
    a_ours = post(pol.policy.predict_action_chunk(pol._pre(batch), noise=noise.clone()))
    torch.testing.assert_close(a_theirs, a_ours, atol=0, rtol=0)
    # and through vla-rl's loader: the same deterministic chunk
    again = load_policy(out)
    g = lambda: torch.Generator().manual_seed(7)  # noqa: E731
    torch.testing.assert_close(again.predict_action_chunk(batch, generator=g()),
                               pol.predict_action_chunk(batch, generator=g()),
                               atol=0, rtol=0)


def test_dry_run_memory_line_from_the_checkpoint_header(tmp_path):
    import re

    from vla_rl.policies.factory import checkpoint_memory

    pol = tiny_smolvla(tmp_path)
    out = pol.save_pretrained(tmp_path / "saved")
    cfg = pol.cfg
    cfg.path = str(out)
    line = checkpoint_memory(cfg)
    total = sum(p.numel() for p in pol.policy.parameters())
    trained_lr = sum(p.numel() for n, p in pol.policy.named_parameters() if ".vlm." not in n)
    m = re.search(r"([0-9.]+) M parameters \(([0-9.]+) M trained\)", line)
    assert m and abs(float(m.group(1)) - total / 1e6) < 0.05 and abs(float(m.group(2)) - trained_lr / 1e6) < 0.05

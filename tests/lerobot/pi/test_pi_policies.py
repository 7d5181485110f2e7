"""LeRobot's pi0 and pi0.5 (toy size, vla_rl.policies.lerobot_tiny_pi) as vla-rl TrainablePolicies, the checks
SmolVLA's tests make: SDE log-probs through grpo.flow_sde recomputed bit for bit (ratio exactly 1), gradients, SFT
loss, a LeRobot-layout save reloaded by lerobot's own loader to equal actions, SFT + one GRPO + SRPO iteration of
vla-rl's trainer, and the real-checkpoint recipes' --dry-run."""

import json
import math
import re

import numpy as np
import pytest
import torch

from vla_rl.policies import TrainablePolicy, load_policy, make_policy
from vla_rl.policies.lerobot import LeRobotVLA, lerobot_classes
from vla_rl.policy import PolicyConfig

TYPES = ["pi0", "pi05"]
TINY = {"paligemma_variant": "tiny_vlm", "action_expert_variant": "tiny_expert", "image_resolution": [32, 32],
        "max_action_dim": 4}
TASK = "reach the red ball"


def tiny_overrides(kind):
    """policy.lerobot of a toy pi0 / pi0.5. pi0.5 keeps LeRobot's max_state_dim 32 (its reloaded processor pads the
    state to 32 whatever the config says), so its prompt is "Task: ..., State: <32 numbers>;\nAction: ", 44 tokens."""
    if kind == "pi0":
        return {**TINY, "max_state_dim": 8, "tokenizer_max_length": 16}
    return {**TINY, "tokenizer_max_length": 48}


def tiny_pi(kind, tmp, **kw):
    cfg = PolicyConfig(kind="lerobot", type=kind, lerobot=tiny_overrides(kind), state_dim=8, action_dim=4,
                       cameras=["agentview"],
                       image_size=32, chunk_size=4, n_action_steps=4, **kw)
    cfg.flow.num_steps = 4
    torch.manual_seed(0)
    return make_policy(cfg, [TASK], workdir=tmp)


def _batch(b=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"observation.images.agentview": torch.randint(0, 256, (b, 32, 32, 3), generator=g, dtype=torch.uint8),
            "observation.state": torch.randn(b, 8, generator=g), "task": [TASK] * b}


def _lerobot_batch(batch):
    """What lerobot's own processors take: float CHW images in [0, 1]."""
    return {k: (v.permute(0, 3, 1, 2).float() / 255 if k.startswith("observation.images") else v)
            for k, v in batch.items()}


@pytest.mark.parametrize("kind", TYPES)
def test_recomputed_log_probs_equal_the_rollout_bit_for_bit(tmp_path, kind):
    _, P = lerobot_classes(kind)
    pol = tiny_pi(kind, tmp_path)
    assert isinstance(pol, LeRobotVLA) and isinstance(pol, TrainablePolicy) and isinstance(pol.policy, P)
    assert pol.tokens_per_chunk == 4 and pol.policy.config.paligemma_variant == "tiny_vlm"
    assert pol.policy.config.num_inference_steps == 4
    pol.set_state_normalization(torch.linspace(-1, 1, 8), torch.linspace(0.5, 2, 8))
    batch = _batch()
    for mode in ("all", "one"):
        pol.cfg.flow.noise_mode = mode
        gens = [torch.Generator().manual_seed(10 + i) for i in range(3)]  # per-row generators, as rollouts use
        s = pol.sample_chunk(batch, stochastic=True, generator=gens)
        assert s.actions.shape == (3, 4, 4) and s.logp.shape == (3, 4) and s.record["chain"].shape == (3, 5, 4, 4)
        assert int(s.step_mask.sum()) == (12 if mode == "all" else 3)
        assert bool((s.logp != 0).eq(s.step_mask).all())  # a log-prob exactly where the SDE sampled
        pol.train()
        lp = pol.chunk_log_prob(batch, s.record)
        assert torch.equal(lp.logp.detach(), s.logp)  # PPO ratio exactly 1
        assert torch.equal(torch.exp(lp.logp - s.logp), torch.ones_like(s.logp))
        pol.eval()
    lp.logp.sum().backward()  # the gradient reaches the action expert
    grads = [p.grad for n, p in pol.named_parameters() if "gemma_expert" in n and p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)
    # a row's sample depends only on its own generator
    s1 = pol.sample_chunk({k: v[1:2] for k, v in batch.items()}, generator=[torch.Generator().manual_seed(11)])
    torch.testing.assert_close(s1.actions, s.actions[1:2], atol=1e-5, rtol=0)
    # deterministic chunks and LeRobot's action queue
    a1 = pol.predict_action_chunk(batch, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a1, pol.predict_action_chunk(batch, generator=torch.Generator().manual_seed(5)))
    pol.reset()
    torch.testing.assert_close(pol.select_action(batch, generator=torch.Generator().manual_seed(5)), a1[:, 0])
    b = _batch()
    b["action"] = torch.rand(3, 4, 4) * 2 - 1
    loss, info = pol.forward(b)  # SFT: LeRobot's flow-matching loss
    loss.backward()
    assert torch.isfinite(loss) and info["loss"] > 0


def test_pi05_reads_the_state_through_its_prompt(tmp_path):
    """pi0.5 has no state projection: lerobot writes the state's 256-bin indices into the prompt, which the tiny
    tokenizer knows (a different state is a different prompt)."""
    pol = tiny_pi("pi05", tmp_path)
    pol.set_state_normalization(torch.zeros(8), torch.ones(8))
    batch = _batch(2)
    batch["observation.state"] = torch.tensor([[-0.9, -0.5, 0.0, 0.5, 0.9, 0.1, -0.1, 0.3], [0.2] * 8])
    ids = pol._pre(batch)["observation.language.tokens"]
    tok = next(s for s in pol.processors()[0].steps if hasattr(s, "input_tokenizer")).input_tokenizer
    words = tok.convert_ids_to_tokens(ids[0].tolist())
    # lerobot's bins: np.digitize(state, linspace(-1, 1, 257)[:-1]) - 1 of the standardized state
    padded = np.concatenate([batch["observation.state"][0].numpy(), np.zeros(24, np.float32)])  # to max_state_dim 32
    bins = np.digitize(padded, np.linspace(-1, 1, 257)[:-1]) - 1
    assert words[:44] == ["task", "<unk>", *TASK.split(), "<unk>", "state", "<unk>", *map(str, bins), "<unk>", "action",
                          "<unk>"]  # "Task: reach the red ball, State: 12 64 ...;\nAction: " (punctuation is <unk>)
    assert set(words[44:]) == {"<pad>"} and not torch.equal(ids[0], ids[1])


@pytest.mark.parametrize("kind", TYPES)
def test_saved_in_lerobot_layout_and_reloaded_by_lerobot_to_equal_actions(tmp_path, kind):
    from lerobot.policies.factory import make_pre_post_processors

    from vla_rl.policies.factory import checkpoint_memory

    pol = tiny_pi(kind, tmp_path)
    pol.set_state_normalization(torch.linspace(-1, 1, 8), torch.linspace(0.5, 2, 8))
    out = pol.save_pretrained(tmp_path / "saved")
    for f in ("config.json", "model.safetensors", "policy_preprocessor.json", "policy_postprocessor.json"):
        assert (out / f).is_file(), f
    assert json.loads((out / "config.json").read_text())["type"] == kind
    batch = _batch(2)
    noise = torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(3))
    _, P = lerobot_classes(kind)
    theirs = P.from_pretrained(str(out))  # lerobot's own loader and processors (the tokenizer folder they name)
    pre, post = make_pre_post_processors(theirs.config, pretrained_path=str(out))
    a_theirs = post(theirs.predict_action_chunk(pre(_lerobot_batch(batch)), noise=noise.clone()))
    a_ours = post(pol.policy.predict_action_chunk(pol._pre(batch), noise=noise.clone()))
    torch.testing.assert_close(a_theirs, a_ours, atol=0, rtol=0)
    again = load_policy(out)  # vla-rl's loader: the same deterministic chunk

    def g():
        return torch.Generator().manual_seed(7)

    torch.testing.assert_close(again.predict_action_chunk(batch, generator=g()),
                               pol.predict_action_chunk(batch, generator=g()),
                               atol=0, rtol=0)
    # --dry-run's memory line reads the checkpoint's size from its safetensors header (VLM: .paligemma. modules)
    cfg = pol.cfg
    cfg.path = str(out)
    total = sum(p.numel() for p in pol.policy.parameters())
    expert = sum(p.numel() for n, p in pol.policy.named_parameters() if ".paligemma." not in n)
    for expert_only, trained in ((False, total), (True, expert)):  # LeRobot's pi default: everything trained
        cfg.lerobot = {**tiny_overrides(kind), **({"train_expert_only": True} if expert_only else {})}
        m = re.search(r"([0-9.]+) M parameters \(([0-9.]+) M trained\)", checkpoint_memory(cfg))
        assert m and abs(float(m.group(1)) - total / 1e6) < 0.05 and abs(float(m.group(2)) - trained / 1e6) < 0.05


@pytest.mark.parametrize("kind", TYPES)
def test_another_robots_checkpoint_is_fine_tuned_on_this_envs_features(tmp_path, kind):
    """policy.path at a checkpoint with other cameras / state / action (pi0_base's base_0_rgb, 32-dim state): its
    weights with this env's features (LeRobot's make_policy(cfg, ds_meta) on a dataset does the same), vla-rl's
    processors."""
    from safetensors.torch import load_file

    src = PolicyConfig(kind="lerobot", type=kind, lerobot=tiny_overrides(kind), state_dim=6, action_dim=3,
                       cameras=["base_0_rgb"],
                       image_size=48, chunk_size=4, n_action_steps=4)
    torch.manual_seed(1)
    ckpt = make_policy(src, [TASK], workdir=tmp_path / "base").save_pretrained(tmp_path / "base" / "ckpt")
    cfg = PolicyConfig(kind="lerobot", type=kind, path=str(ckpt), state_dim=8, action_dim=4, cameras=["agentview"],
                       image_size=32, chunk_size=4, n_action_steps=4)
    cfg.flow.num_steps = 3
    pol = make_policy(cfg, workdir=tmp_path / "run")
    lc = pol.policy.config
    assert list(lc.image_features) == ["observation.images.agentview"] and lc.robot_state_feature.shape == (8,)
    assert lc.action_feature.shape == (4,) and lc.num_inference_steps == 3 and pol._fixed_processors is None
    theirs = load_file(str(ckpt / "model.safetensors"))
    mine = pol.policy.state_dict()
    assert all(torch.equal(mine[k], v) for k, v in theirs.items())  # the checkpoint's weights, all of them
    pol.set_state_normalization(torch.zeros(8), torch.ones(8))
    s = pol.sample_chunk(_batch(2), generator=[torch.Generator().manual_seed(i) for i in range(2)])
    assert s.actions.shape == (2, 4, 4)
    assert torch.equal(pol.chunk_log_prob(_batch(2), s.record).logp.detach(), s.logp)
    b = _batch(2)
    b["action"] = torch.rand(2, 4, 4) * 2 - 1
    assert torch.isfinite(pol.forward(b)[0])


@pytest.mark.parametrize("kind", TYPES)
def test_sft_and_one_grpo_srpo_iteration_of_the_trainer(tmp_path, kind):
    """What `vla-rl train` does with policy.type pi0 / pi05: SFT on scripted demos, one GRPO + SRPO iteration on
    tabletop/reach_one, an update at PPO ratio exactly 1, the policy saved in LeRobot's layout and loaded by lerobot to
    the same actions, the run's checkpoint rebuilt through the factory (what `vla-rl eval` does)."""
    from lerobot.policies.factory import make_pre_post_processors

    from grpo.checkpoint import latest_checkpoint, load_checkpoint
    from grpo.config import load_config
    from grpo.metrics import read_jsonl
    from vla_rl.policy import policy_config_from_dict
    from vla_rl.trainer import VLARLConfig, VLARLTrainer

    out = tmp_path / "run"
    over = ["env.tasks=[tabletop/reach_one]", "env.max_episode_steps=8",
            "env.kwargs={image_size: 32, cameras: [agentview]}",
            "env.video_camera=agentview", "policy.kind=lerobot", f"policy.type={kind}", "policy.cameras=[agentview]",
            "policy.image_size=32", "policy.chunk_size=4", "policy.n_action_steps=4", "policy.flow.num_steps=3",
            ("policy.lerobot={paligemma_variant: tiny_vlm, action_expert_variant: tiny_expert, image_resolution: [32, "
             f"32], tokenizer_max_length: {tiny_overrides(kind)['tokenizer_max_length']}}}"),
            "sft.demos_per_task=1", "sft.steps=3", "sft.batch_size=4", "rl.iterations=1", "rl.groups_per_task=2",
            "grpo.group_size=3", "rl.eval_episodes=1", "rl.num_videos=0", "rl.minibatch_size=256", "rl.inner_epochs=1",
            "rl.success_band=[-0.5,1.5]", "rl.reward=srpo", "srpo.num_frames=3", "srpo.frame_size=32", "device=cpu",
            f"output_dir={out}"]
    cfg = load_config(VLARLConfig, None, over)
    tr = VLARLTrainer(cfg, quiet=True)
    _, P = lerobot_classes(kind)
    assert isinstance(tr.policy.policy, P)
    before = {n: p.detach().clone() for n, p in tr.policy.named_parameters() if p.requires_grad}
    res = tr.train()
    assert res["iterations"] == 1 and 0.0 <= res["final_success"] <= 1.0
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "rollout/success_rate" in r]
    assert len(rows) == 1 and rows[0]["rollout/env_steps"] > 0 and "reward/mean" in rows[0]
    obs, _ = tr.pool.get("tabletop/reach_one", 1)[0].reset(seed=3, options={"init_seed": 3})
    ob = {"observation.state": torch.as_tensor(obs["state"], dtype=torch.float32)[None], "task": [obs["instruction"]],
          "observation.images.agentview": torch.as_tensor(obs["images"]["agentview"])[None]}

    def g():
        return torch.Generator().manual_seed(0)

    tr.policy.eval()
    a_trained = tr.policy.predict_action_chunk(ob, generator=g())  # the weights of the run's last checkpoint
    # an untrained policy rarely succeeds, so SRPO may grade every episode 0 and the trainer skip the update; the update
    # itself on a fresh rollout with graded advantages (one minibatch: the PPO ratio is exactly 1)
    specs, _, batch = tr.rollout(1)
    stats = tr.update(batch, torch.linspace(-1.0, 1.0, len(specs)), torch.ones(len(specs), dtype=torch.bool), 1)
    assert stats["loss/rows"] == batch.old_logp.shape[0] and math.isfinite(stats["loss/loss"])
    assert stats["loss/ratio"] == 1.0 and stats["loss/clip_frac"] == 0.0
    moved = [n for n, p in tr.policy.named_parameters() if n in before and not torch.equal(p.detach(), before[n])]
    assert moved, "SFT + GRPO changed no weight"
    # saved in LeRobot's layout, loaded by lerobot's own loader to the same actions on an env observation
    saved = tr.policy.save_pretrained(out / "policy")
    assert json.loads((saved / "config.json").read_text())["type"] == kind
    theirs = P.from_pretrained(str(saved))
    pre, post = make_pre_post_processors(theirs.config, pretrained_path=str(saved))
    noise = torch.randn(1, 4, theirs.config.max_action_dim, generator=torch.Generator().manual_seed(0))
    a_theirs = post(theirs.predict_action_chunk(pre(_lerobot_batch(ob)), noise=noise.clone()))
    tr.policy.eval()
    a_ours = tr.policy._post(tr.policy.policy.predict_action_chunk(tr.policy._pre(ob), noise=noise.clone()))
    torch.testing.assert_close(a_theirs, a_ours, atol=0, rtol=0)
    # the run's last checkpoint rebuilt through the factory in the run's directory (its tokenizer folder is reused)
    st = load_checkpoint(latest_checkpoint(out / "checkpoints"), map_location="cpu")
    pol = make_policy(policy_config_from_dict(st["policy_config"]), workdir=out)
    pol.load_state_dict(st["model"])
    assert torch.equal(pol.predict_action_chunk(ob, generator=g()), a_trained)


@pytest.mark.parametrize("kind,base", [("pi0", "pi0_base: 3.50 B"), ("pi05", "pi05_base: 3.62 B")])
def test_real_checkpoint_recipe_dry_run(kind, base, capsys):
    from vla_rl.cli import main

    assert main(["train", f"configs/vla/{kind}_reach_one.yaml", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert f"policy: LeRobot {kind}" in text and base in text

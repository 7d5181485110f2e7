"""vla-rl's trainer on a LeRobot SmolVLA: SFT, one GRPO + SRPO iteration on tabletop/reach_one, LeRobot-layout
output."""

import json
import math

import torch

from grpo.config import load_config
from grpo.metrics import read_jsonl
from vla_rl.trainer import VLARLConfig, VLARLTrainer

TINY = ["env.max_episode_steps=8", "sft.demos_per_task=1", "sft.steps=5", "sft.batch_size=8", "rl.iterations=1",
        "rl.groups_per_task=2", "grpo.group_size=3", "rl.eval_episodes=2", "rl.num_videos=0", "rl.minibatch_size=256",
        "rl.inner_epochs=1",
        "rl.success_band=[-0.5,1.5]", "srpo.num_frames=3", "srpo.frame_size=32"]


def test_one_grpo_srpo_iteration_on_a_lerobot_smolvla(tmp_path):
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    out = tmp_path / "run"
    cfg = load_config(VLARLConfig, "configs/vla/smolvla_reach_one_cpu.yaml", TINY + [f"output_dir={out}"])
    tr = VLARLTrainer(cfg, quiet=True)
    before = {n: p.detach().clone() for n, p in tr.policy.named_parameters() if p.requires_grad}
    res = tr.train()
    assert res["iterations"] == 1 and 0.0 <= res["final_success"] <= 1.0
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "rollout/success_rate" in r]
    assert len(rows) == 1 and rows[0]["rollout/env_steps"] > 0 and "reward/mean" in rows[0]
    # an untrained policy rarely succeeds, so SRPO may grade every episode 0 and the trainer skip the update; the
    # update itself on this rollout with graded advantages (one minibatch: the PPO ratio is exactly 1)
    specs, mine, batch = tr.rollout(1)
    adv = torch.linspace(-1.0, 1.0, len(specs))
    stats = tr.update(batch, adv, torch.ones(len(specs), dtype=torch.bool), 1)
    assert stats["loss/rows"] == batch.old_logp.shape[0] and math.isfinite(stats["loss/loss"])
    assert stats["loss/ratio"] == 1.0 and stats["loss/clip_frac"] == 0.0
    moved = [n for n, p in tr.policy.named_parameters() if n in before and not torch.equal(p.detach(), before[n])]
    assert moved, "SFT + GRPO changed no weight"
    tr.policy.save_pretrained(out / "policy")
    # the trained policy is saved in LeRobot's layout and loads with lerobot's own loader
    saved = out / "policy"
    assert json.loads((saved / "config.json").read_text())["type"] == "smolvla"
    theirs = SmolVLAPolicy.from_pretrained(str(saved))
    pre, post = make_pre_post_processors(theirs.config, pretrained_path=str(saved))
    obs, _ = tr.pool.get("tabletop/reach_one", 1)[0].reset(seed=3, options={"init_seed": 3})
    batch = {"observation.state": torch.as_tensor(obs["state"], dtype=torch.float32)[None],
             "task": [obs["instruction"]]}
    for cam in cfg.policy.cameras:
        batch[f"observation.images.{cam}"] = torch.as_tensor(obs["images"][cam])[None]
    noise = torch.randn(1, 4, theirs.config.max_action_dim, generator=torch.Generator().manual_seed(0))
    lb = {k: (v.permute(0, 3, 1, 2).float() / 255 if k.startswith("observation.images") else v)
          for k, v in batch.items()}
    a_theirs = post(theirs.predict_action_chunk(pre(lb), noise=noise.clone()))
    tr.policy.eval()
    a_ours = tr.policy._post(tr.policy.policy.predict_action_chunk(tr.policy._pre(batch), noise=noise.clone()))
    torch.testing.assert_close(a_theirs, a_ours, atol=0, rtol=0)


def test_a_lerobot_run_checkpoint_rebuilds_through_the_factory(tmp_path):
    """What `vla-rl eval` does for policy.kind=lerobot: the factory rebuilds the policy in the run's directory (its
    tiny backbone folder is reused, vocabulary included) and the checkpoint's state dict loads into it exactly."""
    from grpo.checkpoint import latest_checkpoint, load_checkpoint
    from vla_rl.policies import make_policy
    from vla_rl.policy import policy_config_from_dict

    out = tmp_path / "run"
    cfg = load_config(VLARLConfig, "configs/vla/smolvla_reach_one_cpu.yaml",
                      TINY + [f"output_dir={out}", "rl.iterations=0", "sft.steps=2"])
    tr = VLARLTrainer(cfg, quiet=True)
    tr.train()
    st = load_checkpoint(latest_checkpoint(out / "checkpoints"), map_location="cpu")
    pol = make_policy(policy_config_from_dict(st["policy_config"]), workdir=out)
    pol.load_state_dict(st["model"])
    batch = {"observation.state": torch.zeros(1, tr.policy.cfg.state_dim), "task": ["touch the red ball"],
             **{f"observation.images.{c}": torch.zeros(1, 32, 32, 3, dtype=torch.uint8) for c in cfg.policy.cameras}}
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    torch.testing.assert_close(pol.predict_action_chunk(batch, generator=g()),
                               tr.policy.predict_action_chunk(batch, generator=g()),
                               atol=0, rtol=0)

"""The easiest-task recipe (configs/vla/tabletop_reach_one.yaml) on sims' tabletop/reach_one: it runs end to end,
and GRPO raises the success rate on the initial state it trains on."""

import numpy as np
import torch

from grpo.config import load_config
from vla_rl.rollout import EpisodeSpec, run_episodes
from vla_rl.trainer import VLARLConfig, VLARLTrainer

TINY = ["sft.demos_per_task=2", "sft.steps=30", "rl.iterations=2", "rl.groups_per_task=2", "grpo.group_size=4",
        "rl.eval_episodes=4", "rl.eval_every=0", "rl.num_videos=0", "rl.success_band=[-0.5,1.5]", "srpo.num_frames=3",
        "env.max_episode_steps=8"]


def test_reach_one_recipe_trains_end_to_end(tmp_path):
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", TINY + [f"output_dir={tmp_path}"])
    assert cfg.env.tasks == ["tabletop/reach_one"] and cfg.policy.cameras == ["agentview", "wrist"]
    res = VLARLTrainer(cfg, quiet=True).train()
    assert res["iterations"] == 2 and 0.0 <= res["sft_success"] <= 1.0 and 0.0 <= res["final_success"] <= 1.0
    assert (tmp_path / "policy" / "model.safetensors").is_file()


def _stochastic_success(tr: VLARLTrainer, init_seed: int, n: int = 128) -> float:
    specs = [EpisodeSpec("tabletop/reach_one", init_seed, 0, 10_000 + k) for k in range(n)]
    b = run_episodes(tr.policy, tr.pool, specs, tr.cfg.env.max_episode_steps, stochastic=True,
                     generator=torch.Generator().manual_seed(123), record_frames=False)
    return float(np.mean([e.success for e in b.episodes]))


def test_grpo_raises_success_on_its_training_state(tmp_path):
    """From scratch (no base: SFT on 5 demos, agentview at 32 px), initial state 3 -- not a demo state -- is left at
    0.53 stochastic success (128 episodes); 30 GRPO+SRPO iterations at lr 2e-4 on that state alone (one group of 16
    per iteration) raise it to 0.76 (measured; lr 1e-4: 0.60). This checks that the update climbs its objective on a
    single state; the recipe itself (base + 5 demos, 8 held-out states per iteration) is measured in its header."""
    over = ["env.kwargs={image_size: 32}", "policy.cameras=[agentview]", "rl.train_seeds=[3]", "rl.groups_per_task=1",
            "grpo.group_size=16", "rl.iterations=30", "rl.eval_episodes=1", "rl.eval_every=0", "rl.num_videos=0",
            "rl.save_every=100", "rl.lr=2e-4", "rl.lr_schedule=constant", "sft.base_policy=null", "sft.steps=1000",
            "sft.lr=1e-3", "policy.flow.eta=1.0", f"output_dir={tmp_path}"]
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", over)
    tr = VLARLTrainer(cfg, quiet=True)
    tr.run_sft()
    before = _stochastic_success(tr, 3)
    tr.sft_done = True
    res = tr.train()
    after = _stochastic_success(tr, 3)
    print(f"stochastic success on state 3: {before:.3f} -> {after:.3f}")
    assert res["iterations"] == 30
    assert 0.1 <= before <= 0.7, before  # the SFT start still has signal (some but not all episodes succeed)
    assert after >= before + 0.15, (before, after)

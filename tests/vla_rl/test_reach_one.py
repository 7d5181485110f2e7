"""The easiest-task recipe (configs/vla/tabletop_reach_one.yaml) runs end to end on sims' tabletop/reach_one."""

from grpo.config import load_config
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

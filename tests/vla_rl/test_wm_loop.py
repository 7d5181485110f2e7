"""The World-VLA-Loop (vla_rl.wm_loop, ``vla-rl loop``) on both shipped loop configs, tiny; the policy as the
``act`` of world_models.data.collect_policy_episodes; the command's bad input."""

import json

import numpy as np
import pytest
import torch

from grpo.config import load_config
from vla_rl.cli import main as cli_main
from vla_rl.policy import SmallVLA
from vla_rl.wm_loop import LoopConfig, run_loop

TINY_WM = dict(image_size=32, context_frames=2, chunk=2, action_dim=4, sampling_steps=2, layers=1, ffn_dim=32)


@pytest.mark.parametrize("config,state_dim", [("loop_reach.yaml", 18), ("loop_reach_one.yaml", 12)])
def test_world_vla_loop_tiny(tmp_path, config, state_dim):
    """Both shipped loops, tiny: reach (3 balls, grounding head) and reach_one (one ball; the demo), whose policy
    reads the state model's proprio + ball position inside the world model (state_dim 12)."""
    path = f"configs/world_models/{config}"
    assert cli_main(["loop", path, "--dry-run"]) == 0
    cfg = load_config(LoopConfig, path, [
        f"output_dir={tmp_path}", "cycles=1", "rl_iterations=1", "real_eval_episodes=2", "rollouts_per_cycle=2",
        "data.horizon=6", "data.train={success: 2, near: 1, failure: 1, random: 1}", "data.test={success: 1, near: 1}",
        "data.start_pool=4", f"models.wm={json.dumps(TINY_WM)}", "models.wm_steps=3", "models.wm_finetune_steps=2",
        "models.idm_steps=3", "models.state_steps=3", "models.success_steps=3", "vla.env.max_episode_steps=12", "vla.policy.chunk_size=2",
        "vla.policy.n_action_steps=2", "vla.policy.flow.num_steps=2", "vla.sft.demos_per_task=1", "vla.sft.steps=3",
        "vla.rl.groups_per_task=1", "vla.rl.eval_episodes=2", "vla.grpo.group_size=2"])
    res = run_loop(cfg, quiet=True)
    hist = res["history"]
    assert [h["cycle"] for h in hist] == [0, 1]
    h1 = hist[1]
    for k in ("real_success", "wm_success_after_rl", "wm_on_policy/frame_mse", "wm_on_policy/action_following_mse",
              "wm_on_policy/success_agreement", "wm_heldout/frame_mse", "data/added"):
        assert k in h1 and np.isfinite(h1[k]), k
    assert len(res["train"]) == 5 + h1["data/added"]
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert any("real_success" in x for x in lines) and (tmp_path / "cycle_1" / "world_model.pt").is_file()
    assert (tmp_path / "cycle_1" / "vla" / "policy").is_dir()
    pol = SmallVLA.from_pretrained(res["policy_dir"])
    assert pol.cfg.use_state and pol.cfg.state_dim == state_dim and pol.cfg.cameras == ["agentview"]
    assert res["models"]["wm"].cfg.state_dim == state_dim


def test_loop_command_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    path = "configs/world_models/loop_reach_one.yaml"
    out = f"output_dir={tmp_path / 'run'}"
    for argv, what in ((["loop", path, out, "cycles=-1"], "cycles and rl_iterations must be >= 0"),
                       (["loop", path, out, "vla.policy.cameras=[agentview, wrist]"], "imagines only the 'agentview'"),
                       (["loop", path, out, "modles.wm_steps=3"], "did you mean 'models'"),
                       (["loop", str(tmp_path / "nope.yaml"), out], "config file not found")):
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert what in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(SystemExit) as e:  # argparse's own errors: one line too
        cli_main(["loop", path, out, "--bogus"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "unrecognized arguments: --bogus" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()  # nothing written


def test_collect_policy_episodes_with_the_policy_as_act():
    """world_models takes the policy as a callable: the VLA's actor resets its action queue at every episode start and
    draws from its own seeded generator, so two collections with the same seed are identical."""
    from vla_rl.policy import PolicyConfig
    from vla_rl.tokenizer import WordTokenizer
    from vla_rl.wm_loop import policy_actor
    from world_models.data import collect_policy_episodes

    torch.manual_seed(0)
    pol = SmallVLA(PolicyConfig(cameras=["agentview"], image_size=32, state_dim=9, action_dim=4, chunk_size=2,
                                n_action_steps=2), WordTokenizer.build(["reach the red ball"]))
    runs = [collect_policy_episodes(policy_actor(pol, stochastic=True, seed=3), "tabletop/reach", [5, 6], 6, 32)
            for _ in range(2)]
    a, b = runs
    assert a.frames.shape == (2, 7, 3, 32, 32) and a.actions.shape == (2, 6, 4)
    assert torch.equal(a.actions, b.actions) and torch.equal(a.frames, b.frames)
    assert all(k.startswith("policy_") for k in a.kinds) and a.init_seeds == [5, 6]

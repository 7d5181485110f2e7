"""The full-size robosuite Lift loop (configs/world_models/loop_robosuite_lift.yaml) end to end with tiny overrides:
robosuite SANS data (7-dim actions, 19-dim state with the cube), the state-aware world model, SFT in robosuite, GRPO
inside the world model, real-sim evaluation, fresh rollouts added to the data and fine-tuning, all on CPU
(~55 s on 2 shared CPU cores, most of it robosuite: 7 env builds of ~2 s and ~300 rendered steps)."""

import json

import numpy as np
import pytest

pytest.importorskip("robosuite")

CONFIG = "configs/world_models/loop_robosuite_lift.yaml"
# robosuite Lift with object_state: eef xyz 0-2, eef quat 3-6, fingers 7-8, cube xyz 9-11, cube quat 12-15,
# gripper-to-cube 16-18
STATE_DIM, ACTION_DIM = 19, 7
TINY_WM = dict(image_size=32, context_frames=2, chunk=4, action_dim=ACTION_DIM, sampling_steps=2, layers=1, ffn_dim=32)


def _robosuite_available() -> bool:
    from sims import robosuite_adapter

    return robosuite_adapter.available()


@pytest.mark.skipif(not _robosuite_available(), reason="robosuite cannot be imported / rendered here")
def test_robosuite_lift_loop_tiny(tmp_path):
    import torch

    from grpo.config import load_config
    from vla_rl.cli import main
    from vla_rl.policy import SmallVLA
    from vla_rl.wm_loop import WorldLoopConfig, run_loop

    assert main(["loop", CONFIG, "--dry-run"]) == 0
    full = load_config(WorldLoopConfig, CONFIG, [])
    assert full.models.wm.action_dim == full.models.idm.action_dim == ACTION_DIM
    assert list(full.models.success_state_points) == [0, 9] and full.vla.policy.cameras == ["agentview"]
    assert full.vla.env.kwargs["object_state"] is True

    cfg = load_config(WorldLoopConfig, CONFIG, [
        f"output_dir={tmp_path}", "cycles=1", "rl_iterations=1", "real_eval_episodes=1", "rollouts_per_cycle=2",
        "data.image_size=32", "data.horizon=4", "data.train={success: 1, near: 1, failure: 1, random: 1}",
        "data.test={success: 1, random: 1}", "data.start_pool=2", f"models.wm={json.dumps(TINY_WM)}",
        "models.wm_steps=3", "models.wm_finetune_steps=2", "models.success_steps=3", "models.idm_steps=3",
        "models.state_steps=3", "models.success_imagined_rollouts=1", "models.env_sampling_steps=1",
        "models.idm={image_size: 32, action_dim: 7, window: 2, channels: [8, 8], hidden: 16}",
        # the SFT demo must reach success: the expert needs ~42 steps
        "vla.env.max_episode_steps=42", "vla.env.kwargs={cameras: [agentview], max_steps: 42, object_state: true}",
        "vla.policy.image_size=32", "vla.policy.chunk_size=4", "vla.policy.n_action_steps=4",
        "vla.policy.flow.num_steps=2", "vla.sft.demos_per_task=1", "vla.sft.steps=3", "vla.sft.batch_size=16",
        "vla.rl.groups_per_task=1", "vla.rl.eval_episodes=1", "vla.rl.minibatch_size=16", "vla.grpo.group_size=2"])
    res = run_loop(cfg, quiet=True)
    hist = res["history"]
    assert [h["cycle"] for h in hist] == [0, 1]
    assert np.isfinite(hist[0]["real_success"]) and np.isfinite(hist[0]["wm_heldout/frame_mse"])
    h1 = hist[1]
    for k in ("real_success", "wm_success_after_rl", "wm_on_policy/frame_mse", "wm_on_policy/action_following_mse",
              "wm_on_policy/success_agreement", "wm_heldout/frame_mse", "data/added"):
        assert k in h1 and np.isfinite(h1[k]), k
    train = res["train"]
    assert len(train) == 4 + h1["data/added"] == h1["data/episodes"]  # the added rollouts joined the data
    assert train.actions.shape[1:] == (4, ACTION_DIM) and train.state.shape[1:] == (5, STATE_DIM)
    assert train.frames.shape[1:] == (5, 3, 32, 32)
    # state offsets: grip point at 0 and the cube at 9 (the cube starts on the table, below the gripper)
    s0 = train.state[:, 0]
    assert torch.allclose(s0[:, 16:19], s0[:, 9:12] - s0[:, 0:3], atol=1e-4)  # robosuite's gripper_to_cube_pos
    assert bool((s0[:, 11] < s0[:, 2] - 0.1).all())
    assert train.kinds[:4] == ["success", "near", "failure", "random"]
    wm = res["models"]["wm"]
    assert wm.cfg.state_dim == STATE_DIM and wm.cfg.state_points == (0, 9) and wm.cfg.action_dim == ACTION_DIM
    pol = SmallVLA.from_pretrained(res["policy_dir"])
    assert pol.cfg.cameras == ["agentview"] and pol.cfg.use_state and pol.cfg.state_dim == STATE_DIM
    assert (tmp_path / "cycle_1" / "world_model.pt").is_file() and (tmp_path / "history.json").is_file()


def test_loop_rejects_a_world_model_with_the_wrong_action_dim():
    import torch

    from world_models.data import Trajectories
    from world_models.fit import ModelsConfig, fit_models
    from world_models.video_wm import WorldModelConfig

    n, t = 2, 3
    data = Trajectories(torch.zeros(n, t + 1, 3, 32, 32, dtype=torch.uint8), torch.zeros(n, t, ACTION_DIM),
                        torch.zeros(n, t + 1), torch.zeros(n, t + 1), torch.zeros(n, t + 1, STATE_DIM),
                        ["success"] * n, ["lift the red cube"] * n, list(range(n)))
    m = ModelsConfig(wm=WorldModelConfig(**dict(TINY_WM, action_dim=4)))
    with pytest.raises(ValueError, match="models.wm.action_dim=4 but the data's actions have 7"):
        fit_models(m, data, log=lambda *a: None)

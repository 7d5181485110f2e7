"""configs/vla/libero_spatial.yaml end to end on LIBERO with tiny overrides: `vla-rl train` runs SFT and one GRPO
iteration in LIBERO, `vla-rl eval` prints per-task success over LIBERO's fixed init states; the full recipe
dry-runs. SFT data is one demo made here (no LIBERO demo can be downloaded): the bowl is put just above the plate
and the arm holds still until the task succeeds."""

import json

import numpy as np
import torch

import sims
from grpo.config import load_config
from grpo.metrics import read_jsonl
from vla_rl.cli import main as cli_main
from vla_rl.demos import save_demo_file
from vla_rl.sft import Demo
from vla_rl.trainer import VLARLConfig, VLARLTrainer

from ..libero_scene import place_bowl_over_plate

TASK = "libero/libero_spatial/0"
STILL = np.array([0, 0, 0, 0, 0, 0, -1], np.float32)


def _demo_file(path):
    env = sims.make(TASK, image_size=32, cameras=("agentview", "wrist"), settle_steps=0)
    env.reset(options={"init_seed": 0})
    place_bowl_over_plate(env)
    e = env._env.env
    obs, _ = env.reset_to_state(e.sim.get_state().flatten())
    seen = []
    for _ in range(12):
        seen.append(obs)
        obs, _, term, _, info = env.step(STILL)
        if term:
            break
    env.close()
    assert info["success"]
    demo = Demo(seen[0]["instruction"], np.stack([o["state"] for o in seen]), np.stack([STILL] * len(seen)),
                {c: np.stack([o["images"][c] for o in seen]) for c in ("agentview", "wrist")}, TASK)
    return save_demo_file([demo], path)


def test_libero_spatial_recipe_trains_and_evaluates(tmp_path, capsys):
    out = tmp_path / "run"
    demos = _demo_file(tmp_path / "demos.hdf5")
    tiny = [f"output_dir={out}", f"sft.demo_path={demos}", "sft.demos_per_task=1", "sft.steps=3", "sft.batch_size=8",
            "env.max_episode_steps=6", "env.kwargs={image_size: 32, cameras: [agentview, wrist], max_steps: 6, "
                                       "settle_steps: 0}",
            "policy.image_size=32", "rl.iterations=1", "grpo.group_size=2", "rl.eval_episodes=1", "rl.eval_every=0",
            "rl.num_videos=1", "rl.minibatch_size=8", "rl.success_band=[-0.5,1.5]", "srpo.num_frames=3",
            "srpo.frame_size=32"]
    assert cli_main(["train", "configs/vla/libero_spatial.yaml", *tiny]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["iterations"] == 1 and 0.0 <= res["final_success"] <= 1.0
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "rollout/success_rate" in r]
    assert len(rows) == 1 and rows[0]["rollout/env_steps"] == 12  # 2 episodes x 6 steps in LIBERO
    assert list((out / "checkpoints").glob("step_*"))
    # an untrained policy fails both episodes: equal SRPO rewards, no advantage, the update has no rows. A second
    # iteration (resumed from that checkpoint) with distinct rewards takes its optimizer step on LIBERO's rollouts.
    tr = VLARLTrainer(load_config(VLARLConfig, "configs/vla/libero_spatial.yaml", tiny + ["rl.iterations=2"]),
                      quiet=True)
    orig, seen = tr.rewards, []

    def rewards(batch, specs=None):
        res = orig(batch, specs)
        seen.append(res.total.clone())
        r = torch.arange(len(res.total), dtype=torch.float32)
        return type(res)(total=r, components={k: r for k in res.components})

    tr.rewards = rewards
    assert tr.train()["iterations"] == 2 and len(seen) == 1 and torch.isfinite(seen[0]).all()
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "rollout/success_rate" in r]
    assert len(rows) == 2 and rows[1]["loss/rows"] > 0 and np.isfinite(rows[1]["loss/loss"])
    # the papers' protocol: every task from LIBERO's fixed init states (here 2 of the 50), per-task success
    assert cli_main(["eval", str(out), "--episodes", "2"]) == 0
    ev = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert ev["episodes"] == 2 and set(ev["per_task"]) == {TASK} and 0.0 <= ev["per_task"][TASK] <= 1.0
    # the full recipe beside it loads and prints its cost
    assert cli_main(["train", "configs/vla/libero_spatial_full.yaml", "--dry-run"]) == 0
    assert "env_steps 140800" in capsys.readouterr().out

"""The progress encoder at its own, larger frame: `vla-rl fit-encoder` builds it at 64 px (the policy's rollouts
seen at 32 px, its frames at 64), the file's input size is checked against the training config (one line, exit 2),
and in a run the env's extra view is what reaches SRPO while the policy keeps its 32-px cameras."""

import json
from pathlib import Path

import numpy as np
import torch

from grpo.config import load_config
from vla_rl.cli import main
from vla_rl.preflight import check_srpo_encoder
from vla_rl.trainer import VLARLConfig, VLARLTrainer
from world_models.progress_encoder import read_progress_metadata

ROOT = Path(__file__).resolve().parents[2]
FIT = str(ROOT / "configs/vla/fit_progress_encoder.yaml")
RECIPE = str(ROOT / "configs/vla/tabletop_reach_one_progress.yaml")
VIEW = ["srpo.frame_size=64", "env.kwargs.extra_view=[srpo,agentview,64]", "env.video_camera=srpo"]


def _fit64(out: Path, capsys) -> Path:
    rc = main(["fit-encoder", FIT, "data.expert_tasks=[tabletop/reach_one]", "data.expert_per_task=2",
               "data.play_per_task=0", "data.image_size=64", "model.image_size=64", "train.steps=3",
               "train.batch_episodes=4", "data.policy=builtin:tabletop_base", "data.policy_per_task=1",
               "data.policy_max_steps=3", "data.policy_image_size=32", f"output={out}"])
    assert rc == 0, capsys.readouterr().err
    capsys.readouterr()
    return out


def test_fit_encoder_at_64_px_and_the_size_checks(tmp_path, capsys):
    enc_path = _fit64(tmp_path / "enc64.safetensors", capsys)
    meta = read_progress_metadata(enc_path)
    assert meta["config"].image_size == 64
    assert meta["trained_on"]["policy"]["tasks"]["tabletop/reach_one"]["episodes"] == 1  # rolled out at 32 px
    # fit-encoder: recorded frames of another size than the model's input: one line, exit 2, nothing written
    capsys.readouterr()
    rc = main(["fit-encoder", FIT, "model.image_size=64", f"output={tmp_path / 'x.safetensors'}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "data.image_size=32 but model.image_size=64" in err, err
    assert not (tmp_path / "x.safetensors").exists()
    # train: the 64-px encoder with the recipe's 32-px frames, then with 64-px frames of a 32-px camera
    run = tmp_path / "run"
    for extra, msg in ((["srpo.frame_size=32"], "error: srpo.frame_size=32: the progress encoder"),
                       (["srpo.frame_size=64"], "error: env.video_camera='agentview' renders 32-px frames")):
        rc = main(["train", RECIPE, f"srpo.encoder_path={enc_path}", f"output_dir={run}", *extra])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and err.startswith(msg), err
        assert "env.kwargs.extra_view: [srpo, agentview, 64]" in err and not run.exists()
    cfg = load_config(VLARLConfig, RECIPE, [f"srpo.encoder_path={enc_path}", *VIEW])
    check_srpo_encoder(cfg.srpo, cfg.env)  # the matching setting passes
    rc = main(["train", RECIPE, "env.video_camera=srpo", f"output_dir={run}"])  # no such view: one line, exit 2
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "env.video_camera: camera 'srpo' is not rendered" in err, err


def test_the_extra_view_reaches_srpo_in_a_run(tmp_path, capsys):
    enc_path = _fit64(tmp_path / "enc64.safetensors", capsys)
    cfg = load_config(VLARLConfig, RECIPE, [f"srpo.encoder_path={enc_path}", *VIEW, f"output_dir={tmp_path / 'run'}",
                                            "sft.steps=2", "sft.demos_per_task=1", "rl.iterations=1",
                                            "rl.groups_per_task=2", "grpo.group_size=2", "env.max_episode_steps=4",
                                            "rl.eval_episodes=1", "rl.eval_every=0", "rl.num_videos=0"])
    tr = VLARLTrainer(cfg, quiet=True)
    seen = []
    orig = tr.srpo.encoder.encode_frames
    tr.srpo.encoder.encode_frames = lambda v: seen.append(tuple(v.shape)) or orig(v)
    specs, _, batch = tr.rollout(0)
    assert {np.asarray(f).shape for e in batch.episodes for f in e.frames} == {(64, 64, 3)}  # SRPO's frames
    assert tuple(batch.obs["observation.images.agentview"].shape[1:]) == (32, 32, 3)  # the policy's own view
    rew = tr.rewards(batch, specs)
    assert seen and all(s[-2:] == (64, 64) for s in seen), seen  # the encoder got the 64-px view, not resized
    assert torch.isfinite(rew.total).all() and len(rew.total) == 4
    assert json.loads(json.dumps(cfg.env.kwargs["extra_view"])) == ["srpo", "agentview", 64]

"""Trainer: a short run improves the reward; NaN rewards are skipped; bad input fails at start; checkpoints."""

import json

import pytest
import torch

from diffusion_rl.cli import main
from diffusion_rl.prompts import PromptConfig, read_prompt_file
from diffusion_rl.trainer import DiffusionGRPOTrainer, DiffusionRLConfig

from .conftest import redness


def small_cfg(tmp_path, **over):
    cfg = DiffusionRLConfig(output_dir=str(tmp_path / "run"), resume=False,
                            prompts=PromptConfig(source="list", prompts=["a red circle", "a blue square"], num_eval=4))
    cfg.model.height = cfg.model.width = 16
    cfg.model.lora.rank = 4
    cfg.model.tiny = {"with_vae": False}  # pixel space: the reward sees the denoiser's output directly
    cfg.sampler.num_steps = 6
    cfg.sampler.eta = 1.0
    cfg.grpo.group_size = 6
    cfg.train.iterations = 3
    cfg.train.eval_steps = 6
    cfg.train.log_images = False
    for k, v in over.items():
        sect, key = k.split("__")
        setattr(getattr(cfg, sect), key, v)
    return cfg


@pytest.mark.parametrize("branch", [False, True])
def test_short_run_improves_reward(tmp_path, branch):
    cfg = small_cfg(tmp_path, train__iterations=12, train__lr=3e-2, train__prompts_per_iter=2, branch__enabled=branch,
                    branch__split_steps=[0, 2], branch__branch=[3, 2], grpo__clip_low=0.2)
    tr = DiffusionGRPOTrainer(cfg, reward_fn=redness)
    res = tr.train(progress=False)
    assert res["eval_after"] > res["eval_before"] + 0.01, res
    rows = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    it_rows = [r for r in rows if "reward/mean" in r]
    assert len(it_rows) == 12 and all(r["logp_recompute_gap"] == 0.0 for r in it_rows)
    assert all(r["loss/ratio_mean"] > 0.9 for r in it_rows)


def test_nonfinite_reward_is_skipped(tmp_path):
    calls = {"n": 0}

    def flaky(batch):
        calls["n"] += 1
        out = redness(batch)
        if calls["n"] == 1:  # the first rollout
            out.total = out.total.clone()
            out.total[0] = float("nan")
        return out

    tr = DiffusionGRPOTrainer(small_cfg(tmp_path, train__iterations=1), reward_fn=flaky)
    before = {k: v.clone() for k, v in tr.adapter.trainable_state_dict().items()}
    s = tr.step()
    assert s["skipped_updates"] == 1 and s["cost/backward"] == 0
    assert all(torch.equal(before[k], v) for k, v in tr.adapter.trainable_state_dict().items())
    s = tr.step()
    assert s["cost/backward"] > 0


def test_checkpoint_resume_and_eval(tmp_path, capsys):
    cfg = small_cfg(tmp_path, train__iterations=2, train__save_every=1)
    tr = DiffusionGRPOTrainer(cfg, reward_fn=redness)
    tr.train(progress=False)
    w = tr.adapter.trainable_state_dict()
    cfg.resume, cfg.train.iterations = True, 3
    tr2 = DiffusionGRPOTrainer(cfg, reward_fn=redness)
    from grpo.checkpoint import latest_checkpoint

    tr2.load(latest_checkpoint(tmp_path / "run" / "checkpoints"))
    assert tr2.iteration == 2 and all(torch.equal(w[k], v) for k, v in tr2.adapter.trainable_state_dict().items())
    assert tr2.rng.getstate() == tr.rng.getstate()  # the prompt sampler's stream resumes where it stopped
    # a checkpoint written before the shared python-random format (py_rng / py_rng_pos) still resumes
    from grpo.checkpoint import load_checkpoint, save_checkpoint

    legacy = load_checkpoint(latest_checkpoint(tmp_path / "run" / "checkpoints"))
    st = legacy.pop("data_rng")
    legacy.pop("__path__", None)
    legacy.update(py_rng=st[1], py_rng_pos=st[2])
    path = save_checkpoint(tmp_path / "legacy", 2, legacy)
    tr3 = DiffusionGRPOTrainer(cfg, reward_fn=redness)
    tr3.load(path)
    assert tr3.rng.getstate() == tr.rng.getstate() and tr3.iteration == 2
    cfg.sampler.num_steps = 7
    with pytest.raises(ValueError, match="config differs"):
        DiffusionGRPOTrainer(cfg, reward_fn=redness).load(tmp_path / "run" / "checkpoints")


def test_prompt_files(tmp_path):
    (tmp_path / "empty.txt").write_text("\n# only a comment\n")
    with pytest.raises(ValueError, match="holds no prompts"):
        read_prompt_file(tmp_path / "empty.txt")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a red circle"}\n{"prompt": \n')
    with pytest.raises(ValueError, match="line 2"):
        read_prompt_file(tmp_path / "bad.jsonl")
    (tmp_path / "bad.json").write_text('[{"prompt": 3}]')
    with pytest.raises(ValueError, match="not a non-empty prompt"):
        read_prompt_file(tmp_path / "bad.json")
    (tmp_path / "ok.txt").write_text("a red circle\n\nblue square\n")
    assert read_prompt_file(tmp_path / "ok.txt") == ["a red circle", "blue square"]
    with pytest.raises(FileNotFoundError):
        read_prompt_file(tmp_path / "nope.txt")


def test_cli_bad_input_fails_at_start(tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("")
    base = ["train", "configs/diffusion/tiny_sd3_flat.yaml", f"output_dir={tmp_path}/o", "reward.name=redness_test",
            "prompts.source=list", "prompts.prompts=[a red circle]"]
    assert main([*base, "prompts.source=file", f"prompts.file={tmp_path}/empty.txt", "--dry-run"]) == 2
    assert "holds no prompts" in capsys.readouterr().err
    assert main([*base, "branch.enabled=true", "branch.split_steps=[2,4]", "--dry-run"]) == 2
    assert "'grpo.group_size' does nothing with branch.enabled=true" in capsys.readouterr().err  # flat YAML, tree mode
    tree = ["train", "configs/diffusion/tiny_sd3_branch.yaml", f"output_dir={tmp_path}/o"]
    assert main([*tree, "branch.split_steps=[2,400]", "--dry-run"]) == 2
    assert "beyond the last step" in capsys.readouterr().err
    assert main([*base, "model.lora.targets=[nope]", "--dry-run"]) == 2
    assert "match no module" in capsys.readouterr().err
    assert main([*base, f"model.path={tmp_path}/no_weights", "--dry-run"]) == 2
    assert "no diffusers pipeline" in capsys.readouterr().err
    assert main([*base, "reward.name=no_such_reward", "prompts.source=list", "--dry-run"]) == 2
    assert "no_such_reward" in capsys.readouterr().err

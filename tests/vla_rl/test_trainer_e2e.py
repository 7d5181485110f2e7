"""A short SFT + GRPO run on a real MuJoCo env, end to end: finite losses, checkpoints, resume, CLI."""

import json
import math

import pytest
import torch

from grpo.checkpoint import load_checkpoint
from grpo.config import load_config
from grpo.metrics import read_jsonl
from vla_rl.cli import main as cli_main
from vla_rl.rollout import EnvPool, EpisodeSpec, run_episodes
from vla_rl.trainer import VLARLConfig, VLARLTrainer

TINY = ["env.max_episode_steps=12", "env.kwargs={image_size: 32}", "policy.image_size=32", "policy.ctx_dim=64",
        "policy.flow.hidden=64", "policy.flow.num_steps=3", "sft.demos_per_task=1", "sft.steps=20", "sft.log_every=10",
        "sft.batch_size=16",
        "rl.groups_per_task=2", "rl.eval_episodes=3", "rl.eval_every=0", "rl.num_videos=2", "rl.save_every=1",
        "rl.minibatch_size=16", "rl.success_band=[-0.5,1.5]", "grpo.group_size=3", "srpo.num_frames=3",
        "srpo.frame_size=32"]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A 2-iteration SFT + GRPO run of the TINY reach config (shared by the tests below, whatever their order):
    (run_dir, its config, the trainer's result)."""
    run_dir = tmp_path_factory.mktemp("vla") / "run"
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml",
                      TINY + [f"output_dir={run_dir}", "rl.iterations=2"])
    return run_dir, cfg, VLARLTrainer(cfg, quiet=True).train()


def test_short_grpo_run_end_to_end_and_resume(trained_run):
    run_dir, cfg, res = trained_run
    assert res["iterations"] == 2 and 0.0 <= res["final_success"] <= 1.0
    rows = read_jsonl(run_dir / "metrics.jsonl")
    it_rows = [r for r in rows if "rollout/success_rate" in r]
    assert len(it_rows) == 2
    losses = [r["loss/loss"] for r in it_rows if "loss/loss" in r]
    assert all(math.isfinite(x) for x in losses)
    # an iteration updates only when some advantage is non-zero (tests/vla_rl/test_faults.py checks both cases)
    assert len(losses) == sum(r.get("loss/rows", 0) > 0 for r in it_rows)
    sft = [r["sft/loss"] for r in rows if "sft/loss" in r]  # SFT logged its loss every 10 of its 20 steps
    assert len(sft) == 2 and all(math.isfinite(x) for x in sft), rows[:3]
    evals = [r["eval/success_rate"] for r in rows if "eval/success_rate" in r]
    assert evals and evals[-1] == res["final_success"], (evals, res["final_success"])
    assert list((run_dir / "videos").glob("*.mp4")), "before/after rollout videos"
    assert (run_dir / "policy" / "model.safetensors").is_file() and (run_dir / "demos.hdf5").is_file()
    # the checkpoint's ``trainer`` entry (the trainer's progress) keeps the keys older checkpoints have
    ck = load_checkpoint(run_dir / "checkpoints")["trainer"]
    assert {"iteration", "sft_done", "eval", "sft"} <= set(ck) <= {"iteration", "sft_done", "eval", "sft", "best"}
    assert ck["iteration"] == 2 and ck["sft_done"] and ck["sft"]["demos"] == 1 and set(ck["eval"]) == {"sft", "final"}
    # resume: a longer run picks up at iteration 2 and skips SFT
    cfg3 = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml",
                       TINY + [f"output_dir={run_dir}", "rl.iterations=3"])
    tr3 = VLARLTrainer(cfg3, quiet=True)
    res3 = tr3.train()
    assert res3["resumed"] and res3["iterations"] == 3
    assert tr3.sft_record == ck["sft"] and tr3.evals["sft"] == ck["eval"]["sft"]  # restored, SFT not rerun
    assert len([r for r in read_jsonl(run_dir / "metrics.jsonl") if "rollout/success_rate" in r]) == 3


def test_cli_eval_and_dry_run(trained_run, capsys):
    run_dir = trained_run[0]
    assert cli_main(["eval", str(run_dir), "--episodes", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["episodes"] == 2 and 0 <= out["success_rate"] <= 1
    assert cli_main(["train", "configs/vla/tabletop_reach.yaml", "--dry-run", "rl.groups_per_task=2"]) == 0
    txt = capsys.readouterr().out
    assert "env_steps" in txt and "nfe_rollout" in txt and "backward_passes" in txt
    assert cli_main(["train", "configs/vla/tabletop_reach.yaml", "--dry-run", "rl.itrations=2"]) == 2
    assert "did you mean 'iterations'" in capsys.readouterr().err


def tiny_policy_and_pool():
    """The TINY reach config, an EnvPool over its env and an untrained SmallVLA sized to it."""
    from vla_rl.policy import SmallVLA
    from vla_rl.tokenizer import WordTokenizer
    from vla_rl.trainer import probe_envs

    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", TINY)
    pool = EnvPool(cfg.env.kwargs)
    instr, sd, ad = probe_envs(pool, cfg.env.tasks)
    cfg.policy.state_dim, cfg.policy.action_dim = sd, ad
    return cfg, pool, SmallVLA(cfg.policy, WordTokenizer.build(instr.values()))


def test_group_rollouts_share_initial_state_and_keep_logprob_records():
    cfg, pool, policy = tiny_policy_and_pool()
    specs = [EpisodeSpec("tabletop/reach", 123, 0, s) for s in range(3)]
    b = run_episodes(policy, pool, specs, 8, generator=torch.Generator().manual_seed(0))
    first = [e.frames[0] for e in b.episodes]
    assert all((f == first[0]).all() for f in first)  # same initial state within the group
    assert b.old_logp.shape == (b.episode_of.numel(), cfg.policy.flow.num_steps)
    lp = policy.chunk_log_prob(b.select(torch.arange(b.episode_of.numel())), b.record)
    torch.testing.assert_close(lp.logp, b.old_logp, atol=1e-5, rtol=0)
    pool.close()


def test_sigterm_mid_run_saves_and_resumes(tmp_path, monkeypatch):
    import os
    import signal

    out = tmp_path / "run"
    over = TINY + [f"output_dir={out}", "rl.iterations=3", "rl.save_every=100", "rl.eval_episodes=2", "sft.steps=5"]
    tr = VLARLTrainer(load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", over), quiet=True)
    real = tr.make_specs

    def specs_then_sigterm(it):
        if it == 1:
            # arrives mid-iteration: the iteration finishes, then it saves and stops
            os.kill(os.getpid(), signal.SIGTERM)
        return real(it)

    monkeypatch.setattr(tr, "make_specs", specs_then_sigterm)
    res = tr.train()
    assert res["stopped"] == "SIGTERM" and res["iterations"] == 2
    assert res["final_success"] is None  # no final evaluation on a stopped run
    res2 = VLARLTrainer(load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", over), quiet=True).train()
    assert res2["resumed"] and res2["iterations"] == 3 and res2["stopped"] is None and res2["final_success"] is not None
    assert len([r for r in read_jsonl(out / "metrics.jsonl") if "rollout/success_rate" in r]) == 3


def test_a_run_too_short_for_the_alarm_says_so(tmp_path, capsys):
    """vla-rl's alarm compares the evaluations after RL iterations; with fewer than eval.patience + 1 of them it cannot
    fire, and the run says so before RL (was: silent)."""
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml",
                      TINY + [f"output_dir={tmp_path / 'run'}", "rl.iterations=1", "rl.num_videos=0"])
    VLARLTrainer(cfg).train()
    assert "eval.patience=2 compares 3 evaluations, and this run makes 1 (rl.iterations=1" in capsys.readouterr().out

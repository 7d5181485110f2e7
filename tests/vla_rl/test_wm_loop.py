"""The World-VLA-Loop (vla_rl.wm_loop, ``vla-rl loop``) on both shipped loop configs, tiny; the policy as the
``act`` of world_models.data.collect_policy_episodes; the command's bad input."""

import json

import numpy as np
import pytest
import torch

from grpo.config import load_config
from vla_rl.cli import main as cli_main
from vla_rl.policy import SmallVLA
from vla_rl.wm_loop import WorldLoopConfig, run_loop

TINY_WM = dict(image_size=32, context_frames=2, chunk=2, action_dim=4, sampling_steps=2, layers=1, ffn_dim=32)


TINY_LOOP = [
    "cycles=1", "rl_iterations=1", "real_eval_episodes=2", "rollouts_per_cycle=2",
    "data.horizon=6", "data.train={success: 2, near: 1, failure: 1, random: 1}", "data.test={success: 1, near: 1}",
    "data.start_pool=4", f"models.wm={json.dumps(TINY_WM)}", "models.wm_steps=3", "models.wm_finetune_steps=2",
    "models.idm_steps=3", "models.state_steps=3", "models.success_steps=3", "vla.env.max_episode_steps=12",
    "vla.policy.chunk_size=2", "vla.policy.n_action_steps=2", "vla.policy.flow.num_steps=2", "vla.sft.demos_per_task=1",
    "vla.sft.steps=3", "vla.rl.groups_per_task=1", "vla.rl.eval_episodes=2", "vla.grpo.group_size=2"]


@pytest.mark.parametrize("config,state_dim", [("loop_reach.yaml", 18), ("loop_reach_one.yaml", 12)])
def test_world_vla_loop_tiny(tmp_path, config, state_dim):
    """Both shipped loops, tiny: reach (3 balls, grounding head) and reach_one (one ball; the demo), whose policy
    reads the state model's proprio + ball position inside the world model (state_dim 12)."""
    path = f"configs/world_models/{config}"
    assert cli_main(["loop", path, "--dry-run"]) == 0
    cfg = load_config(WorldLoopConfig, path, [f"output_dir={tmp_path}", *TINY_LOOP])
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


def _same_history(a: list[dict], b: list[dict]) -> None:
    assert [h["cycle"] for h in a] == [h["cycle"] for h in b]
    for x, y in zip(a, b):
        for k in x:
            if not k.startswith("time/"):
                assert x[k] == y[k] or (np.isnan(x[k]) and np.isnan(y[k])), (x["cycle"], k, x[k], y[k])


def test_loop_resumes_after_the_last_completed_cycle(tmp_path, capsys):
    """A loop stopped after cycle 1 (here: run with cycles=1) and run again with cycles=2 resumes from
    loop_state/step_000001 and reruns nothing before it; its history and metrics equal an uninterrupted cycles=2 run's.
    A cycle left half-done is redone from its start; a damaged state, or another config, is one line and is left as
    it is."""
    path = "configs/world_models/loop_reach_one.yaml"
    whole = run_loop(load_config(WorldLoopConfig, path, [f"output_dir={tmp_path / 'whole'}", *TINY_LOOP, "cycles=2"]),
                     quiet=True)
    part = tmp_path / "part"
    run_loop(load_config(WorldLoopConfig, path, [f"output_dir={part}", *TINY_LOOP]), quiet=True)
    assert (part / "loop_state" / "step_000001" / "state.json").is_file()
    (part / "cycle_2" / "vla").mkdir(parents=True)  # an interrupted cycle 2's leftovers
    (part / "cycle_2" / "vla" / "stale.txt").write_text("x")
    with (part / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 2, "real_success": -1.0}) + "\n")
    resumed = run_loop(load_config(WorldLoopConfig, path, [f"output_dir={part}", *TINY_LOOP, "cycles=2"]), quiet=True)
    _same_history(whole["history"], resumed["history"])
    assert not (part / "cycle_2" / "vla" / "stale.txt").exists()
    rows = [json.loads(x) for x in (part / "metrics.jsonl").read_text().splitlines()]
    whole_rows = [json.loads(x) for x in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [r["step"] for r in whole_rows] == [0, 1, 2]
    assert json.loads((part / "history.json").read_text())[-1]["real_success"] == whole["history"][-1]["real_success"]

    # another config: refused, one line, nothing written
    before = sorted(p.name for p in part.rglob("*"))
    err = run_cli_loop([path, f"output_dir={part}", *TINY_LOOP, "cycles=3", "models.wm_steps=4"], capsys)
    assert err[0] == 2 and "refusing to resume" in err[1] and "models.wm_steps" in err[1] and err[1].count("\n") == 1
    # a damaged state: reported, left as it is
    st = part / "loop_state" / "step_000002" / "model_wm.safetensors"
    st.write_bytes(st.read_bytes()[:100])
    err = run_cli_loop([path, f"output_dir={part}", *TINY_LOOP, "cycles=3"], capsys)
    assert err[0] == 2 and "model_wm.safetensors" in err[1] and "left untouched" in err[1] and err[1].count("\n") == 1
    assert sorted(p.name for p in part.rglob("*")) == before and len(st.read_bytes()) == 100


def run_cli_loop(args: list[str], capsys) -> tuple[int, str]:
    """``vla-rl loop ARGS`` in this process: its exit code and its stderr."""
    capsys.readouterr()
    rc = cli_main(["loop", *args])
    return rc, capsys.readouterr().err


def test_loop_sigint_stops_at_a_stage_boundary_then_resumes(tmp_path):
    """SIGINT mid-loop: no traceback, exit 0, a line saying after which cycle it stopped; the same command resumes
    after that cycle (loop_state) and finishes."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    args = ["loop", "configs/world_models/loop_reach_one.yaml", f"output_dir={out}", *TINY_LOOP, "cycles=40"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    p = subprocess.Popen([sys.executable, "-m", "vla_rl.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    t0 = time.time()
    while not (out / "loop_state" / "step_000001").is_dir() and p.poll() is None and time.time() - t0 < 240:
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=240)
    assert p.returncode == 0 and "Traceback" not in stderr, stderr[-2000:]
    m = re.search(r"SIGINT: stopped after cycle (\d+); run the same command to resume", stdout)
    assert m, stdout[-2000:]
    n = int(m.group(1))
    assert 1 <= n < 40 and (out / "loop_state" / f"step_{n:06d}" / "state.json").is_file()
    assert not (out / "history.json").exists()
    args[-1] = f"cycles={n + 1}"
    r = subprocess.run([sys.executable, "-m", "vla_rl.cli", *args], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"resuming after cycle {n}" in r.stdout
    assert [h["cycle"] for h in json.loads((out / "history.json").read_text())] == list(range(n + 2))


def test_loop_sigint_while_the_world_model_is_fitted_says_no_cycle_completed(tmp_path, monkeypatch, capsys):
    """SIGINT during cycle 0's world-model fit (the real fit, with the signal raised as it starts): the loop stops at
    the next stage boundary, before SFT, and says that no cycle completed (it said "stopped after cycle -1"); no loop
    state is saved, so the same command starts afresh."""
    import signal

    import vla_rl.wm_loop as wm_loop

    real_fit = wm_loop.fit_models

    def fit_interrupted(*a, **kw):
        signal.raise_signal(signal.SIGINT)  # caught by the loop's GracefulExit: stop at the next stage boundary
        return real_fit(*a, **kw)

    monkeypatch.setattr(wm_loop, "fit_models", fit_interrupted)
    cfg = load_config(WorldLoopConfig, "configs/world_models/loop_reach_one.yaml",
                      [f"output_dir={tmp_path}", *TINY_LOOP])
    res = run_loop(cfg)
    out = capsys.readouterr().out
    assert res["stopped"] == "SIGINT" and res["history"] == []
    assert "SIGINT: stopped before the first cycle completed" in out and "the same command starts it again" in out
    assert "cycle -1" not in out
    assert not (tmp_path / "loop_state").exists() and not (tmp_path / "sft").exists()
    assert not (tmp_path / "history.json").exists()


def test_loop_counts_its_real_simulator_episodes_and_steps(tmp_path, monkeypatch):
    """Every cycle's record counts the real simulator's episodes and steps by source (interaction cost); the totals
    equal what the simulator itself saw: its ``step`` calls, and its resets (one per episode, one per start-pool
    initial observation, one probe), counted on the real TabletopEnv (the world-model env is another class)."""
    from sims.tabletop.env import TabletopEnv

    seen = {"steps": 0, "resets": 0}
    step, reset = TabletopEnv.step, TabletopEnv.reset

    def counted_step(self, *a, **k):
        seen["steps"] += 1
        return step(self, *a, **k)

    def counted_reset(self, *a, **k):
        seen["resets"] += 1
        return reset(self, *a, **k)

    monkeypatch.setattr(TabletopEnv, "step", counted_step)
    monkeypatch.setattr(TabletopEnv, "reset", counted_reset)
    path = "configs/world_models/loop_reach_one.yaml"
    hist = run_loop(load_config(WorldLoopConfig, path, [f"output_dir={tmp_path}", *TINY_LOOP, "cycles=2"]),
                    quiet=True)["history"]
    h0, h1, h2 = hist
    # cycle 0: the SANS mixes (5 episodes of horizon 6; held out: TINY_LOOP's 2 merged into the file's 3 + 3 kinds),
    # one SFT demo, the SFT run's two evaluations (after SFT,
    # final: 2 episodes each) and the loop's own (2), four start-pool resets
    assert (h0["real/sans_train_episodes"], h0["real/sans_train_env_steps"]) == (5, 30)
    assert (h0["real/sans_heldout_episodes"], h0["real/sans_heldout_env_steps"]) == (8, 48)
    assert h0["real/sft_demo_episodes"] == 1 and 1 <= h0["real/sft_demo_env_steps"] <= 12
    assert h0["real/sft_eval_episodes"] == 4 and h0["real/eval_episodes"] == 2 and h0["real/start_pool_resets"] == 4
    for h in (h1, h2):  # each cycle: the policy's 2 fresh rollouts (horizon 6), the loop's evaluation (2)
        assert (h["real/policy_rollout_episodes"], h["real/policy_rollout_env_steps"]) == (2, 12)
        assert h["real/eval_episodes"] == 2 and 2 <= h["real/eval_env_steps"] <= 24
    assert h0["real/train_episodes_total"] == 6 and h2["real/train_episodes_total"] == 10
    assert h2["real/eval_episodes_total"] == 8 + 4 + 2 + 2 + 2
    last = h2
    assert seen["steps"] == last["real/train_env_steps_total"] + last["real/eval_env_steps_total"]
    # resets: one per episode, the 4 start-pool observations, and the SFT trainer's probe of the task (no step)
    assert seen["resets"] == last["real/train_episodes_total"] + last["real/eval_episodes_total"] + 4 + 1
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["real/train_env_steps_total"] for r in rows] == [h["real/train_env_steps_total"] for h in hist]

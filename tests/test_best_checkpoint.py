"""Best and last: ``checkpoints/best`` beside the rolling ``step_*`` checkpoints (grpo.checkpoint.save_best), kept by
the diffusion and VLA trainers by their evaluation metric and read by ``eval`` / ``export``."""

import json
import os

import torch

from grpo.checkpoint import (
    best_checkpoint,
    best_record,
    improves,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    read_best_record,
    save_best,
    save_checkpoint,
)


def test_improves_is_strict_and_nan_never_wins():
    assert improves(None, 0.1) and not improves(None, float("nan"))
    rec = best_record("eval/success_rate", 0.5, 10)
    assert improves(rec, 0.6) and not improves(rec, 0.5) and not improves(rec, 0.4)
    assert improves(best_record("loss", 0.5, 1, "min"), 0.4, "min")


def test_save_best_swaps_atomically_and_survives_keep_last(tmp_path):
    root = tmp_path / "checkpoints"
    for step in range(1, 6):
        save_checkpoint(root, step, {"model": {"w": torch.full((2,), float(step))}}, keep_last=2)
        if step in (2, 4):
            save_best(root, step, {"model": {"w": torch.full((2,), float(step))}}, best_record("m", step / 10, step))
    assert [p.name for p in list_checkpoints(root)] == ["step_000004", "step_000005"]
    assert latest_checkpoint(root).name == "step_000005"  # best is never "latest"
    best = best_checkpoint(root)
    assert best is not None and os.readlink(best) == "best-step_000004"
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("best")) == ["best", "best-step_000004"]
    st = load_checkpoint(best)
    assert st["best"] == {"metric": "m", "value": 0.4, "iteration": 4, "mode": "max"}
    assert torch.equal(st["model"]["w"], torch.full((2,), 4.0)) and st["__step__"] == 4
    assert read_best_record(root)["iteration"] == 4
    save_best(root, 4, {"model": {"w": torch.zeros(2)}}, best_record("m", 0.9, 4))  # the same iteration again
    assert read_best_record(root)["value"] == 0.9 and torch.equal(load_checkpoint(root / "best")["model"]["w"],
                                                                  torch.zeros(2))


def test_diffusion_trainer_keeps_best_and_eval_export_read_it(tmp_path, capsys):
    from diffusion_rl.trainer import DiffusionGRPOTrainer
    from tests.diffusion_rl.conftest import redness
    from tests.diffusion_rl.test_trainer import small_cfg

    cfg = small_cfg(tmp_path, train__iterations=4, train__eval_every=2, train__save_every=1, train__lr=3e-2)
    tr = DiffusionGRPOTrainer(cfg, reward_fn=redness)
    res = tr.train(progress=False)
    ck = tmp_path / "run" / "checkpoints"
    rec = read_best_record(ck)
    evals = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    scores = {r["step"]: r["eval/reward"] for r in evals if "eval/reward" in r and "eval/reward_before" not in r}
    scores[0], scores[4] = res["eval_before"], res["eval_after"]
    best_it = max(sorted(scores), key=lambda i: scores[i])  # ties: the earliest
    assert rec["metric"] == "eval/reward" and rec["iteration"] == best_it and abs(rec["value"] - scores[best_it]) < 1e-9
    st = load_checkpoint(ck / "best")
    assert st["iteration"] == best_it
    # export accepts .../checkpoints/best (the CLI's eval needs the run's reward by name: the unit path is enough here)
    from diffusion_rl.export import load_run

    _, st2 = load_run(ck / "best")
    assert st2["iteration"] == best_it and st2["__path__"].endswith("best")


def test_vla_trainer_keeps_best_and_eval_reads_it(tmp_path, capsys):
    from grpo.config import load_config
    from tests.vla_rl.test_trainer_e2e import TINY
    from vla_rl.cli import main as cli_main
    from vla_rl.trainer import VLARLConfig, VLARLTrainer

    out = tmp_path / "run"
    over = TINY + [f"output_dir={out}", "rl.iterations=2", "rl.eval_every=1", "rl.num_videos=0", "rl.eval_episodes=2"]
    res = VLARLTrainer(load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", over), quiet=True).train()
    ck = out / "checkpoints"
    st = load_checkpoint(ck / "best")
    ev = json.loads(json.dumps(st["trainer"]["eval"]))
    best_tag = max(sorted(ev, key=lambda t: ev[t]["iteration"]), key=lambda t: ev[t]["success_rate"])
    assert st["best"]["metric"] == "eval/success_rate"
    assert st["best"]["value"] == ev[best_tag]["success_rate"] and st["best"]["iteration"] == ev[best_tag]["iteration"]
    assert st["trainer"]["iteration"] == st["best"]["iteration"]
    assert res["iterations"] == 2 and latest_checkpoint(ck).name == "step_000002"
    capsys.readouterr()
    assert cli_main(["eval", str(ck / "best"), "--episodes", "1"]) == 0
    out_json = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out_json["best"]["iteration"] == st["best"]["iteration"] and out_json["checkpoint"].endswith("best")


def anti_redness(batch):
    """A gold monitor that falls whenever the redness reward rises: the alarm's case on every improving run."""
    import types

    from tests.diffusion_rl.conftest import redness

    return types.SimpleNamespace(total=-redness(batch).total, components={})


def test_diffusion_eval_writes_nothing_and_names_best_only_for_its_checkpoint(tmp_path, capsys):
    """``diffusion-rl eval`` trains nothing: no alarm between the pretrained model and the checkpoint (was: warned
    "at iteration 0", and with eval.action=stop saved into the run it read, its `latest` naming a pruned step), and
    "kept as best" only for the checkpoint the record is of (was: the latest printed the pretrained score as its
    own)."""
    from diffusion_rl.cli import main
    from diffusion_rl.trainer import DiffusionGRPOTrainer
    from tests.diffusion_rl.test_trainer import small_cfg

    cfg = small_cfg(tmp_path, train__iterations=4, train__eval_every=0, train__save_every=1, train__lr=3e-2)
    cfg.reward.name = "tests.diffusion_rl.conftest:redness"
    cfg.eval.monitors, cfg.eval.patience = ["tests.test_best_checkpoint:anti_redness"], 1
    res = DiffusionGRPOTrainer(cfg).train(progress=False)
    assert res["eval_after"] > res["eval_before"]  # the monitor fell: the alarm's case
    ck = tmp_path / "run" / "checkpoints"
    listing = {p.name: p.stat().st_mtime_ns for p in ck.iterdir()}
    latest = (ck / "latest").read_text()
    capsys.readouterr()
    assert main(["eval", str(ck), "eval.action=stop"]) == 0
    out = capsys.readouterr().out
    assert "reward hacking" not in out and "eval reward" in out and "kept as best" not in out, out
    assert {p.name: p.stat().st_mtime_ns for p in ck.iterdir()} == listing and (ck / "latest").read_text() == latest
    assert main(["eval", str(ck / "best")]) == 0
    assert f"kept as best for eval/reward {res['eval_after']:.4f}" in capsys.readouterr().out

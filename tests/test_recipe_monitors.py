"""Defaults that protect (issue 36): every image recipe ships cheap gold monitors (the built-in image statistics; the
shapes verifier where the recipe has one) with the reward-hacking alarm on ``warn``, and evaluates often enough for
the alarm to fire; every VLA recipe with a shaped (SRPO) reward watches held-out real success beside it the same
way. Config-level checks: the run that a hacked reward makes warn is
tests/diffusion_rl/test_monitors.py::test_shipped_defaults_warn_on_a_hacked_reward."""

from pathlib import Path

import pytest

from diffusion_rl.config import DiffusionRLConfig
from grpo.config import load_config
from vla_rl.config import VLARLConfig

REPO = Path(__file__).resolve().parents[1]
IMAGE = sorted(p.name for p in (REPO / "configs" / "diffusion").glob("*.yaml"))
VLA = sorted(p.name for p in (REPO / "configs" / "vla").glob("*.yaml") if "\nrl:" in p.read_text())  # training recipes


def alarm_observations(iterations: int, eval_every: int, before: bool) -> int:
    """Evaluations the alarm reads in a run: before training (diffusion only: the VLA alarm needs training rewards
    since the last evaluation), every ``eval_every`` iterations short of the last, and after the last."""
    mid = (iterations - 1) // eval_every if eval_every > 0 else 0
    return int(before) + mid + 1


@pytest.mark.parametrize("recipe", IMAGE)
def test_image_recipe_ships_monitors_that_can_fire(recipe):
    cfg = load_config(DiffusionRLConfig, REPO / "configs" / "diffusion" / recipe)
    ev = cfg.eval
    assert "colour_variance" in ev.monitors and ev.action == "warn", ev
    if cfg.prompts.source == "shapes" and cfg.model.path:  # a trained shapes model: its verifier is a gold measure
        assert "shapes_verifier" in ev.monitors, ev
    if cfg.model.path is None:
        return  # random-weight smoke recipes (tiny_sd3_*): nothing learned that a hack could undo
    n = alarm_observations(cfg.train.iterations, cfg.train.eval_every, before=True)
    assert n >= ev.patience + 1, f"{recipe}: {n} evaluations, the alarm needs eval.patience + 1 = {ev.patience + 1}"


@pytest.mark.parametrize("recipe", VLA)
def test_vla_recipe_watches_real_success_beside_a_shaped_reward(recipe):
    cfg = load_config(VLARLConfig, REPO / "configs" / "vla" / recipe)
    if cfg.rl.reward != "srpo" or cfg.rl.iterations < 50:
        return  # a binary success reward is the real success itself; < 50 iterations: CPU smoke runs, no trend to read
    assert cfg.eval.monitors == [] and cfg.eval.action == "warn"  # the trainer's gold monitor: held-out real success
    n = alarm_observations(cfg.rl.iterations, cfg.rl.eval_every, before=False)
    assert n >= cfg.eval.patience + 1, f"{recipe}: {n} evaluations, the alarm needs eval.patience + 1"

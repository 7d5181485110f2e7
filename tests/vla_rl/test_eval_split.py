"""The validation / test split of the held-out initial states is part of the VLA config (rl.eval_split,
rl.eval_seed_offset, rl.test_seed_offset): every evaluation of a run uses the chosen split's states, the split is
printed by --dry-run and at the start of training and stored with the results; overlapping or training-range splits
are refused with one line (exit 2); every shipped recipe tunes on the validation states."""

import subprocess
import sys
from pathlib import Path

import pytest

from grpo.config import ConfigError, load_config
from vla_rl.config import VLARLConfig

RECIPE = "configs/vla/tabletop_reach.yaml"
CONFIGS = sorted(set(Path("configs/vla").glob("*.yaml")) - set(Path("configs/vla").glob("fit_*.yaml")))


def test_the_split_picks_disjoint_states():
    val = load_config(VLARLConfig, RECIPE, ["rl.eval_episodes=4"]).rl
    test = load_config(VLARLConfig, RECIPE, ["rl.eval_episodes=4", "rl.eval_split=test"]).rl
    assert val.eval_split == "validation" and val.heldout_seeds() == [1_000_000 + i for i in range(4)]
    assert test.heldout_seeds() == [5_000_000 + i for i in range(4)] and test.heldout_seeds(2) == [5_000_000, 5_000_001]
    assert "test initial states 5000000..5000003" in test.split_line()
    assert "validation initial states 1000000..1000003" in val.split_line()


@pytest.mark.parametrize("over, word", [(["rl.eval_split=train"], "rl.eval_split"),
                                        (["rl.test_seed_offset=1000010"], "overlap"),
                                        (["rl.test_seed_offset=50"], "rl.train_seed_range"),
                                        (["rl.eval_seed_offset=10"], "rl.eval_seed_offset")])
def test_bad_splits_are_refused(over, word):
    with pytest.raises((ConfigError, ValueError), match=word.replace(".", r"\.")):
        load_config(VLARLConfig, RECIPE, over)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_recipe_tunes_on_the_validation_states(path):
    rl = load_config(VLARLConfig, path).rl
    assert rl.eval_split == "validation"  # a recipe's recorded numbers were chosen on these; test is opt-in
    assert not set(rl.heldout_seeds()) & set(range(rl.test_seed_offset, rl.test_seed_offset + rl.eval_episodes))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vla_rl.cli", "train", RECIPE, *args], capture_output=True,
                          text=True, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})


def test_dry_run_prints_the_split_and_a_bad_one_exits_2(tmp_path):
    res = _cli("--dry-run", "rl.eval_split=test", f"output_dir={tmp_path / 'r'}")
    assert res.returncode == 0, res.stderr
    assert "evaluation split: test initial states 5000000..5000063" in res.stdout  # the recipe's 64
    bad = _cli("rl.test_seed_offset=1000001", f"output_dir={tmp_path / 'bad'}")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "overlap" in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_the_trainer_evaluates_on_the_chosen_split(tmp_path):
    from vla_rl.trainer import VLARLTrainer

    over = ["rl.eval_episodes=3", "rl.eval_split=test", f"output_dir={tmp_path}", "env.kwargs={image_size: 32}",
            "policy.image_size=32"]
    tr = VLARLTrainer(load_config(VLARLConfig, RECIPE, over))
    assert tr.eval_seeds == [5_000_000, 5_000_001, 5_000_002]
    tr.pool.close()

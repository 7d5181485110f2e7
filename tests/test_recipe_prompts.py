"""The prompt sets the full-size diffusion recipes name ship with the repository (data/prompts, issue 36): each file
exists, reads as a prompt file with at least the recipe's evaluation prompts, names only reference images that
exist (FLUX Kontext), and is what data/prompts/make_prompts.py writes (the README's source statement holds)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from diffusion_rl.config import DiffusionRLConfig
from diffusion_rl.flux_kontext import split_prompt
from diffusion_rl.prompts import read_prompt_file
from grpo.config import load_config

REPO = Path(__file__).resolve().parents[1]
FILE_RECIPES = sorted(p.name for p in (REPO / "configs" / "diffusion").glob("*.yaml")
                      if "source: file" in p.read_text())


def test_every_file_recipe_is_listed():
    assert len(FILE_RECIPES) >= 8
    assert "sd35m_pickscore.yaml" in FILE_RECIPES and "flux_kontext_edit.yaml" in FILE_RECIPES


@pytest.mark.parametrize("recipe", FILE_RECIPES)
def test_recipe_prompt_file_ships(recipe, monkeypatch):
    monkeypatch.chdir(REPO)  # recipes name their files relative to the repository root, where the commands run
    cfg = load_config(DiffusionRLConfig, f"configs/diffusion/{recipe}")
    assert cfg.prompts.file.startswith("data/prompts/"), cfg.prompts.file
    prompts = read_prompt_file(cfg.prompts.file)
    assert len(set(prompts)) == len(prompts) >= cfg.prompts.num_eval
    if cfg.model.kind == "flux_kontext":
        refs = {split_prompt(p)[0] for p in prompts}  # raises for a missing reference image
        assert len(refs) >= 8


def test_prompt_sets_are_what_the_script_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_prompts", REPO / "data" / "prompts" / "make_prompts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    written = mod.write_all(tmp_path)
    shipped = REPO / "data" / "prompts"
    assert {p.name for p in written if p.suffix == ".txt"} == {p.name for p in shipped.glob("*.txt")}
    for p in written:
        rel = p.relative_to(tmp_path)
        if p.suffix == ".txt":
            assert p.read_text() == (shipped / rel).read_text(), rel
        else:  # images: the same pixels (PNG bytes may differ across Pillow versions)
            assert np.array_equal(np.asarray(Image.open(p)), np.asarray(Image.open(shipped / rel))), rel

"""The shapes pretraining script: a run cut off mid-way resumes from its
atomic checkpoint to exactly the weights of an uninterrupted run."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from diffusion_rl import pretrain_shapes
from rewards import shapes

TINY = dict(steps=6, size=16, batch=4, hidden=32, layers=1, log_every=0, save_every=3)


def _weights(d):
    return load_file(str(d / "transformer" / "diffusion_pytorch_model.safetensors"))


def test_resume_after_a_crash_gives_the_uninterrupted_weights(tmp_path, monkeypatch):
    ref = pretrain_shapes.pretrain(tmp_path / "ref", **TINY)
    assert not (tmp_path / "ref.ckpt").exists()  # the training state is removed once the model is saved

    real_render, calls = shapes.render, []

    def crash_at_step_5(prompts, **kw):  # a renderer that raises mid-run, as one did ~300k prompts into a real run
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("simulated crash")
        return real_render(prompts, **kw)

    monkeypatch.setattr(shapes, "render", crash_at_step_5)
    with pytest.raises(RuntimeError, match="simulated crash"):
        pretrain_shapes.pretrain(tmp_path / "run", **TINY)
    assert not (tmp_path / "run").exists() and (tmp_path / "run.ckpt" / "step_000003").is_dir()
    monkeypatch.setattr(shapes, "render", real_render)

    pretrain_shapes.pretrain(tmp_path / "run", **TINY)  # the same command again: resumes at step 3
    a, b = _weights(ref), _weights(tmp_path / "run")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
    assert not (tmp_path / "run.ckpt").exists()


def test_resume_with_other_settings_is_refused(tmp_path, monkeypatch):
    real_render, calls = shapes.render, []

    def crash_at_step_4(prompts, **kw):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("simulated crash")
        return real_render(prompts, **kw)

    monkeypatch.setattr(shapes, "render", crash_at_step_4)
    with pytest.raises(RuntimeError):
        pretrain_shapes.pretrain(tmp_path / "run", **TINY)
    monkeypatch.setattr(shapes, "render", real_render)
    with pytest.raises(ValueError, match=r"run\.ckpt was written by a run with .*'lr': 0\.001.*not steps=6.*lr=0\.002"):
        pretrain_shapes.pretrain(tmp_path / "run", **{**TINY, "lr": 2e-3})


def test_loading_never_pretrains_a_missing_model(tmp_path, monkeypatch):
    """Pretraining is its own command: a missing shapes model stops the load naming `diffusion-rl pretrain-shapes`
    (nothing is trained or written), and so does a missing built-in asset."""
    from diffusion_rl import adapters
    from diffusion_rl.adapters import ModelConfig, load_pipeline

    monkeypatch.setattr(pretrain_shapes, "pretrain", lambda *a, **k: pytest.fail("loading must not pretrain"))
    missing = tmp_path / "shapes_model"
    with pytest.raises(FileNotFoundError, match=f"build it first with `diffusion-rl pretrain-shapes --out {missing}`"):
        load_pipeline(ModelConfig(kind="sd3", path=str(missing), pretrain="shapes"))
    assert not missing.exists()
    monkeypatch.setattr(adapters, "ASSETS", tmp_path / "no_assets")
    with pytest.raises(FileNotFoundError, match="shapes_sd3.*build it with `diffusion-rl pretrain-shapes --out "):
        adapters.resolve_model_path("builtin:shapes_sd3")

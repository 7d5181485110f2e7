"""LIBERO is optional: without it nothing breaks, make() says how to install it, nothing prompts."""

import pytest

import sims
from sims import libero_adapter


def test_absent_libero_is_a_clean_skip():
    if libero_adapter.available():
        pytest.skip("LIBERO is installed; see test_libero_task_when_installed")
    assert libero_adapter.list_tasks() == []
    assert not any(t.startswith("libero/") for t in sims.list_tasks())
    with pytest.raises(ImportError, match="hf-libero"):
        sims.make("libero/libero_spatial/0")


def test_libero_task_when_installed(tmp_path, monkeypatch):
    pytest.importorskip("libero")
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path))
    assert libero_adapter.ensure_config().is_file()  # written before import: no input() prompt
    env = sims.make("libero/libero_spatial/0", image_size=64, max_steps=2)
    obs, info = env.reset(options={"init_seed": 0})
    assert obs["images"]["agentview"].shape == (64, 64, 3) and obs["instruction"]
    env.close()

"""Headless backend choice: egl, then osmesa, else a clear error naming the system package."""

import os
import subprocess
import sys

import pytest

from sims import render


def test_backend_is_chosen_and_exported(can_render):
    if not can_render:
        pytest.skip("no headless OpenGL backend")
    assert os.environ.get("MUJOCO_GL") in ("egl", "osmesa", "glfw", "glx")


def test_no_backend_gives_a_clear_error_naming_packages(monkeypatch):
    monkeypatch.setattr(render, "_status", {"backend": None, "error": None})
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(render.sys, "modules", {k: v for k, v in sys.modules.items() if k != "mujoco"})
    monkeypatch.setattr(render, "_probe", lambda backend, timeout_s=60.0: f"{backend} library not found")
    assert render.select_backend() is None
    assert os.environ["MUJOCO_GL"] == "disable"
    with pytest.raises(render.RenderingUnavailable) as e:
        render.make_renderer(None, 64, 64)
    msg = str(e.value)
    assert "libosmesa6" in msg and "libegl1" in msg and "cameras=()" in msg
    assert "egl library not found" in msg and "osmesa library not found" in msg


def test_probe_order_in_a_fresh_process():
    """A fresh interpreter without MUJOCO_GL picks the first working backend (egl before osmesa)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    code = "import sims, os; from sims import render; print(render.select_backend(), os.environ.get('MUJOCO_GL'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    chosen, exported = out.stdout.split()[-2:]
    assert chosen == exported or (chosen == "None" and exported == "disable")
    if chosen != "None" and render._probe("egl") is None:
        assert chosen == "egl"

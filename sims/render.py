"""Headless MuJoCo rendering: pick an OpenGL backend (EGL, then OSMesa) before ``mujoco`` is imported.

MuJoCo reads ``MUJOCO_GL`` once, when ``mujoco`` is first imported, and PyOpenGL fixes its platform
(``PYOPENGL_PLATFORM``) on its first import, so a backend cannot be switched inside a process. The
choice is therefore made before the import:

1. ``MUJOCO_GL`` already set (by the user, or by a parent process that probed): used as is.
2. otherwise each candidate (``egl``, then ``osmesa``) is probed in a short subprocess that renders an
   8x8 frame (~0.5 s, once per process tree: the result is written to ``os.environ`` so that subprocess
   workers inherit it). The first that works is used.
3. neither works: images are unavailable and :func:`make_renderer` raises :class:`RenderingUnavailable`
   naming the Debian packages to install (``libegl1 libgl1 libegl-mesa0`` for EGL, ``libosmesa6`` for
   OSMesa). Envs built with ``cameras=()`` (no images) still run.

:func:`make_renderer` returns a ``mujoco.Renderer`` (and sets ``LP_NUM_THREADS=0`` unless set: Mesa's
software rasterizer renders small frames in the calling thread); every renderer made here is closed at interpreter
exit (an EGL context garbage-collected after the EGL library is torn down prints tracebacks).

Also here: :func:`install_warning_handler`, which routes MuJoCo's C warnings (e.g. "Nan, Inf or huge
value in QACC") to Python ``logging`` instead of stdout and ``MUJOCO_LOG.TXT`` in the working directory.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import weakref

log = logging.getLogger("sims")

BACKENDS = ("egl", "osmesa")
# every MUJOCO_GL value mujoco's import takes on Linux (any other one: its import raises RuntimeError)
MUJOCO_GL_VALUES = ("egl", "osmesa", "glfw", "glx", "disable", "disabled", "off", "false", "0", "enable", "enabled",
                    "on", "true", "1")
APT_PACKAGES = {"egl": "libegl1 libgl1 libegl-mesa0 (or an NVIDIA driver)", "osmesa": "libosmesa6"}

_PROBE = """
import mujoco
m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size="1 1 0.1" type="box"/></worldbody></mujoco>')
r = mujoco.Renderer(m, 8, 8)
r.update_scene(mujoco.MjData(m))
assert r.render().shape == (8, 8, 3)
r.close()
"""

_status: dict[str, str | None] = {"backend": None, "error": None}
_renderers: "weakref.WeakSet" = weakref.WeakSet()


class RenderingUnavailable(RuntimeError):
    """No headless OpenGL backend works; the message names the system packages to install."""


def _probe(backend: str, timeout_s: float = 60.0) -> str | None:
    """None when ``backend`` renders in a fresh interpreter, else the last line of its error."""
    env = dict(os.environ, MUJOCO_GL=backend, PYOPENGL_PLATFORM=backend)
    try:
        p = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{type(e).__name__}: {e}"
    if p.returncode == 0:
        return None
    lines = [ln for ln in (p.stderr or p.stdout).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit code {p.returncode}"


def select_backend() -> str | None:
    """Choose and export ``MUJOCO_GL`` (see the module docstring); returns it, or None when none works.

    Call before ``import mujoco``; afterwards it only reports what the process already uses."""
    if _status["backend"] is not None or _status["error"] is not None:
        return _status["backend"]
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
    if chosen and chosen not in MUJOCO_GL_VALUES and sys.platform.startswith("linux"):  # (was: mujoco's traceback)
        raise ValueError(f"environment variable MUJOCO_GL={os.environ['MUJOCO_GL']!r}: expected one of egl, osmesa, "
                         "glfw, glx or disable (or unset it: sims picks a working headless backend)")
    if chosen:
        _check_pyopengl_platform(chosen)
        _status["backend"] = chosen
        return chosen
    if "mujoco" in sys.modules:  # imported by someone else first: it decided (glfw when MUJOCO_GL is unset)
        _status["backend"] = "glfw"
        return "glfw"
    errors = {}
    for backend in BACKENDS:
        err = _probe(backend)
        if err is None:
            _check_pyopengl_platform(backend)
            os.environ["MUJOCO_GL"] = backend
            os.environ.setdefault("PYOPENGL_PLATFORM", backend)
            _status["backend"] = backend
            log.info("sims: headless rendering with MUJOCO_GL=%s", backend)
            return backend
        errors[backend] = err
    # Keep mujoco importable without a display; renderers are refused with a clear message.
    os.environ["MUJOCO_GL"] = "disable"
    _status["error"] = unavailable_message(errors)
    return None


def _check_pyopengl_platform(backend: str) -> None:
    """mujoco's ``egl`` / ``osmesa`` backends need ``PYOPENGL_PLATFORM`` unset or equal to the backend: another value
    (set by the user) is one line here (was: mujoco's ImportError at its import, then a RenderingUnavailable traceback
    at the first renderer)."""
    given = os.environ.get("PYOPENGL_PLATFORM", "").strip()
    if backend in ("egl", "osmesa") and given and given.lower() != backend:
        raise ValueError(f"environment variable PYOPENGL_PLATFORM={os.environ['PYOPENGL_PLATFORM']!r} with "
                         f"MUJOCO_GL={backend}: expected {backend!r} (mujoco's {backend} backend renders through it), "
                         "or unset it")


def unavailable_message(errors: dict[str, str] | None = None) -> str:
    tried = "; ".join(f"{b}: {e}" for b, e in (errors or {}).items())
    return ("sims: no headless OpenGL backend for MuJoCo rendering works"
            + (f" ({tried})" if tried else "") + ". Install one of them, e.g. on Debian/Ubuntu "
            f"`apt-get install -y {APT_PACKAGES['egl'].split(' (')[0]}` (EGL) or `apt-get install -y "
            f"{APT_PACKAGES['osmesa']}` "
            "(OSMesa), or set MUJOCO_GL yourself; or disable images with cameras=().")


def make_renderer(model, height: int, width: int):
    """A ``mujoco.Renderer`` of ``height x width`` pixels for ``model``; raises :class:`RenderingUnavailable`."""
    select_backend()
    if _status["error"] is not None:
        raise RenderingUnavailable(_status["error"])
    import mujoco

    # Mesa's software rasterizer (llvmpipe: EGL/OSMesa without a GPU) starts one thread per core per
    # process; for 64-256 px frames rendering in the calling thread is ~5-10% cheaper per step and does
    # not oversubscribe the cores when a VectorEnv runs a worker per core. Ignored by GPU drivers; an
    # LP_NUM_THREADS set by the user wins.
    os.environ.setdefault("LP_NUM_THREADS", "0")
    try:
        r = mujoco.Renderer(model, height, width)
    except Exception as e:  # noqa: BLE001 - GL errors come in many types
        gl = os.environ.get("MUJOCO_GL", "<unset>")
        pkg = APT_PACKAGES.get(gl, f"{APT_PACKAGES['egl']} or {APT_PACKAGES['osmesa']}")
        raise RenderingUnavailable(f"sims: creating a MuJoCo renderer with MUJOCO_GL={gl} failed ({type(e).__name__}: "
                                   f"{e}); install {pkg}, or set MUJOCO_GL to another backend, or disable images with "
                                   "cameras=()") from e
    _renderers.add(r)
    if not _status.get("atexit"):
        # After the first context exists: mujoco.egl registers eglTerminate then, and atexit runs
        # last-registered first, so the renderers are closed before the display goes away.
        atexit.register(_close_all)
        _status["atexit"] = "yes"
    return r


def _close_all() -> None:
    for r in list(_renderers):
        try:
            r.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _on_warning(msg: bytes | str) -> None:
    log.warning("mujoco: %s", msg.decode() if isinstance(msg, bytes) else msg)


def install_warning_handler() -> None:
    """Route MuJoCo warnings to ``logging`` (unless someone installed a handler already)."""
    import mujoco

    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_on_warning)

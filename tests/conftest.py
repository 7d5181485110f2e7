import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Tests write only under tmp dirs: Mesa's shader cache and LIBERO's config file default to the home directory.
# Set before any test starts a worker process (forkserver workers inherit the environment of its first start).
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

_TMP_HOME = tempfile.mkdtemp(prefix="branchloop-tests-")
atexit.register(shutil.rmtree, _TMP_HOME, ignore_errors=True)
os.environ.setdefault("MESA_SHADER_CACHE_DIR", os.path.join(_TMP_HOME, "mesa_shader_cache"))
os.environ.setdefault("LIBERO_CONFIG_PATH", os.path.join(_TMP_HOME, "libero"))
# Experiment trackers (grpo.trackers): offline, their files and caches under the tmp home, no telemetry.
for _k, _sub in (("WANDB_DIR", "wandb"), ("WANDB_CONFIG_DIR", "wandb_config"), ("WANDB_CACHE_DIR", "wandb_cache"),
                 ("WANDB_DATA_DIR", "wandb_data"), ("TRACKIO_DIR", "trackio")):
    os.environ.setdefault(_k, os.path.join(_TMP_HOME, _sub))
os.environ.setdefault("MLFLOW_TRACKING_URI", "file://" + os.path.join(_TMP_HOME, "mlruns"))
for _k, _v in (("WANDB_MODE", "offline"), ("MLFLOW_DISABLE_TELEMETRY", "true"), ("DO_NOT_TRACK", "1"),
               ("HF_HUB_DISABLE_TELEMETRY", "1"), ("GRADIO_ANALYTICS_ENABLED", "False")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402

torch.set_num_threads(1)

from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_OUTPUT_DIRS = ("runs", "outputs")  # where the jobs write by default: tests must write under tmp dirs instead


def _outputs() -> set[str]:
    return {str(p.relative_to(ROOT)) for d in _OUTPUT_DIRS if (ROOT / d).is_dir() for p in (ROOT / d).rglob("*")}


def pytest_sessionstart(session):
    session.config._outputs_before = _outputs()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a test wrote into the checkout's runs/ or outputs/ (tests write only under tmp dirs)."""
    before = getattr(session.config, "_outputs_before", None)
    if before is None:
        return
    new = sorted(_outputs() - before)
    if new:
        print(f"\nerror: tests wrote into the checkout: {', '.join(new[:5])}{' ...' if len(new) > 5 else ''}")
        session.exitstatus = 1

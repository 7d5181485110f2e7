"""Installing without internet: ``make wheelhouse`` (bench/wheelhouse.py) and the offline install of
bench/gpu_check.sh; and where ``make`` takes torch from (TORCH_INDEX).

The wheelhouse test resolves a small set from the package registry for a named target, cuts an excluded package
(standing in for the node's torch) with what only it needs, and installs the result with ``--no-index`` into fresh
venvs: one that already has the excluded package (as the node has torch) succeeds, one without it fails."""

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _make(*args) -> str:
    r = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_torch_line_reads_the_cpu_index_unless_told_otherwise(tmp_path):
    v = tmp_path / "venv"  # a venv that does not exist: make prints the whole recipe
    line = lambda out: next(ln for ln in out.splitlines() if "pip install" in ln and "torch==" in ln)  # noqa: E731
    default = line(_make(f"VENV={v}", f"{v}/.torch"))
    assert '--retries 1 --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"' in default
    off = line(_make(f"VENV={v}", f"{v}/.torch", "TORCH_INDEX="))
    assert "--index-url" not in off and "--retries" not in off and '"torch==2.13.0"' in off
    cu = line(_make(f"VENV={v}", f"{v}/.torch", "TORCH_INDEX=https://download.pytorch.org/whl/cu128",
                    "TORCH=torch==2.8.0"))
    assert '--index-url https://download.pytorch.org/whl/cu128 "torch==2.8.0"' in cu
    # only the torch line: the project itself installs with pip's own configuration
    rest = _make(f"VENV={v}", f"{v}/.installed")
    assert sum("--index-url" in ln for ln in rest.splitlines()) == 1


def test_make_wheelhouse_passes_the_target():
    out = _make("wheelhouse", "WHEELHOUSE=/tmp/wh", "PYTHON_VERSION=312", "PLATFORM=manylinux_2_28_aarch64",
                "WHEELHOUSE_RESOLVE_WITH=torch==2.5.1")
    assert "bench/wheelhouse.py --out \"/tmp/wh\" --python-version \"312\" --platform \"manylinux_2_28_aarch64\"" in out
    assert '--extras "test" --exclude "torch" --resolve-with "torch==2.5.1"' in out


def _offline_env() -> dict:
    """pip with no configuration: no index, no find-links folder of this machine's (only --find-links WHEELHOUSE)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path / "bin" / "python"


def test_wheelhouse_cuts_the_excluded_package_and_installs_offline(tmp_path):
    wh, pytest_v = tmp_path / "wheelhouse", version("pytest")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "wheelhouse.py"), "--out", str(wh), "--python-version",
                        f"{sys.version_info.major}{sys.version_info.minor}", "--platform", "manylinux_2_28_x86_64",
                        "--requirements", "pytest-timeout>=2.3", "pyyaml>=6", "--exclude", "pytest",
                        "--resolve-with", f"pytest=={pytest_v}"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    meta = json.loads((wh / "wheelhouse.json").read_text())
    assert set(meta["wheels"]) == {"pytest-timeout", "pyyaml"}
    # pytest's own dependencies go with it (nothing else needs them); pytest itself was resolved at the pinned version
    assert {"pluggy", "iniconfig"} <= set(meta["dropped"]) and "pytest" not in meta["wheels"]
    names = sorted(p.name.split("-")[0].lower() for p in wh.glob("*.whl"))
    assert names == ["pytest_timeout", "pyyaml"]
    # the node: a venv that already has the excluded package (installed here from its own folder, offline)
    node = tmp_path / "node"
    py = _venv(node)
    own = tmp_path / "node_has"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(own), f"pytest=={pytest_v}"],
                   check=True, timeout=300)
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(own), "pytest"],
                   env=_offline_env(), check=True, timeout=300)
    env = {**_offline_env(), "WHEELHOUSE": str(wh), "VENV": str(node), "GPU_CHECK_REQS": "pytest-timeout pyyaml",
           "GPU_CHECK_INSTALL_ONLY": "1"}
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(py), "-c", "import pytest_timeout, yaml, pytest"], timeout=60).returncode == 0
    # a node without it: the same offline install cannot find pytest (nothing was fetched from an index)
    bare = tmp_path / "bare"
    _venv(bare)
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], env={**env, "VENV": str(bare)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "pytest" in r.stderr


def test_gpu_check_sh_names_a_missing_wheelhouse(tmp_path):
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "WHEELHOUSE": str(tmp_path / "nope"), "VENV": str(tmp_path / "v")})
    assert r.returncode == 2 and "make wheelhouse" in r.stderr and not (tmp_path / "v").exists()

#!/usr/bin/env bash
# The GPU check on a node without internet (README "Run on a GPU node without internet").
#
#   WHEELHOUSE=wheelhouse bash bench/gpu_check.sh [gpu_check.py options]      # or: make gpu-check
#
# 1. a venv (VENV, default .venv-gpucheck) made with --system-site-packages by PY (default python3), so the node's
#    own torch (and anything else it has) is seen and kept;
# 2. `pip install --no-index --find-links WHEELHOUSE -e ".[EXTRAS]"` (EXTRAS default test): nothing is fetched;
#    GPU_CHECK_REQS replaces the requirement (the test installs a small set); GPU_CHECK_INSTALL_ONLY=1 stops here;
# 3. python bench/gpu_check.py "$@" in that venv (DEVICE=cpu adds --dry: tiny sizes on the CPU, CUDA stages skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELHOUSE=${WHEELHOUSE:-wheelhouse}
VENV=${VENV:-.venv-gpucheck}
PY=${PY:-python3}
EXTRAS=${EXTRAS:-test}
if [ ! -d "$WHEELHOUSE" ]; then
  echo "error: wheelhouse folder '$WHEELHOUSE' not found; build it on a machine with the package registry:" \
       "make wheelhouse PYTHON_VERSION=<e.g. 311> PLATFORM=<e.g. manylinux_2_28_x86_64>, then copy it here" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV"
fi
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" ${GPU_CHECK_REQS:--e .[$EXTRAS]}
if [ "${GPU_CHECK_INSTALL_ONLY:-0}" = 1 ]; then
  echo "installed from $WHEELHOUSE into $VENV (no index)"
  exit 0
fi
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "error: no torch importable in $VENV (nor in $PY's site-packages): install the node's torch, or build the" \
       "wheelhouse with torch in it (make wheelhouse WHEELHOUSE_EXCLUDE=)" >&2
  exit 2
fi
DRY=()  # headless MuJoCo rendering: sims.render probes EGL / OSMesa itself (MUJOCO_GL, when set, wins)
if [ "${DEVICE:-cuda}" = cpu ]; then DRY=(--dry); fi
exec "$VENV/bin/python" bench/gpu_check.py "${DRY[@]}" "$@"

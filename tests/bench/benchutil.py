"""Shared by the bench tests: load a ``bench/*.py`` script as a module, and read a markdown table it printed."""

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str):
    """``bench/<name>.py`` as a module (``bench/`` on ``sys.path`` for its own imports; registered in ``sys.modules``,
    through which dataclasses resolve their module)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def markdown_table(out: str, header: str) -> list[list[str]]:
    """Rows (cells) of the markdown table whose header line starts with ``header``: the ``|`` lines after its
    separator, up to a blank line (per-seed progress lines printed between rows are skipped)."""
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(header))
    rows = []
    for ln in lines[i + 2:]:
        if not ln.strip():
            break
        if ln.lstrip().startswith("|"):
            rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return rows

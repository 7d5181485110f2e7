"""The package layering, read from the code: every import of every module (module level, inside functions, under
``if TYPE_CHECKING``, and literal ``importlib.import_module`` / ``__import__`` calls), relative ones resolved.

    grpo/                  the core: imports no other project package
    sims/ rewards/ world_models/   libraries: import no frontend (and rewards no world_models: encoders are injected)
    diffusion_rl/  vla_rl/ the two frontends: they may import the libraries and the core, never each other
                           (and diffusion_rl/ no sims/: it knows no robots)
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("grpo", "sims", "rewards", "world_models", "diffusion_rl", "vla_rl")
FRONTENDS = {"diffusion_rl", "vla_rl"}
FORBIDDEN = {
    "grpo": set(PACKAGES) - {"grpo"},
    "sims": FRONTENDS,
    "rewards": FRONTENDS | {"world_models"},
    "world_models": FRONTENDS,
    "diffusion_rl": {"vla_rl", "sims"},  # robots reach it only as world_models objects (EVA alignment)
    "vla_rl": {"diffusion_rl"},
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in the file at ``path`` (a module under ``root``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against this module's package
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            if not node.module:  # "from . import x": x may be a module
                out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if fname in ("import_module", "__import__"):
                out.append((node.lineno, node.args[0].value))
    return out


def violations() -> list[str]:
    bad = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for line, target in imports_of(path):
                top = target.split(".")[0]
                if top in FORBIDDEN[pkg]:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {target} ({pkg} must not import {top})")
    return bad


def test_the_walker_sees_every_kind_of_import(tmp_path):
    """Module-level, in-function, relative, TYPE_CHECKING and importlib imports are all found."""
    pkg = tmp_path / "world_models"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(
        "from typing import TYPE_CHECKING\nimport grpo.device\nif TYPE_CHECKING:\n    from vla_rl.policy import "
        "SmallVLA\ndef f():\n    from diffusion_rl import trainer\n    import importlib\n    "
        "importlib.import_module('vla_rl.rollout')\nfrom .data import x\nfrom . import video_wm\n")
    got = [t for _, t in imports_of(pkg / "m.py", tmp_path)]
    assert set(got) >= {"grpo.device", "vla_rl.policy", "diffusion_rl", "vla_rl.rollout", "world_models.data",
                        "world_models.video_wm"}, got


@pytest.mark.parametrize("pkg", PACKAGES)
def test_package_layering(pkg):
    bad = [v for v in violations() if v.startswith(f"{pkg}/")]
    assert not bad, "\n".join(bad)


def _module_graph(pkg: str) -> dict[str, set[str]]:
    """Module -> the modules of ``pkg`` it imports (package ``__init__`` re-exports aside: a submodule importing its
    own package's public names is not a circle between modules)."""
    mods = {_module_name(p, ROOT): p for p in (ROOT / pkg).rglob("*.py") if p.name != "__init__.py"}
    graph = {}
    for m, path in mods.items():
        deps = set()
        for _, target in imports_of(path):
            parts = target.split(".")
            hit = next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in mods), None)
            if hit and hit != m:
                deps.add(hit)
        graph[m] = deps
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (``[a, b, ..., a]``), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


@pytest.mark.parametrize("pkg", ["world_models", "rewards", "vla_rl", "diffusion_rl", "grpo", "sims"])
def test_no_import_circles_between_modules(pkg):
    """e.g. world_models.data <-> video_wm and diffusion_rl.adapters <-> pretrain_shapes are gone."""
    assert _cycle(_module_graph(pkg)) is None, " -> ".join(_cycle(_module_graph(pkg)))


def test_loading_a_diffusion_model_does_not_import_pretraining():
    """diffusion_rl.adapters (loading) never imports diffusion_rl.pretrain_shapes (training); the reverse is fine."""
    graph = _module_graph("diffusion_rl")
    assert "diffusion_rl.pretrain_shapes" not in graph["diffusion_rl.adapters"]
    assert "diffusion_rl.adapters" in graph["diffusion_rl.pretrain_shapes"]


def test_sims_simulators_and_demo_files_need_no_torch(tmp_path):
    """sims/ is numpy only (its package docstring): building a tabletop env, running the scripted expert and writing
    the demo file (atomically) import no torch (sims.demos imported grpo.checkpoint, and with it torch)."""
    code = f"""
import sys
from sims import registry, render, vector
from sims.demos import record_demos
record_demos("tabletop/reach_one", 1, {str(tmp_path / 'd.hdf5')!r}, max_steps=5)
assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))[:5]
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "d.hdf5").exists()

"""What the benches that compare training arms over seeds share (``bench_srpo_vs_binary``, ``bench_srpo_regime``,
``bench_pool_vs_plain``, ``bench_gdpo``): their command line (``--small``, ``--seeds``; for runs in subprocesses
``--jobs``, ``--out`` and ``--reuse``) and its check (one line, exit 2, nothing written), one training CLI run in a
fresh one-core process (:func:`train_cli`), and the arms x seeds runs at once (:func:`run_jobs`)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]


def seeds_parser(doc: str, seeds: int, seeds_help: str = "training seeds per arm (0 .. seeds-1)",
                 out: str | None = None, reuse: bool = False) -> argparse.ArgumentParser:
    """The parser of a bench whose description is ``doc``'s first paragraph, with ``--small`` and ``--seeds``; with
    ``out`` (the default run directory) also ``--jobs`` and ``--out``, and ``--reuse`` when ``reuse``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="seconds-long smoke mode (the test's)")
    ap.add_argument("--seeds", type=int, default=seeds, help=seeds_help)
    if out is not None:
        ap.add_argument("--jobs", type=int, default=2, help="runs at once (one core each)")
        ap.add_argument("--out", default=out, help="where the runs write (OUT/<arm>_seed<S>)")
    if reuse:
        ap.add_argument("--reuse", action="store_true",
                        help="read finished runs of the same config instead of rerunning")
    return ap


def bad_args(args: argparse.Namespace, **minimum: int) -> bool:
    """Whether an option is below its ``minimum`` (``dest=least value``); if so, one line on stderr naming every
    option's rule and the values given."""
    if all(getattr(args, k) >= lo for k, lo in minimum.items()):
        return False
    rules = [f"--{k.replace('_', '-')} >= {lo}" for k, lo in minimum.items()]
    rules = ", ".join(rules[:-1]) + f" and {rules[-1]}" if len(rules) > 1 else rules[0]
    got = [str(getattr(args, k)) for k in minimum]
    got = ", ".join(got[:-1]) + f" and {got[-1]}" if len(got) > 1 else got[0]
    print(f"error: need {rules}, got {got}", file=sys.stderr)
    return True


def run_cli(label: str, module: str, *argv: str) -> float:
    """``python -m module *argv`` from the repository root in a fresh process on one core; its wall seconds. A failed
    run raises ``RuntimeError`` naming ``label`` and the last line of its stderr."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    t = time.time()
    res = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.time() - t
    if res.returncode != 0:
        raise RuntimeError(f"{label} failed (exit {res.returncode}): {res.stderr.strip().splitlines()[-1:]}")
    return wall


def train_cli(label: str, module: str, config: str, seed: int, run_dir: Path, args: list[str]) -> float:
    """``python -m module train config seed=S output_dir=run_dir resume=false *args`` (:func:`run_cli`)."""
    return run_cli(label, module, "train", config, f"seed={seed}", f"output_dir={run_dir}", "resume=false", *args)


def run_jobs(jobs: list[Any], run: Callable[[Any], dict], at_once: int) -> dict[Any, dict] | None:
    """``{job: run(job)}`` with ``at_once`` runs at a time; None (the error printed on one line) when one fails."""
    try:
        with ThreadPoolExecutor(at_once) as ex:
            return dict(zip(jobs, ex.map(run, jobs)))
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return None

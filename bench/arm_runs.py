"""What the benches that compare training arms over seeds share (``bench_srpo_vs_binary``, ``bench_srpo_regime``,
``bench_pool_vs_plain``, ``bench_gdpo``): their command line (``--small``, ``--seeds``; for runs in subprocesses
``--jobs``, ``--out`` and ``--reuse``) and their checks (:func:`bad_args` for the values, :func:`bad_out` for the
output folder: one line, exit 2, nothing written), one training CLI run in a
fresh one-core process (:func:`train_cli`), and the arms x seeds runs at once (:func:`run_jobs`). For the benches
that write per-seed ``--json-out`` files and read them back with ``--report-from`` (``bench_tree_pool``,
``bench_lookahead``, ``bench_branch_headroom``): the join of a seed's runs (:func:`join_seeds`) and the check that
every run holds the arms asked for (:func:`missing_arms`)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

MAX_SEED = 2**32 - 1  # the largest seed a bench takes (grpo.config.MAX_SEED: torch's generators take no more)

ROOT = Path(__file__).resolve().parents[1]


def seeds_parser(doc: str, seeds: int, seeds_help: str = "training seeds per arm (0 .. seeds-1)",
                 out: str | None = None, reuse: bool = False) -> argparse.ArgumentParser:
    """The parser of a bench whose description is ``doc``'s first paragraph, with ``--small`` and ``--seeds``; with
    ``out`` (the default run directory) also ``--jobs`` and ``--out``, and ``--reuse`` when ``reuse``."""
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="seconds-long smoke mode (the test's)")
    ap.add_argument("--seeds", type=int, default=seeds, help=seeds_help)
    if out is not None:
        ap.add_argument("--jobs", type=int, default=2, help="runs at once (one core each)")
        ap.add_argument("--out", default=out, help="where the runs write (OUT/<arm>_seed<S>)")
    if reuse:
        ap.add_argument("--reuse", action="store_true",
                        help="read finished runs of the same config instead of rerunning")
    return ap


MAX_ITERATIONS = 100_000  # the most --iterations (and --eval-every) a bench's runs take
MAX_SEEDS = 10_000  # the most --seeds a bench takes (each a training run per arm; 1e9 filled the memory listing them)


def too_many_seeds(seeds: int, what: str | None = "training seeds per arm") -> bool:
    """Whether ``--seeds`` is above :data:`MAX_SEEDS`; if so, one line on stderr (``what`` says what a seed is)."""
    if seeds <= MAX_SEEDS:
        return False
    print(f"error: --seeds {seeds}: expected at most {MAX_SEEDS}" + (f" ({what})" if what else ""), file=sys.stderr)
    return True


def bad_args(args: argparse.Namespace, **minimum: int) -> bool:
    """Whether an option is below its ``minimum`` (``dest=least value``), ``--seeds`` above :data:`MAX_SEEDS` or an
    iteration count above :data:`MAX_ITERATIONS`; if so, one line on stderr naming every option's rule and the values
    given."""
    if too_many_seeds(getattr(args, "seeds", 0)):
        return True
    for key in ("iterations", "eval_every"):  # (was: --iterations 1e9 started runs that never end)
        if key in minimum and getattr(args, key) > MAX_ITERATIONS:
            print(f"error: --{key.replace('_', '-')} {getattr(args, key)}: expected at most {MAX_ITERATIONS}",
                  file=sys.stderr)
            return True
    if all(getattr(args, k) >= lo for k, lo in minimum.items()):
        return False
    rules = [f"--{k.replace('_', '-')} >= {lo}" for k, lo in minimum.items()]
    rules = ", ".join(rules[:-1]) + f" and {rules[-1]}" if len(rules) > 1 else rules[0]
    got = [str(getattr(args, k)) for k in minimum]
    got = ", ".join(got[:-1]) + f" and {got[-1]}" if len(got) > 1 else got[0]
    print(f"error: need {rules}, got {got}", file=sys.stderr)
    return True


def parse_arms(text: str, known) -> list[str] | None:
    """``--arms``: comma-separated distinct names of ``known`` (an arm table); else one line on stderr and None."""
    arms = [a for a in text.split(",") if a]
    if not arms or len(set(arms)) != len(arms) or any(a not in known for a in arms):
        print(f"error: --arms {text!r}: expected distinct names from {', '.join(known)}", file=sys.stderr)
        return None
    return arms


def bad_out(out: str) -> bool:
    """Whether ``--out`` (the folder the runs write into) cannot be a directory (a file, or under one; not writable:
    :func:`grpo.preflight.check_bench_out`), or is a run directory or inside one (the bench's runs and files would mix
    with that run's); if so, one line on stderr. Nothing is created."""
    from grpo.preflight import check_bench_out

    try:
        check_bench_out(out, "--out")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return True
    return False


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


def join_seeds(runs: list[dict], same: str, what: str, agree: tuple[str, ...] = ()) -> list[dict]:
    """One run per seed, in seed order, from the runs of several ``--json-out`` files (e.g. a seed's four arms from one
    run and a fifth arm from another): a seed's arms are joined, its first run's other fields kept. An arm present in
    two runs of one seed must have the same ``arm[same]`` (``what`` names it in the error: the benches are
    deterministic per seed, so a rerun reproduces it; otherwise the runs come from different code and cannot be
    joined) -> ``ValueError`` naming the seed and the arm. The run fields ``agree`` (the task, the start, the budget)
    must be the same in every run of a seed that has them: runs of other settings are not joined into one table."""
    by_seed: dict[int, dict] = {}
    for r in runs:
        m = by_seed.setdefault(r["seed"], {**r, "arms": {}})
        for k in agree:
            if k in m and k in r and m[k] != r[k]:
                raise ValueError(f"seed {r['seed']}: the runs differ in {k!r} ({m[k]!r} vs {r[k]!r}): runs of other "
                                 "settings cannot be joined (expected --report-from files of one bench setting)")
        for name, a in r["arms"].items():
            old = m["arms"].get(name)
            if old is not None and old[same] != a[same]:
                raise ValueError(f"seed {r['seed']}: arm {name!r} has different {what} in two runs: not the same "
                                 "code path, rerun it")
            m["arms"].setdefault(name, a)
    return [by_seed[s] for s in sorted(by_seed)]


def bad_arm_fields(runs: list[dict], numbers: tuple[str, ...], optional: tuple[str, ...] = (),
                   lists: tuple[str, ...] = ()) -> str | None:
    """The first arm of ``runs`` (``--report-from`` files) that is not an object with a number for each of
    ``numbers`` (``optional``: a number or null) and a list for each of ``lists``, as one line naming the seed, the arm
    and the field; ``None`` when all are."""
    for r in runs:
        for name, a in r["arms"].items():
            where = f"seed {r['seed']}, arm {name!r}"
            if not isinstance(a, dict):
                return f"{where} is {type(a).__name__}, not an object of the bench's numbers"
            for k in (*numbers, *optional, *lists):
                v = a.get(k)
                ok = (isinstance(v, list) if k in lists else
                      (v is None and k in optional) or (isinstance(v, (int, float)) and not isinstance(v, bool)))
                if not ok:
                    return (f"{where}: {k!r} is {v!r}, expected " + ("a list" if k in lists else "a number")
                            + " (a --json-out file of this bench and version)")
    return None


def missing_arms(prog: str, runs: list[dict], arms: list[str]) -> bool:
    """Whether a run lacks an arm of ``arms`` (``--report-from`` files written with other ``--arms``); if so one line
    on stderr naming, per seed, the missing arms and the arms it has."""
    gaps = []
    for r in runs:
        lack = [name for name in arms if name not in r.get("arms", {})]
        if lack:
            gaps.append(f"seed {r.get('seed', '?')} has no arm {', '.join(map(repr, lack))} (it has "
                        f"{', '.join(r.get('arms', {})) or 'none'})")
    if gaps:
        print(f"{prog}: {'; '.join(gaps)}: pass --arms with the arms the runs hold", file=sys.stderr)
    return bool(gaps)


def parse_seed_list(text: str | None, n: int) -> list[int]:
    """``--seed-list`` (``"0,2,5"``) or, without it, ``0 .. n-1``: distinct integers >= 0, else ``ValueError`` (one
    line naming the flag)."""
    if not text:
        if n > MAX_SEEDS:  # (was: list(range(1e9)) filled the memory before the first run)
            raise ValueError(f"--seeds {n}: expected at most {MAX_SEEDS} (one run per seed)")
        return list(range(n))
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise ValueError(f"--seed-list {text!r}: expected comma-separated integers") from None
    if min(seeds) < 0 or max(seeds) > MAX_SEED or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seed-list {text!r}: expected distinct seeds >= 0 (at most {MAX_SEED})")
    return seeds


def read_json_runs(paths: str) -> list[dict]:
    """The runs of ``--report-from`` (comma-separated ``--json-out`` files, each a JSON list of runs
    ``{"seed": int, "arms": {...}, ...}``), else ``ValueError`` naming the file and what it should hold."""
    runs: list[dict] = []
    if not paths.strip() or any(not p.strip() for p in paths.split(",")):
        raise ValueError(f"--report-from {paths!r}: an empty file name; expected comma-separated --json-out files")
    for path in paths.split(","):
        if Path(path).exists() and not Path(path).is_file():  # a FIFO: read_text blocks on it (was: a hang)
            kind = "a directory" if Path(path).is_dir() else "not a regular file"
            raise ValueError(f"--report-from {path!r}: {kind}; expected a --json-out file")
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"--report-from {path!r}: {' '.join(str(e).split())}") from None
        if not (isinstance(data, list) and data and all(
                isinstance(r, dict) and type(r.get("seed")) is int and 0 <= r["seed"] <= MAX_SEED
                and isinstance(r.get("arms"), dict) for r in data)):
            raise ValueError(f"--report-from {path!r}: expected a --json-out file (a non-empty JSON list of runs, "
                             "each with 'seed' and 'arms'; seed an integer >= 0)")
        runs += data
    return runs

"""The training-loop skeleton every frontend runs: resume, the iterations with a phase-labelled progress bar,
evaluation / checkpoint cadence, and a graceful stop on SIGTERM/SIGINT that every rank agrees on.

    latest = resume_latest(ckpt_dir, cfg.resume, trainer.load)           # None: a fresh run
    res = run_loop(trainer.step, start, total, save=trainer.save, save_every=10,
                   evaluate=trainer.evaluate_at, eval_every=5, desc="grpo")
    if res.stopped is None: ...final evaluation...

One iteration is ``step(phase)`` (the frontend's rollout -> reward -> advantages -> update -> log, calling
``phase("rollout")`` etc. to label the bar); after it, in this order:

1. a stop request (a signal on *any* rank, :func:`grpo.distributed.any_rank`, so every rank stops after the same
   iteration) saves a checkpoint and ends the loop (``stopped`` names the signal): a rerun resumes;
2. every ``eval_every`` iterations (not after the last one: the caller's final evaluation covers it)
   ``evaluate(iteration)``;
3. every ``save_every`` iterations (and after the last one with ``save_last``) ``save()``.

A step (or an evaluation) that cannot finish for a reason outside the run -- a reward server that stayed down
after its retries -- raises :class:`StopRun` having applied nothing of the iteration; the loop then saves a
checkpoint of the iterations done and ends (``error`` holds the reason): a rerun resumes from there and, once
the service is back, continues exactly as an uninterrupted run would have.

The same shape as CleanRL's ``ppo_continuous_action.py`` main loop and TRL's ``Trainer`` callbacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from .checkpoint import latest_checkpoint
from .distributed import any_rank, dist_info
from .signals import GracefulExit

Phase = Callable[[str], None]


def no_phase(name: str) -> None:
    """The phase callback outside :func:`run_loop` (no progress bar to label)."""


def resume_latest(ckpt_dir: str | Path, enabled: bool, load: Callable[[Path], Any]) -> Path | None:
    """``load(latest checkpoint in ckpt_dir)`` when ``enabled`` and one exists; returns its path (None: fresh run)."""
    latest = latest_checkpoint(ckpt_dir) if enabled else None
    if latest is not None:
        load(latest)
    return latest


class StopRun(RuntimeError):
    """Raised by a step that could not finish and left the trainer's state as it was before the step (nothing
    applied, random states restored), or by an evaluation: the loop saves a checkpoint and stops; a rerun resumes.
    Every rank must raise it in the same iteration (the frontends agree on it first)."""


@dataclass
class LoopResult:
    last: dict[str, float]  # the last iteration's scalars ({} when no iteration ran)
    stopped: str | None  # what stopped the run early (checkpoint saved), None when it ran to the end
    error: str | None = None  # the StopRun that stopped it (then ``stopped`` is the same text), else None


def run_loop(step: Callable[[Phase], dict[str, float]], start: int, total: int, *, save: Callable[[], Any],
             save_every: int, evaluate: Callable[[int], Any] | None = None, eval_every: int = 0,
             save_last: bool = True, desc: str = "train", progress: bool = True,
             postfix: Callable[[dict[str, float]], dict[str, Any]] | None = None) -> LoopResult:
    """Iterations ``start + 1 .. total`` of ``step`` (see the module docstring for the order of the checks).

    Args:
        step: one iteration; gets the phase callback (``phase("update")`` labels the bar ``desc[update]``), returns
            the iteration's scalars.
        start, total: iterations done so far (a resumed run's) and the run's length.
        save: writes a checkpoint (a collective: every rank calls it).
        save_every: checkpoint cadence in iterations; ``save_last``: also after the last iteration.
        evaluate: ``evaluate(iteration)`` every ``eval_every`` iterations (0: never mid-run); every rank calls it.
        desc, progress: the progress bar's label, and whether rank 0 shows it.
        postfix: the bar's postfix from an iteration's scalars.
    """
    main = dist_info().is_main
    bar = tqdm(range(start, total), initial=start, total=total, desc=desc, disable=not (progress and main))

    def phase(name: str) -> None:
        bar.set_description(f"{desc}[{name}]", refresh=False)

    last: dict[str, float] = {}
    stopped = error = None

    def stop_on(e: StopRun, where: str, saved: str = "checkpoint") -> None:  # save the iterations done, say where
        nonlocal stopped, error
        stopped = error = str(e)
        save()
        if main:
            print(f"stopped {where}: {e}; {saved} saved, rerun the command to resume", flush=True)

    with GracefulExit() as stop:
        for it in bar:
            try:
                last = step(phase)
            except StopRun as e:  # nothing of iteration it + 1 was applied
                stop_on(e, f"before iteration {it + 1} finished", f"checkpoint of iteration {it}")
                break
            done = it + 1
            if postfix is not None:
                bar.set_postfix(postfix(last))
            if any_rank(stop.requested is not None):  # every rank stops after the same iteration
                stopped = stop.requested or "a signal on another rank"
                save()
                if main:
                    print(f"stopped by {stopped} after iteration {done}; checkpoint saved, rerun to resume", flush=True)
                break
            if evaluate is not None and eval_every > 0 and done % eval_every == 0 and done < total:
                phase("eval")
                try:
                    evaluate(done)
                except StopRun as e:  # the iteration itself is complete
                    stop_on(e, f"in the evaluation after iteration {done}")
                    break
            if done % save_every == 0 or (save_last and done == total):
                save()
    bar.close()
    return LoopResult(last, stopped, error)

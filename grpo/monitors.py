"""Gold-reward monitors and the reward-hacking alarm (frontend-free).

A monitor is a score computed on the *evaluation* samples and never trained on (another reward model, a verifier,
a distribution statistic; for robots the simulator's real success beside a shaped training reward). The alarm reads,
at every evaluation ``e``, the training reward ``R_e`` (the trained reward on the evaluation samples, or the
rollouts' mean) and each monitor ``M_e`` (higher is better), and fires for a monitor when, over the last ``patience``
evaluations (``K``), the training reward rose while the monitor fell at every one of them::

    R_{e-K} < R_{e-K+1} < ... < R_e   and   M_{e-K} > M_{e-K+1} > ... > M_e      (strict, K transitions)
    and  M_{e-K} - M_e > min_delta                                                 (not a noise-level drift)

(the proxy keeps improving while the gold measure degrades: Goodhart, Gao et al. 2023 "Scaling laws for reward model
overoptimization"). ``action``: ``warn`` prints it, ``stop`` raises :class:`RewardHackingError` (the trainer saves
first; its best checkpoint is kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal


class RewardHackingError(RuntimeError):
    """The training reward rose while a monitor fell for ``patience`` evaluations, with ``action: stop``."""


@dataclass
class MonitorConfig:
    """The frontends' ``eval:`` section (monitors and the alarm)."""

    monitors: list[str] = field(default_factory=list)  # gold scores on evaluation samples, never trained on (reward
                                                       # names, "package.module:attr", or built-in statistics)
    patience: int = 3  # K: evaluations in a row with the training reward rising and a monitor falling before the alarm
    action: Literal["warn", "stop"] = "warn"  # warn | stop: what the alarm does (stop: the run ends after a
                          # checkpoint; the best one is kept)
    min_delta: float = 1e-3  # a monitor must fall by more than this over the K evaluations
                             # (noise-level drifts are ignored)

    def __post_init__(self) -> None:
        if self.patience < 1:
            raise ValueError(f"eval.patience must be >= 1, got {self.patience}")
        if self.min_delta < 0:
            raise ValueError(f"eval.min_delta must be >= 0, got {self.min_delta}")
        twice = sorted({m for m in self.monitors if self.monitors.count(m) > 1})
        if twice:
            raise ValueError(f"eval.monitors names {twice} more than once (expected distinct monitors)")


def unarmed_alarm_note(patience: int, iterations: int, eval_every: int, section: str = "train",
                       before: bool = True) -> str | None:
    """One line when a run of ``iterations`` with an evaluation every ``eval_every`` (0: none mid-run) makes fewer
    than the ``patience + 1`` evaluations the alarm compares, so it can never fire; else ``None``. The evaluations:
    before training (``before``; vla-rl's alarm starts at its first evaluation after an RL iteration, having no
    training reward before), every ``eval_every`` iterations short of the last, and after it: ``before + 1 +
    (iterations - 1) // eval_every`` (was: silent; shapes_branch.yaml's patience 2 at ``train.iterations=20
    train.eval_every=20`` watched a monitor fall 0.84 -> 0.42 without a word). ``section``: the config section holding
    the two keys."""
    n = int(before) + 1 + ((iterations - 1) // eval_every if eval_every > 0 and iterations > 0 else 0)
    if n >= patience + 1:
        return None
    return (f"note: eval.patience={patience} compares {patience + 1} evaluations, and this run makes {n} "
            f"({section}.iterations={iterations}, {section}.eval_every={eval_every}): the reward-hacking alarm cannot "
            "fire; the monitors are still logged (lower eval.patience or evaluate more often to arm it)")


@dataclass
class HackingAlarm:
    """Keeps the history of evaluations and checks the rule of the module docstring."""

    patience: int = 3
    action: Literal["warn", "stop"] = "warn"
    min_delta: float = 0.0  # the monitor's total fall over the window must exceed this
    history: list[tuple[int, float, dict[str, float]]] = field(default_factory=list)  # (iteration, R, {monitor: M})

    def observe(self, iteration: int, train_reward: float, monitors: dict[str, float],
                say: Callable[[str], None] = print) -> list[str]:
        """Record one evaluation; returns the monitors that fire now (warned about, or raised with ``stop``)."""
        self.history.append((iteration, float(train_reward), {k: float(v) for k, v in monitors.items()}))
        k = self.patience
        if len(self.history) < k + 1:
            return []
        win = self.history[-(k + 1):]
        rs = [r for _, r, _ in win]
        if not all(b > a for a, b in zip(rs, rs[1:])):
            return []
        fired = []
        for name in monitors:
            ms = [m.get(name) for _, _, m in win]
            if None not in ms and all(b < a for a, b in zip(ms, ms[1:])) and ms[0] - ms[-1] > self.min_delta:
                fired.append(name)
        if fired:
            its = [i for i, _, _ in win]
            msg = (f"reward hacking suspected at iteration {iteration}: the training reward rose "
                   f"{rs[0]:.4g} -> {rs[-1]:.4g} over the last {k} evaluations (iterations {its[0]}..{its[-1]}) while "
                   + ", ".join(f"monitor {n!r} fell {win[0][2][n]:.4g} -> {win[-1][2][n]:.4g}" for n in fired)
                   + "; look at the evaluation samples, and prefer the best checkpoint (checkpoints/best)")
            if self.action == "stop":
                raise RewardHackingError(msg + " (stopping: eval.action=stop)")
            say("warning: " + msg)
        return fired

    def state_dict(self) -> dict:
        return {"history": [[i, r, m] for i, r, m in self.history]}

    def load_state_dict(self, st: dict | None) -> None:
        self.history = [(int(i), float(r), dict(m)) for i, r, m in (st or {}).get("history", [])]

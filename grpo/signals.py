"""Graceful stop on SIGTERM/SIGINT: the training loop finishes its step, saves, and exits cleanly.

    with GracefulExit() as stop:
        for it in ...:
            ...one iteration...
            if stop.requested:
                save_checkpoint(...); break

A second signal of the same kind while stopping restores the default handler's behaviour (hard exit).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


class GracefulExit:
    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)):
        self.signals = signals
        self.requested: str | None = None
        self._old: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested:  # second signal: stop now
            signal.signal(signum, self._old.get(signum, signal.SIG_DFL))  # type: ignore[arg-type]
            signal.raise_signal(signum)
            return
        self.requested = name
        print(f"\n{name} received: finishing this step, saving a checkpoint and exiting (send again to abort)",
              flush=True)

    def __enter__(self) -> "GracefulExit":
        if threading.current_thread() is threading.main_thread():
            for s in self.signals:
                self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)  # type: ignore[arg-type]

"""Retry a flaky call (a reward model, a remote scorer) and report the batch it failed on.

    out = call_with_retry(reward, batch, retries=2, what="reward 'pickscore'", describe=lambda b: b.prompts)

Each failure is logged with its exception; after ``retries`` extra attempts a :class:`RetryError` names
the callable, the attempts, the last exception and a description of the input batch.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, TypeVar

R = TypeVar("R")
log = logging.getLogger(__name__)


class RetryError(RuntimeError):
    """A call that kept failing; ``.batch`` is the description of the input it failed on."""

    def __init__(self, message: str, batch: Any):
        super().__init__(message)
        self.batch = batch


def call_with_retry(
    fn: Callable[..., R],
    *args: Any,
    retries: int = 2,
    backoff_s: float = 0.5,
    what: str | None = None,
    describe: Callable[..., Any] | None = None,
    **kwargs: Any,
) -> R:
    """``fn(*args, **kwargs)``, retried ``retries`` times with exponential backoff on any ``Exception``."""
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    name = what or getattr(fn, "__name__", type(fn).__name__)
    last: Exception | None = None
    for attempt in range(retries + 1):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - we re-raise below with context
            last = e
            log.warning("%s failed (attempt %d/%d): %r", name, attempt + 1, retries + 1, e)
            if attempt < retries and backoff_s > 0:
                time.sleep(backoff_s * 2**attempt)
    batch = describe(*args, **kwargs) if describe is not None else None
    raise RetryError(f"{name} failed {retries + 1} times; last error: {last!r}; batch: {batch!r}", batch) from last

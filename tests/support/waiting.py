"""Waiting for something a test expects to happen, with one default bound.

The bound is a liveness bound, never a measure of speed: a wait that passes returns as soon as
its condition holds, so a generous bound costs nothing when the code works and only delays the
report when it does not. A test whose condition takes longer on this machine (a Spark job, a
broker restart) passes ``timeout_s`` explicitly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

DEFAULT_TIMEOUT_S = 30.0

# Between checks the wait pauses a tenth of the time waited so far, within these bounds: a wait
# ends at most 10% (and 0.1 s) after its condition holds, and a long wait (a Spark job, a broker's
# offsets) checks ten times a second, not hundreds.
_MIN_POLL_S = 0.001
_MAX_POLL_S = 0.1


def wait_until(
    predicate: Callable[[], object], timeout_s: float = DEFAULT_TIMEOUT_S, what: str = "condition"
) -> None:
    """Return once ``predicate()`` is true; raise AssertionError naming ``what`` after ``timeout_s``."""
    start = time.monotonic()
    deadline = start + timeout_s
    pause = threading.Event()  # never set: Event.wait is the pause between checks
    while not predicate():
        now = time.monotonic()
        if now >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        pause.wait(min(max(_MIN_POLL_S, (now - start) / 10), _MAX_POLL_S, deadline - now))


def wait_for_event(event: threading.Event, timeout_s: float = DEFAULT_TIMEOUT_S, what: str = "event") -> None:
    """Return once ``event`` is set; raise AssertionError naming ``what`` after ``timeout_s``."""
    if not event.wait(timeout_s):
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")

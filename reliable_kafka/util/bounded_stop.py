"""Stop something on a helper thread and wait for it at most a bound.

A stop calls into things that may never answer: kazoo joins a watch callback that retries against
a ZooKeeper that is gone, a py4j call waits on a JVM that is going away, a consumer polls a broker
that was killed. The process must still get out within a bound, so the stop runs on a daemon
thread; past the bound the caller goes on without it, and the log says what was abandoned and
where it was stuck. An abandoned stop keeps running and may still finish; nothing joins it.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections.abc import Callable

logger = logging.getLogger(__name__)


def stop_within(what: str, stop: Callable[[], object], timeout_s: float | None) -> bool:
    """Run ``stop()`` on a daemon thread; True if it returned within ``timeout_s`` (None: no bound).

    An exception raised by ``stop()`` within the bound is raised here, as a direct call would.
    Called from a thread that ``stop()`` itself would join, this still bounds the wait.
    """
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            stop()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    helper = threading.Thread(target=run, name=f"stop {what}", daemon=True)
    helper.start()
    if not join_within(helper, timeout_s):
        return False
    error = outcome[0]
    if error is not None:
        raise error
    return True


def seconds(ms: float) -> str:
    """A bound for a log line, ``20 s`` or ``0.3 s``: a stop's messages name every bound in one
    unit, so that the bound a stop announced is the one it reports running out."""
    return f"{ms / 1000:g} s"


def join_within(thread: threading.Thread, timeout_s: float | None) -> bool:
    """Join ``thread`` at most ``timeout_s``; True if it ended. Logs where it was stuck if not."""
    thread.join(timeout_s)
    if thread.is_alive():
        logger.warning(
            "Abandoned waiting for thread %s after %s; it was stuck at:\n%s",
            thread.name,
            seconds(timeout_s * 1000),
            _stack_of(thread),
        )
        return False
    return True


def _stack_of(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return "  (its stack is gone: it finished meanwhile)"
    return "".join(traceback.format_stack(frame)).rstrip()

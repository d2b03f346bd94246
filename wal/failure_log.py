"""Logging for retry loops: the first failure with its traceback, then one line per retry, then
one line when the operation succeeds again. A failing disk or server retried many times a
second would otherwise print a full traceback each time and bury everything else.

Standalone like the rest of ``wal`` (the write-ahead logs use it); ``reliable_kafka`` uses the
same class for its own retry loops.

Layers stack (a write-ahead log under a group-commit log under the driver's block tracker), and
each retries or reports what the layer below raised from the same root failure: a failure some
FailureLog already reported (the exception itself, or one it was raised from) is logged by the
next as one line, so one failed write shows one traceback, not one per layer.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass

# Set on an exception once a FailureLog has reported it (with its traceback, or as a line of a
# streak whose first failure showed one).
_REPORTED = "_failure_log_reported"


@dataclass
class _Streak:
    failures: int
    since: float
    last_text: str | None = None


# The shared operations failing now, by (logger, what): see FailureLog's ``shared``. Only failing
# operations are kept; success removes them.
_SHARED: dict[tuple[str, str], _Streak] = {}
_SHARED_LOCK = threading.Lock()


class FailureLog:
    """One per retried operation (``what`` names it in every line); thread-safe.

    ``shared``: the streak outlives this FailureLog, and every shared FailureLog of the same
    logger and ``what`` continues it. For an operation whose owner is replaced while it fails
    (a relaunched receiver's new write-ahead log on the same directory): a new streak would show
    the same traceback again at every relaunch. Only for a ``what`` that names one operation of
    the process (a directory, a stream), never a generic one two live owners would share.
    """

    def __init__(
        self, logger: logging.Logger, what: str, level: int = logging.WARNING, *, shared: bool = False
    ) -> None:
        self._logger = logger
        self._what = what
        self._level = level
        self._key = (logger.name, what)
        self._streaks = _SHARED if shared else {}
        self._lock = _SHARED_LOCK if shared else threading.Lock()

    @property
    def failing(self) -> bool:
        # No lock: callers on a hot path only ask whether to call succeeded(), which locks.
        return self._key in self._streaks

    def failed(self, error: BaseException | str, detail: str = "", *, traceback: bool = True) -> None:
        """Log a failure: with its traceback if it is the first of a run, else one line.

        ``traceback=False``: an error whose message is the whole story (a refusal, not a fault),
        logged without one but still an exception, so that whether it was reported is kept.

        ``error`` may be text: a failure another process reported (a receiver on an executor),
        whose traceback stays with that process. Repeated word for word, as a failure retried
        against the same broken server is, it becomes "the same error" after the first line.
        A failure a lower layer has reported already (see the module's note) is, after the
        first line of the streak, logged at DEBUG: that layer's lines already count its retries.
        """
        reported = isinstance(error, BaseException) and already_reported(error)
        with self._lock:
            streak = self._streaks.get(self._key)
            if streak is None:
                streak = self._streaks[self._key] = _Streak(0, time.monotonic())
            streak.failures += 1
            failures = streak.failures
            same = isinstance(error, str) and error == streak.last_text
            streak.last_text = error if isinstance(error, str) else None
        suffix = f" ({detail})" if detail else ""
        if failures == 1:
            exc_info = error if isinstance(error, BaseException) and traceback and not reported else None
            self._logger.log(self._level, "%s failed%s: %s", self._what, suffix, error, exc_info=exc_info)
        else:
            shown = repr(error) if isinstance(error, BaseException) else error
            self._logger.log(
                logging.DEBUG if reported else self._level,
                "%s failed again%s, %d failures in a row: %s",
                self._what,
                suffix,
                failures,
                "the same error" if same else shown,
            )
        if isinstance(error, BaseException):
            _mark_reported(error)

    def succeeded(self) -> None:
        """Log the recovery, once, if the operation had been failing."""
        with self._lock:
            streak = self._streaks.pop(self._key, None)
        if streak is not None:
            self._logger.log(
                self._level,
                "%s succeeded again after %d failure(s) over %.1f s",
                self._what,
                streak.failures,
                time.monotonic() - streak.since,
            )


def already_reported(error: BaseException) -> bool:
    """Whether a FailureLog reported ``error``, or an exception it was raised from (or during):
    a layer above the one that retries can then say less."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if getattr(current, _REPORTED, False):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def mark_reported(error: BaseException) -> None:
    """Count ``error`` as reported: for an error that stands for a failure a FailureLog is already
    reporting (a refusal because an operation keeps failing), so that the layers above log it as
    one line, and its repeats at DEBUG, rather than a traceback and a line per retry each."""
    _mark_reported(error)


def _mark_reported(error: BaseException) -> None:
    # An exception type without attributes: its traceback may show twice, no more.
    with contextlib.suppress(AttributeError):
        setattr(error, _REPORTED, True)

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

# Set on an exception once a FailureLog has reported it (with its traceback, or as a line of a
# streak whose first failure showed one).
_REPORTED = "_failure_log_reported"


class FailureLog:
    """One per retried operation (``what`` names it in every line); thread-safe."""

    def __init__(self, logger: logging.Logger, what: str, level: int = logging.WARNING) -> None:
        self._logger = logger
        self._what = what
        self._level = level
        self._lock = threading.Lock()
        self._failures = 0
        self._since = 0.0
        self._last_text: str | None = None

    @property
    def failing(self) -> bool:
        # No lock: callers on a hot path only ask whether to call succeeded(), which locks.
        return self._failures > 0

    def failed(self, error: BaseException | str, detail: str = "") -> None:
        """Log a failure: with its traceback if it is the first of a run, else one line.

        ``error`` may be text: a failure another process reported (a receiver on an executor),
        whose traceback stays with that process. Repeated word for word, as a failure retried
        against the same broken server is, it becomes "the same error" after the first line.
        """
        with self._lock:
            self._failures += 1
            failures = self._failures
            if failures == 1:
                self._since = time.monotonic()
                self._last_text = None
            same = isinstance(error, str) and error == self._last_text
            self._last_text = error if isinstance(error, str) else None
        suffix = f" ({detail})" if detail else ""
        if failures == 1:
            exc_info = error if isinstance(error, BaseException) and not _reported(error) else None
            self._logger.log(self._level, "%s failed%s: %s", self._what, suffix, error, exc_info=exc_info)
        else:
            shown = repr(error) if isinstance(error, BaseException) else error
            self._logger.log(
                self._level,
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
            failures, self._failures = self._failures, 0
            since = self._since
        if failures:
            self._logger.log(
                self._level,
                "%s succeeded again after %d failure(s) over %.1f s",
                self._what,
                failures,
                time.monotonic() - since,
            )


def _reported(error: BaseException) -> bool:
    """Whether ``error`` or an exception it was raised from (or during) was reported already."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if getattr(current, _REPORTED, False):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _mark_reported(error: BaseException) -> None:
    # An exception type without attributes: its traceback may show twice, no more.
    with contextlib.suppress(AttributeError):
        setattr(error, _REPORTED, True)

"""Ctrl-C (SIGINT) on a running streaming application: stop it as a shutdown does, quietly.

pyspark's own SIGINT handler cancels every Spark job and raises ``KeyboardInterrupt``. In a
streaming application the receivers are Spark jobs, so a Ctrl-C cancelled them mid-block and
printed each one's failure with its Java stack, then the traceback. Spark's Scala applications
instead run their shutdown hook on Ctrl-C: the StreamingContext stops (gracefully with
``spark.streaming.stopGracefullyOnShutdown``) and the JVM exits. :class:`CtrlCStop` does that:
the first Ctrl-C prints one line, stops the context and ends the program with exit status 130
(``SystemExit``: ``finally`` blocks run, no traceback); a second Ctrl-C during that stop gets the
handler there was before (pyspark's), for a user who will not wait.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

# What a shell reports for a program ended by SIGINT.
EXIT_STATUS = 128 + signal.SIGINT

Handler = Callable[[int, FrameType | None], Any] | int


class CtrlCStop:
    """Installed while a context runs (main thread only); ``stop()`` is the context's stop, with
    its graceful choice made; ``stopping()`` says whether a stop is under way already."""

    def __init__(self, stop: Callable[[], None], stopping: Callable[[], bool], how: str) -> None:
        self._stop = stop
        self._stopping = stopping
        self._how = how
        self._previous: Handler | None = None
        self._handler: Handler | None = None

    def install(self) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False
        previous = signal.getsignal(signal.SIGINT)
        if previous is None or previous == signal.SIG_IGN:  # not Python's, or Ctrl-C is ignored
            return False
        self._previous = previous
        self._handler = self._on_sigint
        signal.signal(signal.SIGINT, self._handler)
        return True

    def restore(self) -> None:
        """Put the previous handler back, if ours is still the one installed (main thread only)."""
        if self._handler is None or self._previous is None:
            return
        try:
            if signal.getsignal(signal.SIGINT) == self._handler:
                signal.signal(signal.SIGINT, self._previous)
        except ValueError:  # not the main thread: the handler stays until the next restore
            return
        self._handler = None

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous
        if self._stopping():
            # A second Ctrl-C, or one during a stop the program made: what Ctrl-C did before.
            if callable(previous):
                previous(signum, frame)
                return
            raise KeyboardInterrupt
        sys.stderr.write(f"Ctrl-C: stopping the streaming context {self._how}; Ctrl-C again stops at once\n")
        sys.stderr.flush()
        self._stop()
        raise SystemExit(EXIT_STATUS)

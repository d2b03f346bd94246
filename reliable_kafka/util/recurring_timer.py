"""Spark's ``RecurringTimer``: call back at every multiple of a period, on a daemon thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from reliable_kafka.util.clock import Clock

logger = logging.getLogger(__name__)


class RecurringTimer:
    """Calls ``callback(time_ms)`` at ``start_time + k * period_ms``.

    Ticks are aligned to multiples of the period (as Spark does), so every timer with the same
    period fires at the same instants whatever its start time. A callback slower than the period
    delays later ticks; it never runs two at once.
    """

    def __init__(self, clock: Clock, period_ms: int, callback: Callable[[int], None], name: str) -> None:
        if period_ms <= 0:
            raise ValueError(f"timer period must be > 0 ms, got {period_ms}")
        self._clock = clock
        self.period_ms = period_ms
        self._callback = callback
        self.name = name
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._stopped = threading.Event()
        self._interrupted = threading.Event()
        self._next_time = -1
        self._prev_time = -1

    def get_start_time(self) -> int:
        """The next multiple of the period after now."""
        return (self._clock.get_time_ms() // self.period_ms + 1) * self.period_ms

    def start(self, start_time_ms: int | None = None) -> int:
        self._next_time = self.get_start_time() if start_time_ms is None else start_time_ms
        self._prev_time = self._next_time - self.period_ms
        self._thread.start()
        logger.info("Started timer for %s at time %d", self.name, self._next_time)
        return self._next_time

    def stop(self, interrupt_timer: bool) -> int:
        """Stop and join the timer thread; returns the time of the last callback.

        ``interrupt_timer=False`` lets the timer wait for its next tick and call back once more
        (a graceful stop); ``True`` wakes it at once and skips that tick. A callback already
        running is never cut short.
        """
        self._stopped.set()
        if interrupt_timer:
            self._interrupted.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join()
        logger.info("Stopped timer for %s after time %d", self.name, self._prev_time)
        return self._prev_time

    def _loop(self) -> None:
        # Runs ticks until stopped; a graceful stop still honours the tick being waited for.
        while True:
            self._clock.wait_till_time(self._next_time, self._interrupted)
            if self._interrupted.is_set():
                return
            try:
                self._callback(self._next_time)
            except Exception:
                # One failed tick must not end every later tick.
                logger.exception("Timer %s callback failed at time %d", self.name, self._next_time)
            self._prev_time = self._next_time
            self._next_time += self.period_ms
            if self._stopped.is_set():
                return

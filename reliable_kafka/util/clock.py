"""Spark's ``Clock``: wall-clock milliseconds and an interruptible wait, replaceable in tests."""

from __future__ import annotations

import threading
import time
from typing import Protocol


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the one wall clock of batch, block and store times."""
    return time.time_ns() // 1_000_000


class Clock(Protocol):
    def get_time_ms(self) -> int: ...

    def wait_till_time(self, target_ms: int, interrupt: threading.Event | None = None) -> int:
        """Block until ``target_ms`` or until ``interrupt`` is set; returns the time on waking."""
        ...


class SystemClock:
    def get_time_ms(self) -> int:
        return wall_clock_ms()

    def wait_till_time(self, target_ms: int, interrupt: threading.Event | None = None) -> int:
        # Event.wait measures on the monotonic clock; the loop re-checks the wall clock, so a
        # wake-up a little early (or a wall-clock step) only costs another short wait.
        while True:
            now = self.get_time_ms()
            if now >= target_ms:
                return now
            remaining_s = (target_ms - now) / 1000
            if interrupt is None:
                time.sleep(remaining_s)
            elif interrupt.wait(remaining_s):
                return self.get_time_ms()


class ManualClock:
    """A clock that only moves when told to (Spark's ``ManualClock``)."""

    # How often a waiter re-checks its interrupt event; only tests use this clock.
    _INTERRUPT_POLL_S = 0.01

    def __init__(self, time_ms: int = 0) -> None:
        self._time_ms = time_ms
        self._changed = threading.Condition()

    def get_time_ms(self) -> int:
        with self._changed:
            return self._time_ms

    def set_time(self, time_ms: int) -> None:
        with self._changed:
            self._time_ms = time_ms
            self._changed.notify_all()

    def advance(self, delta_ms: int) -> None:
        with self._changed:
            self._time_ms += delta_ms
            self._changed.notify_all()

    def wait_till_time(self, target_ms: int, interrupt: threading.Event | None = None) -> int:
        with self._changed:
            while self._time_ms < target_ms:
                if interrupt is not None and interrupt.is_set():
                    break
                self._changed.wait(self._INTERRUPT_POLL_S if interrupt is not None else None)
            return self._time_ms

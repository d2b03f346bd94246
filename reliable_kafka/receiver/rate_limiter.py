"""Spark's receiver ``RateLimiter``: at most N records per second, updatable at run time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


class _SmoothBurstyBucket:
    """Guava's ``SmoothBursty`` token bucket, which Spark's receivers use.

    Permits accrue at ``rate`` per second while nobody takes them, up to ``max_burst_s`` seconds'
    worth. A taker gets its permits at once and the *next* taker waits for them ("pay later"),
    so one large acquire does not stall its own caller, and time lost to late wake-ups is never
    lost from the rate: the schedule advances by fixed intervals from ``next_free_s``.
    """

    def __init__(self, rate: float, max_burst_s: float, now_s: float) -> None:
        self._max_burst_s = max_burst_s
        self._stored = 0.0
        self._max_permits = 0.0
        self._interval_s = 0.0
        self._next_free_s = now_s
        self.rate = 0.0
        self.set_rate(rate, now_s)

    def _resync(self, now_s: float) -> None:
        if now_s > self._next_free_s:
            accrued = (now_s - self._next_free_s) / self._interval_s
            self._stored = min(self._max_permits, self._stored + accrued)
            self._next_free_s = now_s

    def set_rate(self, rate: float, now_s: float) -> None:
        if self._interval_s > 0:
            self._resync(now_s)
        self.rate = rate
        self._interval_s = 1.0 / rate
        old_max = self._max_permits
        self._max_permits = self._max_burst_s * rate
        self._stored = 0.0 if old_max == 0.0 else self._stored * self._max_permits / old_max

    def reserve(self, permits: int, now_s: float) -> float:
        """Take ``permits``; returns how long the caller must wait before using them."""
        self._resync(now_s)
        ready_at = self._next_free_s
        from_store = min(float(permits), self._stored)
        self._next_free_s += (permits - from_store) * self._interval_s
        self._stored -= from_store
        return max(0.0, ready_at - now_s)


class RateLimiter:
    """Throttles a receiver's records to ``max_rate`` per second (None or <= 0: unlimited).

    ``update_rate`` changes the rate at run time (the backpressure controller's updates): a rate
    below the maximum applies, one above it is capped at the maximum, and a rate <= 0 is ignored.
    Without a maximum any positive update applies, as in Spark.
    """

    def __init__(
        self,
        max_rate: int | None = None,
        *,
        initial_rate: int | None = None,
        max_burst_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.max_rate = max_rate if max_rate is not None and max_rate > 0 else None
        self._max_burst_s = max_burst_s
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        rate = self.max_rate
        if initial_rate is not None and initial_rate > 0:
            rate = initial_rate if rate is None else min(initial_rate, rate)
        self._bucket = None if rate is None else _SmoothBurstyBucket(rate, max_burst_s, monotonic())

    def wait_to_push(self) -> None:
        self.acquire(1)

    def acquire(self, permits: int = 1) -> None:
        """Block until ``permits`` records may be pushed."""
        bucket = self._bucket
        if bucket is None or permits <= 0:
            return
        with self._lock:
            wait_s = bucket.reserve(permits, self._monotonic())
        if wait_s > 0:
            self._sleep(wait_s)

    def get_current_limit(self) -> int | None:
        """Records per second now allowed; None while unlimited."""
        bucket = self._bucket
        return None if bucket is None else int(bucket.rate)

    def update_rate(self, new_rate: int) -> None:
        if new_rate <= 0:
            logger.debug("Ignoring rate update to %d", new_rate)
            return
        rate = new_rate if self.max_rate is None else min(new_rate, self.max_rate)
        with self._lock:
            if self._bucket is None:
                self._bucket = _SmoothBurstyBucket(rate, self._max_burst_s, self._monotonic())
            else:
                self._bucket.set_rate(rate, self._monotonic())
        logger.debug("Rate limit updated to %d records/s (requested %d)", rate, new_rate)

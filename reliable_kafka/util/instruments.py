"""Process-wide instruments that the data path feeds and the status page's ``/metrics`` reads.

WAL write latency, offset commit latency and failures, and the bytes held by block stores come
from code that knows nothing of the UI, so they are recorded here: plain counters behind one
lock, no I/O and no metrics library, so that recording costs a lock and a bisect. They are
per process: with receivers on executors, an executor's writes and commits are counted in that
executor's process, not on the driver's page.
"""

from __future__ import annotations

import bisect
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")

# Seconds; fsyncs and ZooKeeper round trips sit between a millisecond and a few seconds.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """Cumulative counts per upper bound (the last bound is +Inf), with the sum and count."""

    upper_bounds: tuple[float, ...]
    cumulative_counts: tuple[int, ...]
    sum: float
    count: int


class Histogram:
    """Observations counted into fixed buckets; thread-safe, O(log buckets) per observation."""

    def __init__(self, buckets: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        self._bounds = tuple(sorted(buckets))
        self._counts = [0] * (len(self._bounds) + 1)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bound's bucket (le).
        index = bisect.bisect_left(self._bounds, value)
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, running = [], 0
        for count in counts:
            running += count
            cumulative.append(running)
        return HistogramSnapshot((*self._bounds, float("inf")), tuple(cumulative), total, running)


class Counter:
    def __init__(self) -> None:
        self._value = 0
        self._lock = threading.Lock()

    def inc(self, amount: int = 1) -> None:
        with self._lock:
            self._value += amount

    @property
    def value(self) -> int:
        return self._value


class SizedStore(Protocol):
    @property
    def stored_bytes(self) -> int: ...


class StoreSizes:
    """Block stores of this process, weakly held, summed when read (not on every put)."""

    def __init__(self) -> None:
        self._stores: weakref.WeakSet[SizedStore] = weakref.WeakSet()
        self._lock = threading.Lock()

    def track(self, store: SizedStore) -> None:
        with self._lock:
            self._stores.add(store)

    def total_bytes(self) -> int:
        with self._lock:
            stores = list(self._stores)
        return sum(store.stored_bytes for store in stores)


WAL_WRITE_SECONDS = Histogram()
OFFSET_COMMIT_SECONDS = Histogram()
OFFSET_COMMIT_FAILURES = Counter()
BLOCK_STORES = StoreSizes()


def timed(histogram: Histogram, call: Callable[..., T], *args: object) -> T:
    """``call(*args)``, its duration observed in ``histogram`` whether it returns or raises."""
    started = time.perf_counter()
    try:
        return call(*args)
    finally:
        histogram.observe(time.perf_counter() - started)

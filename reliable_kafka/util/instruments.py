"""Process-wide instruments that the data path feeds and the status page's ``/metrics`` reads.

WAL write latency, offset commit latency and failures, and the bytes held by block stores come
from code that knows nothing of the UI, so they are recorded here: plain counters behind one
lock, no I/O and no metrics library, so that recording costs a lock and a bisect. They are
per process: with receivers on executors, each receiver task sends its process's snapshot to
the driver over the tracker socket every few seconds (:class:`InstrumentsSnapshot`, plain data),
and the driver's page shows its own figures plus every executor process's latest
(:func:`combined_snapshot`).
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
# Blocks a receiver's block server sent to readers on other hosts (same-host readers open the file).
BLOCKS_SERVED = Counter()
# Blocks a batch task read again from their source (Kafka) because every copy was lost. Counted
# in the batch tasks' processes: visible to a test of them, not reported to the driver.
BLOCKS_REREAD = Counter()
# Second copies of other receivers' blocks a receiver's block server stored (levels with replication 2).
REPLICAS_KEPT = Counter()
# Blocks a batch task read from their second copy because the first was gone with its executor or
# host. Counted in the batch tasks' processes, like BLOCKS_REREAD.
BLOCKS_FROM_REPLICA = Counter()


def timed(histogram: Histogram, call: Callable[..., T], *args: object) -> T:
    """``call(*args)``, its duration observed in ``histogram`` whether it returns or raises."""
    started = time.perf_counter()
    try:
        return call(*args)
    finally:
        histogram.observe(time.perf_counter() - started)


@dataclass(frozen=True, slots=True)
class InstrumentsSnapshot:
    """One process's instruments, cumulative since it started."""

    wal_write: HistogramSnapshot
    offset_commit: HistogramSnapshot
    commit_failures: int
    block_store_bytes: int
    blocks_served: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "wal_write": _histogram_to_dict(self.wal_write),
            "offset_commit": _histogram_to_dict(self.offset_commit),
            "commit_failures": self.commit_failures,
            "block_store_bytes": self.block_store_bytes,
            "blocks_served": self.blocks_served,
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> InstrumentsSnapshot:
        failures, stored = d.get("commit_failures"), d.get("block_store_bytes")
        served = d.get("blocks_served", 0)  # absent from an older executor's report
        if not isinstance(failures, int) or not isinstance(stored, int) or not isinstance(served, int):
            raise ValueError(
                "InstrumentsSnapshot: commit_failures, block_store_bytes and blocks_served must be ints"
            )
        wal_write, offset_commit = (
            _histogram_from_dict(d["wal_write"]),
            _histogram_from_dict(d["offset_commit"]),
        )
        return cls(wal_write, offset_commit, failures, stored, served)


def _histogram_to_dict(h: HistogramSnapshot) -> dict[str, object]:
    # +Inf is not msgpack-portable as a bound: the last bucket is implied.
    return {"bounds": list(h.upper_bounds[:-1]), "counts": list(h.cumulative_counts), "sum": h.sum}


def _histogram_from_dict(d: object) -> HistogramSnapshot:
    if not isinstance(d, dict):
        raise ValueError(f"histogram: expected a map, got {type(d).__name__}")
    bounds, counts, total = d.get("bounds"), d.get("counts"), d.get("sum")
    if (
        not isinstance(bounds, list)
        or not isinstance(counts, list)
        or len(counts) != len(bounds) + 1
        or not all(isinstance(c, int) for c in counts)
        or not isinstance(total, int | float)
    ):
        raise ValueError("histogram: malformed bounds, counts or sum")
    return HistogramSnapshot((*map(float, bounds), float("inf")), tuple(counts), float(total), counts[-1])


def local_snapshot() -> InstrumentsSnapshot:
    return InstrumentsSnapshot(
        WAL_WRITE_SECONDS.snapshot(),
        OFFSET_COMMIT_SECONDS.snapshot(),
        OFFSET_COMMIT_FAILURES.value,
        BLOCK_STORES.total_bytes(),
        BLOCKS_SERVED.value,
    )


class RemoteInstruments:
    """The latest snapshot of each executor process that runs (or ran) a receiver."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, InstrumentsSnapshot] = {}

    def update(self, source: str, snapshot: InstrumentsSnapshot) -> None:
        with self._lock:
            self._latest[source] = snapshot

    def snapshots(self) -> list[InstrumentsSnapshot]:
        with self._lock:
            return list(self._latest.values())

    def clear(self) -> None:
        with self._lock:
            self._latest.clear()


REMOTE_INSTRUMENTS = RemoteInstruments()


def combined_snapshot() -> InstrumentsSnapshot:
    """This process's instruments plus every executor process's latest; counts only grow, as
    an ended process keeps its last report (its blocks' bytes go when it reports them gone)."""
    total = local_snapshot()
    for other in REMOTE_INSTRUMENTS.snapshots():
        total = InstrumentsSnapshot(
            _add(total.wal_write, other.wal_write),
            _add(total.offset_commit, other.offset_commit),
            total.commit_failures + other.commit_failures,
            total.block_store_bytes + other.block_store_bytes,
            total.blocks_served + other.blocks_served,
        )
    return total


def _add(a: HistogramSnapshot, b: HistogramSnapshot) -> HistogramSnapshot:
    if a.upper_bounds != b.upper_bounds:
        return a  # another version's buckets: not addable, keep ours
    counts = tuple(x + y for x, y in zip(a.cumulative_counts, b.cumulative_counts, strict=True))
    return HistogramSnapshot(a.upper_bounds, counts, a.sum + b.sum, a.count + b.count)

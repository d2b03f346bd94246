"""A receiver tracker stand-in with the real one's interface, and helpers to drive a context."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from pyspark import RDD

from reliable_kafka.context import StreamingContext
from reliable_kafka.dstream.input_dstream import InputDStream


class FakeReceiverTracker:
    """Keeps records per stream as 'blocks' (one int each: its record count) and logs every call."""

    def __init__(self, ssc: Any = None, skip_receiver_launch: bool = False) -> None:
        self.ssc = ssc
        self.lock = threading.Lock()
        self.calls: list[tuple[str, Any]] = []
        self.unallocated: dict[int, list[int]] = {}
        self.allocated: dict[int, dict[int, list[int]]] = {}
        self.completed: set[int] = set()
        self.cleanups: list[int] = []
        self.recovered_pending: list[int] = []
        self.started = False
        self.stopped_graceful: bool | None = None

    # test side
    def add_block(self, stream_id: int, num_records: int) -> None:
        with self.lock:
            self.unallocated.setdefault(stream_id, []).append(num_records)

    def call_names(self) -> list[str]:
        with self.lock:
            return [name for name, _ in self.calls]

    def _log(self, name: str, arg: Any = None) -> None:
        with self.lock:
            self.calls.append((name, arg))

    # ReceiverTracker interface
    def start(self) -> None:
        self._log("start")
        self.started = True

    def stop(self, graceful: bool) -> None:
        self._log("stop", graceful)
        self.stopped_graceful = graceful

    def release_receivers(self) -> None:
        self._log("release")

    def allocate_blocks_to_batch(self, time_ms: int) -> None:
        self._log("allocate", time_ms)
        with self.lock:
            if self.allocated and time_ms <= max(self.allocated):
                return
            self.allocated[time_ms] = {sid: list(blocks) for sid, blocks in self.unallocated.items()}
            self.unallocated = {}

    def get_blocks_of_batch(self, time_ms: int) -> dict[int, list[Any]]:
        with self.lock:
            return {sid: list(blocks) for sid, blocks in self.allocated.get(time_ms, {}).items()}

    def has_unallocated_blocks(self) -> bool:
        with self.lock:
            return any(self.unallocated.values())

    def cleanup_old_blocks_and_batches(self, clean_threshold_ms: int) -> None:
        self._log("cleanup", clean_threshold_ms)
        with self.lock:
            self.cleanups.append(clean_threshold_ms)
            for batch_time in [t for t in self.allocated if t < clean_threshold_ms]:
                del self.allocated[batch_time]

    def on_batch_completed(self, time_ms: int) -> None:
        self._log("completed", time_ms)
        with self.lock:
            self.completed.add(time_ms)

    def pending_batch_times(self) -> list[int]:
        with self.lock:
            return sorted({*self.recovered_pending, *(t for t in self.allocated if t not in self.completed)})

    def deallocate_batches(self, batch_times_ms: list[int]) -> list[int]:
        self._log("deallocate", list(batch_times_ms))
        pending = set(self.pending_batch_times())
        with self.lock:
            returned = sorted(pending.intersection(batch_times_ms))
            requeued: dict[int, list[int]] = {}
            for t in returned:
                if t in self.recovered_pending:
                    self.recovered_pending.remove(t)
                for sid, blocks in self.allocated.pop(t, {}).items():
                    requeued.setdefault(sid, []).extend(blocks)
            for sid, blocks in self.unallocated.items():
                requeued.setdefault(sid, []).extend(blocks)
            self.unallocated = requeued
        return returned

    def num_records_of_batch(self, time_ms: int) -> dict[int, int]:
        with self.lock:
            return {sid: sum(blocks) for sid, blocks in self.allocated.get(time_ms, {}).items()}

    def all_receivers_stopped(self) -> bool:
        return self.stopped_graceful is not None


def processed(ssc: StreamingContext, time_ms: int) -> bool:
    """True once the batch of ``time_ms`` (and all before it) ran, was cleared and checkpointed."""
    generator = ssc.scheduler.job_generator
    last = generator.last_processed_batch_ms
    return last is not None and last >= time_ms and generator.has_processed_up_to(time_ms)


class FakeReceiverInputStream(InputDStream):
    """A receiver stream over the fake tracker: each batch is ``range(records allocated to it)``."""

    is_receiver_input = True

    def __init__(self, ssc: StreamingContext) -> None:
        super().__init__(ssc)
        self.previous_launches = 0  # as ReceiverInputDStream's
        self.calls_seen_at_compute: dict[int, list[str]] = {}
        self.tracker: Any = None

    def attach_block_source(self, tracker: Any) -> None:
        self.tracker = tracker

    def compute(self, valid_time_ms: int) -> RDD[int]:
        tracker = self.tracker
        self.calls_seen_at_compute[valid_time_ms] = tracker.call_names()
        blocks = tracker.get_blocks_of_batch(valid_time_ms).get(self.id, [])
        return self._sc.parallelize(range(sum(blocks)), 1)


def batch_ms(time: datetime) -> int:
    return round(time.timestamp() * 1000)

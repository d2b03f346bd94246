"""Contexts driven by a manual clock, on the session's one real SparkContext."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka.context import StreamingContext
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.util.clock import ManualClock
from tests.streaming.fakes import FakeReceiverTracker, processed
from tests.support import wait_until

logging.getLogger("py4j").setLevel(logging.WARNING)

BATCH_MS = 1000


@pytest.fixture(scope="session")
def sc(spark_context: SparkContext) -> SparkContext:
    """The session's one SparkContext (tests/conftest.py), under the short name these tests use."""
    return spark_context


class ManualRun:
    """A context on a manual clock: ``advance(n)`` moves to each of the next n batch boundaries and
    waits until that batch (and every one before it) is processed."""

    def __init__(self, ssc: StreamingContext, clock: ManualClock, tracker: FakeReceiverTracker) -> None:
        self.ssc = ssc
        self.clock = clock
        self.tracker = tracker
        self.outputs: dict[int, list[list[Any]]] = {}

    def queue_of_one_partition_each(self, batches: list[list[Any]]) -> Any:
        """``queueStream`` of these batches as RDDs of one partition each. A queued list is
        parallelized into the session's four partitions, most of them empty, and every operation
        then ran a task for each: a window's for each partition of each of its batches."""
        sc = self.ssc.sparkContext
        return self.ssc.queueStream([sc.parallelize(batch, 1) for batch in batches])

    def collect(self, stream: Any, sort: bool = True) -> list[list[Any]]:
        """Every batch's records of ``stream``, one list per batch (Spark's TestOutputStream)."""
        batches: list[list[Any]] = []

        def keep(rdd: Any) -> None:
            records = rdd.collect()
            batches.append(sorted(records, key=repr) if sort else records)

        stream.foreachRDD(keep)
        return batches

    def advance(self, batches: int = 1) -> None:
        if self.ssc.getState().value == "INITIALIZED":
            self.ssc.start()
        batch = self.ssc.batch_duration_ms
        for _ in range(batches):
            target = (self.clock.get_time_ms() // batch + 1) * batch
            self.clock.set_time(target)
            # A liveness bound, not a speed check: a session's first batches (its Python workers'
            # start) took over 30 s on a loaded machine.
            wait_until(
                lambda t=target: processed(self.ssc, t), timeout_s=120, what=f"batch {target} to be processed"
            )
            # A failed job completes its batch; surface its error here rather than as a wrong result.
            self.ssc.awaitTerminationOrTimeout(0)

    def stop_gracefully(self) -> None:
        """``ssc.stop(stopGraceFully=True)`` on this thread (the one that may restore SIGTERM's
        handler). A graceful stop lets the generation timer run to its next tick, which a manual
        clock reaches only when moved: moved there once the timer is stopping, as time would move
        on. Without it the stop waited out its whole bound (30 s at one-second batches)."""
        timer = self.ssc.scheduler.job_generator.timer
        batch = self.ssc.batch_duration_ms

        def move_to_the_last_tick() -> None:
            wait_until(timer._stopped.is_set, timeout_s=120, what="the generation timer to stop")
            self.clock.set_time((self.clock.get_time_ms() // batch + 1) * batch)

        mover = threading.Thread(target=move_to_the_last_tick, name="test-clock-mover", daemon=True)
        mover.start()
        self.ssc.stop(stopSparkContext=False, stopGraceFully=True)
        mover.join(timeout=120)
        assert not mover.is_alive(), "the graceful stop ended without its last tick"


@pytest.fixture
def make_run(sc: SparkContext) -> Iterator[Callable[..., ManualRun]]:
    runs: list[ManualRun] = []

    def make(
        batch_s: float = BATCH_MS / 1000,
        settings: StreamingSettings | None = None,
        tracker: FakeReceiverTracker | None = None,
        start_ms: int = 0,
    ) -> ManualRun:
        clock = ManualClock(start_ms)
        fake = tracker or FakeReceiverTracker()
        ssc = StreamingContext(sc, batch_s, settings, clock=clock, receiver_tracker_factory=lambda _ssc: fake)
        run = ManualRun(ssc, clock, fake)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.ssc.stop(stopSparkContext=False)

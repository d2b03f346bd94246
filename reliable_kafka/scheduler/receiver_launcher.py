"""Spark's receiver jobs: one long-running "job" per receiver, relaunched until the tracker stops.

The tracker decides where a receiver runs; the launcher keeps it running there. For each
receiver stream a daemon thread plays Spark's ``startReceiver`` job plus its completion
callback:

1. run one incarnation of the receiver at the locations the tracker scheduled, until it ends;
2. if the tracker is stopping, or the receiver stopped with an error that ends its stream (a
   ``FatalReceiverError``: a topic that does not exist...), finish;
3. else wait the restart delay, ask the tracker to reschedule the receiver, and go to 1.

The restart delay is Spark's (``spark.streaming.receiverRestartDelay``) after a receiver that
worked, and doubles with each restart of one that keeps failing, up to
``spark.streaming.receiver.maxRestartDelay``: a receiver whose broker is unreachable would
otherwise start, fail and log every 2 s for as long as it lasts. The tracker counts the failed
launches in a row; a stored block ends the count. The wait ends at once when the tracker stops.

How an incarnation runs is the :class:`ReceiverRunner`'s business: a supervisor thread in this
process (driver placement) or a one-task Spark job on an executor (executor placement).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol

from reliable_kafka.util.clock import Clock, SystemClock

if TYPE_CHECKING:
    from reliable_kafka.scheduler.receiver_input import ReceiverInputStream
    from reliable_kafka.scheduler.receiver_scheduling_policy import ExecutorCacheTaskLocation, TaskLocation
    from reliable_kafka.storage.block_store import BlockStore

logger = logging.getLogger(__name__)


class ReceiverRunner(Protocol):
    """Runs receivers somewhere: in this process, or on Spark's executors."""

    #: Whether an incarnation outlives its receiver's stop to serve its blocks until
    #: :meth:`release` (executor placement), or ends with the receiver (driver placement).
    keeps_blocks_after_stop: bool
    #: What authenticates block fetches from the executors keeping blocks (None: no fetches).
    block_fetch_secret: bytes | None
    #: The driver's block store, where receivers run in this process keep blocks (else None).
    block_store: BlockStore | None

    def check(self, streams: Sequence[ReceiverInputStream]) -> None:
        """Raise if one of these streams' receivers cannot run this way."""
        ...

    def start(self) -> None:
        """Get ready to run receivers (e.g. open the tracker socket)."""
        ...

    def executors(self) -> list[ExecutorCacheTaskLocation]:
        """Where receivers can run now (Spark's ``getExecutors``)."""
        ...

    def runs_as(self, stream_id: int) -> str:
        """How ``stream_id``'s receiver runs: ``RUNS_AS_TASK`` or ``RUNS_AS_DRIVER_PROCESS`` (see
        ``listener_events``): on a local master both have the executor id "driver"."""
        ...

    def run(self, stream: ReceiverInputStream, locations: Sequence[TaskLocation], launch: int) -> None:
        """Run one incarnation of ``stream``'s receiver at one of ``locations``; return when it
        has ended. ``launch`` counts the incarnations of this receiver, from 1."""
        ...

    def cancel(self, stream_ids: Collection[int] | None = None) -> None:
        """Make the incarnations still running end (a non-graceful stop that timed out), or those
        of ``stream_ids`` only (receiver jobs still queued for a task slot)."""
        ...

    def release(self) -> None:
        """The stream is over: free what receivers kept for batches (blocks, sockets)."""
        ...


class LaunchTarget(Protocol):
    """What the launcher needs of the tracker."""

    stopping: threading.Event

    def schedule(self, streams: Sequence[ReceiverInputStream]) -> dict[int, list[TaskLocation]]: ...

    def reschedule(self, stream_id: int) -> list[TaskLocation]: ...

    def receiver_failed(self, stream_id: int, error: BaseException) -> None: ...

    def stream_ended(self, stream_id: int) -> bool:
        """Whether the receiver stopped with an error that ends its stream (no relaunch)."""
        ...

    def failure_streak(self, stream_id: int) -> int:
        """How many launches of the receiver in a row failed (0: it worked since the last one)."""
        ...


def backoff_delay_ms(first_ms: int, max_ms: int, failure_streak: int) -> int:
    """The wait before a restart: ``first_ms`` unless the last launches failed, then doubled per
    failed launch after the first, at most ``max_ms`` (never below ``first_ms``)."""
    doublings = min(max(failure_streak - 1, 0), 32)  # 2 s << 32 is past any cap
    return max(first_ms, min(first_ms << doublings, max_ms))


class ReceiverLauncher:
    """One launcher thread per receiver stream; see the module docstring."""

    def __init__(
        self,
        target: LaunchTarget,
        runner: ReceiverRunner,
        restart_delay_ms: int,
        max_restart_delay_ms: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._target = target
        self.runner = runner
        self._restart_delay_ms = restart_delay_ms
        # No cap given: no backoff, Spark's fixed delay.
        self._max_restart_delay_ms = max_restart_delay_ms or restart_delay_ms
        # Not the batch clock: tests that step batch time by hand still restart receivers.
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._threads: dict[int, threading.Thread] = {}
        self._launch_counts: dict[int, int] = {}

    def launch(self, streams: Sequence[ReceiverInputStream]) -> None:
        schedule = self._target.schedule(streams)
        for stream in streams:
            thread = threading.Thread(
                target=self._keep_running,
                args=(stream, schedule[stream.id]),
                name=f"receiver-job-{stream.id}",
                daemon=True,
            )
            with self._lock:
                self._threads[stream.id] = thread
            thread.start()

    def launch_count(self, stream_id: int) -> int:
        with self._lock:
            return self._launch_counts.get(stream_id, 0)

    def restart_delay_ms(self, stream_id: int) -> int:
        """How long the receiver would wait were its incarnation to end now."""
        streak = self._target.failure_streak(stream_id)
        return backoff_delay_ms(self._restart_delay_ms, self._max_restart_delay_ms, streak)

    def any_running(self) -> bool:
        with self._lock:
            return any(thread.is_alive() for thread in self._threads.values())

    def join(self, timeout_s: float | None) -> bool:
        """Wait for every launcher thread; False if some still run at the timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)

    def _keep_running(self, stream: ReceiverInputStream, locations: Sequence[TaskLocation]) -> None:
        while True:
            with self._lock:
                launch = self._launch_counts.get(stream.id, stream.previous_launches) + 1
                self._launch_counts[stream.id] = launch
            try:
                self.runner.run(stream, locations, launch)
            except Exception as exc:
                self._target.receiver_failed(stream.id, exc)
            if self._target.stopping.is_set() or self._target.stream_ended(stream.id):
                break
            streak = self._target.failure_streak(stream.id)
            delay_ms = backoff_delay_ms(self._restart_delay_ms, self._max_restart_delay_ms, streak)
            failed = f" ({streak} failed launches in a row)" if streak > 1 else ""
            logger.info("Restarting Receiver %d in %.3f s%s", stream.id, delay_ms / 1000, failed)
            clock = self._clock
            clock.wait_till_time(clock.get_time_ms() + delay_ms, self._target.stopping)
            if self._target.stopping.is_set():
                break
            locations = self._target.reschedule(stream.id)
        logger.info("Receiver %d job finished", stream.id)

"""Local masters with more receivers than spare task slots: some receivers as tasks, the others in
the driver process (see :mod:`reliable_kafka.scheduler.task_slots` for why and how many).

Each stream keeps one runner for its whole life, so its blocks stay where its batches look: in
the driver's block store for the streams run here, on the executor for the others.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reliable_kafka.scheduler.driver_receiver_runner import DriverReceiverRunner
    from reliable_kafka.scheduler.executor_receiver_runner import ExecutorReceiverRunner
    from reliable_kafka.scheduler.receiver_input import ReceiverInputStream
    from reliable_kafka.scheduler.receiver_scheduling_policy import ExecutorCacheTaskLocation, TaskLocation
    from reliable_kafka.storage.block_store import BlockStore


class SplitReceiverRunner:
    """Implements :class:`~reliable_kafka.scheduler.receiver_launcher.ReceiverRunner` over two
    runners: the streams in ``in_driver`` run in this process, every other one as a task."""

    # The tracker waits for every receiver to deregister on stop (the driver's supervisors do so
    # as they stop) and releases them all after the last batch.
    keeps_blocks_after_stop = True

    def __init__(
        self,
        on_executors: ExecutorReceiverRunner,
        in_driver: DriverReceiverRunner,
        in_driver_ids: Collection[int],
    ) -> None:
        self._on_executors = on_executors
        self._in_driver = in_driver
        self.in_driver_ids = frozenset(in_driver_ids)
        self.block_fetch_secret: bytes | None = on_executors.block_fetch_secret
        self.block_store: BlockStore | None = in_driver.block_store

    def __repr__(self) -> str:
        return f"SplitReceiverRunner(in driver: {sorted(self.in_driver_ids)}, tasks: {self._on_executors})"

    def check(self, streams: Sequence[ReceiverInputStream]) -> None:
        self._on_executors.check([s for s in streams if s.id not in self.in_driver_ids])

    def start(self) -> None:
        self._on_executors.start()

    def executors(self) -> list[ExecutorCacheTaskLocation]:
        return self._on_executors.executors()

    def runs_as(self, stream_id: int) -> str:
        return self._runner_of(stream_id).runs_as(stream_id)

    def run(self, stream: ReceiverInputStream, locations: Sequence[TaskLocation], launch: int) -> None:
        self._runner_of(stream.id).run(stream, locations, launch)

    def _runner_of(self, stream_id: int) -> ExecutorReceiverRunner | DriverReceiverRunner:
        return self._in_driver if stream_id in self.in_driver_ids else self._on_executors

    def cancel(self, stream_ids: Collection[int] | None = None) -> None:
        self._on_executors.cancel(stream_ids)
        self._in_driver.cancel(stream_ids)

    def release(self) -> None:
        self._on_executors.release()
        self._in_driver.release()

"""Driver placement (``spark.streaming.receiver.placement=driver``): each receiver incarnation is a
supervisor in this process, storing blocks in the driver's block store and talking to the tracker
by plain calls. For a single process, and the reference the executor placement is tested against."""

from __future__ import annotations

import logging
import socket
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from reliable_kafka.receiver.receiver_supervisor import ReceiverSupervisor
from reliable_kafka.scheduler.listener_events import RUNS_AS_DRIVER_PROCESS
from reliable_kafka.scheduler.receiver_scheduling_policy import ExecutorCacheTaskLocation

if TYPE_CHECKING:
    from reliable_kafka.receiver.tracker_endpoint import ReceiverTrackerEndpoint
    from reliable_kafka.scheduler.receiver_input import ReceiverInputStream
    from reliable_kafka.scheduler.receiver_scheduling_policy import TaskLocation
    from reliable_kafka.settings import StreamingSettings
    from reliable_kafka.storage.block_store import BlockStore

logger = logging.getLogger(__name__)

DRIVER_EXECUTOR_ID = "driver"


class DriverReceiverRunner:
    """Implements :class:`~reliable_kafka.scheduler.receiver_launcher.ReceiverRunner` in-process."""

    keeps_blocks_after_stop = False
    block_fetch_secret = None
    block_store: BlockStore

    def __init__(
        self,
        endpoint: ReceiverTrackerEndpoint,
        block_store: BlockStore,
        settings: StreamingSettings,
        checkpoint_dir: str | None,
        executors: Sequence[ExecutorCacheTaskLocation] | None = None,
        *,
        local_executor: ExecutorCacheTaskLocation | None = None,
    ) -> None:
        self._endpoint = endpoint
        self.block_store = block_store
        self._settings = settings
        self._checkpoint_dir = checkpoint_dir
        # Beside executor placement on a local master, the driver executor as Spark names it, so
        # that these receivers register where the shared schedule put them.
        self.local_executor = local_executor or ExecutorCacheTaskLocation(
            socket.gethostname(), DRIVER_EXECUTOR_ID
        )
        self._executors = list(executors) if executors is not None else [self.local_executor]

    def check(self, streams: Sequence[ReceiverInputStream]) -> None:
        pass  # any receiver object runs in this process

    def start(self) -> None:
        pass

    def executors(self) -> list[ExecutorCacheTaskLocation]:
        return list(self._executors)

    def runs_as(self, stream_id: int) -> str:
        return RUNS_AS_DRIVER_PROCESS

    def run(self, stream: ReceiverInputStream, locations: Sequence[TaskLocation], launch: int) -> None:
        # Spark ships a fresh copy of the receiver to every launch; get_receiver() plays that part.
        receiver = stream.get_receiver()
        receiver.set_receiver_id(stream.id, launch=launch)
        supervisor = ReceiverSupervisor(
            receiver,
            self._endpoint,
            self.block_store,
            settings=self._settings,
            checkpoint_dir=self._checkpoint_dir,
            host=self.local_executor.host,
            executor_id=self.local_executor.executor_id,
        )
        supervisor.start()
        supervisor.await_termination()

    def cancel(self, stream_ids: Collection[int] | None = None) -> None:
        pass  # supervisors in this process end when told to stop; nothing to cancel

    def release(self) -> None:
        pass  # the block store outlives the tracker: the dstreams' batches still read it

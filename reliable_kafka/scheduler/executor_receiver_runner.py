"""Executor placement (the default): every receiver incarnation is a one-task Spark job placed on
the executor the tracker chose, as Spark's ``ReceiverTracker.startReceiver`` did.

The driver side of that: the authenticated tracker socket the receiver tasks connect to, the
receiver task descriptions (plain data; the receiver crosses as a descriptor), and the jobs. The
task's preferred location is Spark's ``executor_<host>_<id>`` string, which makes it
PROCESS_LOCAL there; Python has no public API for per-partition preferences, so the one-element
RDD is built on the JVM side (:mod:`reliable_kafka.util.located_rdd`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from reliable_kafka.receiver.receiver_task import ReceiverTaskDescription, run_receiver_task
from reliable_kafka.rpc import new_secret
from reliable_kafka.scheduler.listener_events import RUNS_AS_TASK
from reliable_kafka.scheduler.receiver_scheduling_policy import ExecutorCacheTaskLocation
from reliable_kafka.scheduler.task_slots import check_cluster_receivers, task_slots
from reliable_kafka.scheduler.tracker_server import ReceiverTrackerServer
from reliable_kafka.util.filesystems import FilesystemOptions, configured_options
from reliable_kafka.util.located_rdd import executor_locations, located_rdd, wait_for_executors

if TYPE_CHECKING:
    from pyspark import SparkContext

    from reliable_kafka.receiver.tracker_endpoint import ReceiverTrackerEndpoint
    from reliable_kafka.scheduler.receiver_input import ReceiverInputStream
    from reliable_kafka.scheduler.receiver_scheduling_policy import TaskLocation
    from reliable_kafka.settings import StreamingSettings
    from reliable_kafka.storage.block_store import BlockStore

logger = logging.getLogger(__name__)

# How long start() waits for the first executor to register (Spark's dummy job does the same).
EXECUTORS_WAIT_S = 60.0


class ExecutorReceiverRunner:
    """Implements :class:`~reliable_kafka.scheduler.receiver_launcher.ReceiverRunner` on executors."""

    keeps_blocks_after_stop = True
    block_fetch_secret: bytes | None
    # Blocks stay on the executors; the driver holds none.
    block_store: BlockStore | None = None

    def __init__(
        self,
        endpoint: ReceiverTrackerEndpoint,
        sc: SparkContext,
        settings: StreamingSettings,
        checkpoint_dir: str | None,
        now_ms: Callable[[], int],
    ) -> None:
        self._sc = sc
        self._settings = settings
        self._checkpoint_dir = checkpoint_dir
        self._now_ms = now_ms
        self.secret = self.block_fetch_secret = new_secret()
        conf = sc.getConf()
        self._advertised_host = conf.get("spark.driver.host") or "127.0.0.1"
        bind_host = conf.get("spark.driver.bindAddress") or self._advertised_host
        receiver = settings.receiver
        tls = receiver.tls()
        self.server = ReceiverTrackerServer(
            endpoint,
            self.secret,
            host=bind_host,
            port=receiver.tracker_port,
            port_retries=receiver.port_max_retries,
            ssl_context=None if tls is None else tls.server_context(),
        )
        self._job_group = f"reliable-kafka-receivers-{uuid.uuid4().hex}"
        self._app_id = sc.applicationId
        self._receivers = 0
        self._streams: set[int] = set()

    def __repr__(self) -> str:
        return f"ExecutorReceiverRunner(app={self._app_id})"

    def check(self, streams: Sequence[ReceiverInputStream]) -> None:
        """Fail at start, not at the first launch, for a receiver that cannot cross to executors."""
        for stream in streams:
            stream.receiver_descriptor()
        self._receivers = len(streams)

    def start(self) -> None:
        self.server.start()
        host, port = self.server.address
        logger.info(
            "Receiver tracker listening on %s:%d (advertised as %s)", host, port, self._advertised_host
        )
        executors = wait_for_executors(self._sc, 1, EXECUTORS_WAIT_S)
        logger.info("Scheduling receivers on %d executor(s): %s", len(executors), executors)
        slots = task_slots(self._sc)
        if not slots.local:  # a local master's receivers were split so that a slot stays free
            check_cluster_receivers(self._receivers, slots)

    def executors(self) -> list[ExecutorCacheTaskLocation]:
        return [
            ExecutorCacheTaskLocation(host, executor_id) for host, executor_id in executor_locations(self._sc)
        ]

    def runs_as(self, stream_id: int) -> str:
        return RUNS_AS_TASK

    def run(self, stream: ReceiverInputStream, locations: Sequence[TaskLocation], launch: int) -> None:
        description = ReceiverTaskDescription(
            stream_id=stream.id,
            receiver=stream.receiver_descriptor(),
            settings=self._settings.model_dump(mode="json"),
            checkpoint_dir=self._checkpoint_dir,
            tracker_host=self._advertised_host,
            tracker_port=self.server.address[1],
            secret=self.secret,
            app_id=self._app_id,
            launch=launch,
            # How the driver reaches the checkpoint directory: executors must not depend on
            # their own environment for it.
            filesystem_options=(
                FilesystemOptions()
                if self._checkpoint_dir is None
                else configured_options(self._checkpoint_dir)
            ),
        )
        preferred = [str(location) for location in locations]
        sc = self._sc
        # Thread-local in pyspark's pinned-thread mode: applies to this launcher thread's jobs only.
        # One group per stream, so that a job still queued for a slot can be cancelled alone.
        sc.setJobGroup(
            self._job_group_of(stream.id),
            f"Streaming job running receiver {stream.id}",
            interruptOnCancel=True,
        )
        self._streams.add(stream.id)
        rdd = located_rdd(sc, [(description.encode(), preferred)]).mapPartitionsWithIndex(run_receiver_task)
        logger.info(
            "Launching receiver %d (launch %d) at %s", stream.id, launch, ", ".join(preferred) or "any"
        )
        rdd.collect()
        logger.info("Receiver %d job (launch %d) ended", stream.id, launch)

    def cancel(self, stream_ids: Collection[int] | None = None) -> None:
        for stream_id in sorted(self._streams if stream_ids is None else stream_ids):
            try:
                self._sc.cancelJobGroup(self._job_group_of(stream_id))
            except Exception as exc:
                logger.warning("Could not cancel the job of receiver %d: %r", stream_id, exc)

    def _job_group_of(self, stream_id: int) -> str:
        return f"{self._job_group}-{stream_id}"

    def release(self) -> None:
        # Closing the tracker socket ends every receiver task: they drop their blocks and exit.
        self.server.stop()

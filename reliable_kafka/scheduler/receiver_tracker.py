"""Spark's ``ReceiverTracker``: runs the receivers of every receiver input stream, takes their block
reports, allocates blocks to batches (through the :class:`ReceivedBlockTracker`), passes rate
updates to them and cleans up after completed batches.

Receivers talk to it only through :class:`ReceiverTrackerEndpoint` (the supervisor seam) and it
talks to them only through their :class:`ReceiverControl`: plain calls when receivers run in this
process (``spark.streaming.receiver.placement=driver``), the same messages over the authenticated
tracker socket when they run on Spark's executors (the default). Where and how receivers run is
the :class:`~reliable_kafka.scheduler.receiver_launcher.ReceiverLauncher`'s job; this class keeps
the books: scheduling, registrations, blocks and batches.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from reliable_kafka.checkpoint_lease import CheckpointLeaseLostError, WriteFence
from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.receiver.receiver_supervisor import format_error
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo, ReceiverControl
from reliable_kafka.receiver.wal_block_handler import RECEIVER_WAL_WITHOUT_CHECKPOINT
from reliable_kafka.scheduler.driver_block_store import driver_block_manager
from reliable_kafka.scheduler.driver_receiver_runner import DriverReceiverRunner
from reliable_kafka.scheduler.job_generator import graceful_stop_timeout_ms
from reliable_kafka.scheduler.listener_events import (
    ReceiverInfo,
    StreamingListenerReceiverError,
    StreamingListenerReceiverStarted,
    StreamingListenerReceiverStopped,
)
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker, num_records_per_stream
from reliable_kafka.scheduler.receiver_clean_threshold import receiver_clean_threshold_ms
from reliable_kafka.scheduler.receiver_launcher import ReceiverLauncher, ReceiverRunner
from reliable_kafka.scheduler.receiver_scheduling_policy import (
    ExecutorCacheTaskLocation,
    ReceiverErrorInfo,
    ReceiverSchedulingPolicy,
    ReceiverState,
    ReceiverTrackingInfo,
    TaskLocation,
    accepts,
)
from reliable_kafka.scheduler.split_receiver_runner import SplitReceiverRunner
from reliable_kafka.scheduler.task_slots import split_local_receivers, task_slots
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.util.clock import wall_clock_ms
from reliable_kafka.util.worker_python import report_missing_package
from wal.failure_log import FailureLog

if TYPE_CHECKING:
    from pyspark import SparkContext

    from reliable_kafka.scheduler.receiver_input import ReceiverInputStream
    from reliable_kafka.settings import StreamingSettings
    from reliable_kafka.storage.block_store import BlockStore

logger = logging.getLogger(__name__)

# How long a non-graceful stop waits for receivers to end (Spark's receiverJobExitLatch wait).
STOP_WAIT_S = 10.0


class _Graph(Protocol):
    def get_receiver_input_streams(self) -> Sequence[Any]: ...

    def get_max_input_stream_remember_duration(self) -> int | None: ...


class _ListenerBus(Protocol):
    def post(self, event: Any) -> None: ...


class _Clock(Protocol):
    def get_time_ms(self) -> int: ...


class TrackerContext(Protocol):
    """What the tracker uses of the :class:`~reliable_kafka.context.StreamingContext`."""

    @property
    def settings(self) -> StreamingSettings: ...

    @property
    def graph(self) -> _Graph: ...

    @property
    def checkpoint_dir(self) -> str | None: ...

    @property
    def batch_duration_ms(self) -> int: ...

    @property
    def sparkContext(self) -> SparkContext: ...

    def notify_error(self, error: BaseException) -> None:
        """Reports an error to ``awaitTermination`` (a receiver's that ended its stream)."""
        ...


class WriteAheadLogConfigError(ValueError):
    """The receiver write-ahead log is on but there is no checkpoint directory to put it in."""


class TrackerState(enum.Enum):
    INITIALIZED = "Initialized"
    STARTED = "Started"
    STOPPING = "Stopping"
    STOPPED = "Stopped"


def check_receiver_write_ahead_log(enabled: bool, checkpoint_dir: str | None) -> None:
    if enabled and checkpoint_dir is None:
        raise WriteAheadLogConfigError(RECEIVER_WAL_WITHOUT_CHECKPOINT)


class ReceiverTracker:
    """Implements :class:`~reliable_kafka.receiver.tracker_endpoint.ReceiverTrackerEndpoint`.

    ``skip_receiver_launch``: track blocks but start no receivers (Spark's test hook).
    ``listener_bus``: where receiver events go (the context's bus; None: nowhere).
    ``clock``: the batch clock block times are taken from (None: the wall clock).
    ``runner``: how receivers run; by default chosen by ``spark.streaming.receiver.placement``
    (see :meth:`_default_runner`). In driver placement, ``block_store`` is where receivers store
    blocks (default: a block manager of the tracker's own) and ``executors`` the locations to
    schedule them on (default: this process). In executor placement the driver holds no block
    bytes: :attr:`block_store` is None and batches read blocks on the executors.
    ``checkpoint_fence``: the driver's lease on the checkpoint directory (None: no lease), asked
    before each metadata-log write and before the receivers are told to clean their logs.
    """

    def __init__(
        self,
        ssc: TrackerContext,
        skip_receiver_launch: bool = False,
        *,
        runner: ReceiverRunner | None = None,
        block_store: BlockStore | None = None,
        executors: Sequence[ExecutorCacheTaskLocation] | None = None,
        listener_bus: _ListenerBus | None = None,
        clock: _Clock | None = None,
        checkpoint_fence: WriteFence | None = None,
    ) -> None:
        self.ssc = ssc
        self._checkpoint_fence = checkpoint_fence
        self._listener_bus = listener_bus
        self.settings = ssc.settings
        self.skip_receiver_launch = skip_receiver_launch
        self.receiver_input_streams: list[ReceiverInputStream] = list(ssc.graph.get_receiver_input_streams())
        self.receiver_input_stream_ids = [stream.id for stream in self.receiver_input_streams]
        self.checkpoint_dir: str | None = ssc.checkpoint_dir
        if self.receiver_input_streams:
            check_receiver_write_ahead_log(self.settings.wal.enable, self.checkpoint_dir)
        self._now_ms: Callable[[], int] = clock.get_time_ms if clock is not None else wall_clock_ms
        self.received_block_tracker = ReceivedBlockTracker.create(
            self.receiver_input_stream_ids,
            self.checkpoint_dir,
            self.settings.wal,
            recover_from_write_ahead_log=self.checkpoint_dir is not None,
            now_ms=self._now_ms,
            fence=checkpoint_fence,
        )
        if runner is None:
            runner = self._default_runner(block_store, executors)
        self.runner = runner
        self.block_store: BlockStore | None = runner.block_store
        self.scheduling_policy = ReceiverSchedulingPolicy()
        self.stopping = threading.Event()
        self._launcher = ReceiverLauncher(
            self, runner, self.settings.receiver.restart_delay_ms, self.settings.receiver.max_restart_delay_ms
        )

        self._lock = threading.RLock()
        self._registrations_changed = threading.Condition(self._lock)
        self._state = TrackerState.INITIALIZED
        self._tracking_infos: dict[int, ReceiverTrackingInfo] = {}
        self._preferred_locations: dict[int, str | None] = {}
        self._controls: dict[int, ReceiverControl] = {}
        # Per stream: a receiver failing again and again logs its traceback once, then a line per
        # restart, then a line when it stores a block again. The same streak tells the listeners
        # once and lengthens the launcher's restart delay; only a stored block ends it (a
        # registration does not: a receiver that cannot reach Kafka registers, then fails).
        self._receiver_failures: dict[int, FailureLog] = {}
        self._failure_streaks: dict[int, int] = {}  # stream -> failed launches in a row
        # Per stream, the launch whose failure its supervisor already reported by deregistering:
        # the launcher's report of the same ended launch is then not a second failure.
        self._reported_launches: dict[int, int] = {}
        # Streams whose receiver stopped with a FatalReceiverError: not launched again.
        self._ended_streams: set[int] = set()
        # Blocks with a second copy (levels with replication 2) -> the (host, executor id) keeping
        # it: the receivers there remove it with the block, whether or not its first holder lives.
        self._replica_holders: dict[StreamBlockId, tuple[str, str]] = {}

    def _default_runner(
        self, block_store: BlockStore | None, executors: Sequence[ExecutorCacheTaskLocation] | None
    ) -> ReceiverRunner:
        if self.settings.receiver.placement == "executors" and not self.skip_receiver_launch:
            return self._executor_runner()
        return self._driver_runner(block_store, executors)

    def _driver_runner(
        self,
        block_store: BlockStore | None,
        executors: Sequence[ExecutorCacheTaskLocation] | None,
        local_executor: ExecutorCacheTaskLocation | None = None,
    ) -> DriverReceiverRunner:
        if block_store is None:
            block_store = driver_block_manager(self)
        return DriverReceiverRunner(
            self, block_store, self.settings, self.checkpoint_dir, executors, local_executor=local_executor
        )

    def _executor_runner(self) -> ReceiverRunner:
        """Receivers as tasks; on a local master only as many as leave a task slot for batches,
        the others in this process (see ``task_slots``)."""
        # Imported here: only executor placement needs Spark's JVM side and the socket.
        from reliable_kafka.scheduler.executor_receiver_runner import (  # noqa: PLC0415
            ExecutorReceiverRunner,
        )
        from reliable_kafka.util.located_rdd import executor_locations  # noqa: PLC0415

        sc = self.ssc.sparkContext
        slots = task_slots(sc)
        in_driver: list[int] = []
        if slots.local and self.receiver_input_stream_ids:
            _, in_driver = split_local_receivers(self.receiver_input_stream_ids, slots)
        if in_driver and len(in_driver) == len(self.receiver_input_stream_ids):
            return self._driver_runner(None, None)
        on_executors = ExecutorReceiverRunner(self, sc, self.settings, self.checkpoint_dir, self._now_ms)
        if not in_driver:
            return on_executors
        host, executor_id = executor_locations(sc)[0]
        driver_executor = ExecutorCacheTaskLocation(host, executor_id)
        return SplitReceiverRunner(on_executors, self._driver_runner(None, None, driver_executor), in_driver)

    @property
    def block_fetch_secret(self) -> bytes | None:
        """What batches need to fetch blocks that executors keep (None: no executor keeps any)."""
        return self.runner.block_fetch_secret

    # ------------------------------------------------------------ life cycle

    @property
    def state(self) -> TrackerState:
        return self._state

    def start(self) -> None:
        if self.receiver_input_streams and not self.skip_receiver_launch:
            self.runner.check(self.receiver_input_streams)
        with self._lock:
            if self._state is not TrackerState.INITIALIZED:
                raise RuntimeError(f"ReceiverTracker already started (state {self._state.value})")
            self._state = TrackerState.STARTED
        if self.receiver_input_streams and not self.skip_receiver_launch:
            self.runner.start()
            self._launcher.launch(self.receiver_input_streams)
        logger.info("ReceiverTracker started with %d receiver stream(s)", len(self.receiver_input_streams))

    def stop(self, graceful: bool) -> None:
        """Stop every receiver (their last blocks are still added), then close the metadata log.

        Waits up to :data:`STOP_WAIT_S` for the receivers, or if ``graceful`` (their last blocks
        take longer to store than a stop without them) the longer of ``spark.streaming.stopTimeout``
        and ``spark.streaming.gracefulStopTimeout``. Spark waits for ever there; a receiver stuck on
        a ZooKeeper or broker that is gone would then keep the
        job generator, which stops after this, running.
        """
        with self._lock:
            if self._state is TrackerState.STOPPED:
                return
            was_started = self._state is TrackerState.STARTED
            self._state = TrackerState.STOPPING
            self.stopping.set()
            controls = dict(self._controls)
        if was_started:
            stoppers = [
                threading.Thread(
                    target=self._stop_receiver, args=(sid, control), name=f"stop-receiver-{sid}", daemon=True
                )
                for sid, control in controls.items()
            ]
            for thread in stoppers:
                thread.start()
            jobs = self.settings.jobs
            # A graceful stop lets the receivers store their last blocks: as long as the user
            # gave the drain (gracefulStopTimeout) when that is longer than the stop bound.
            wait_s = (
                max(jobs.stop_timeout_ms, graceful_stop_timeout_ms(jobs, self.ssc.batch_duration_ms)) / 1000
                if graceful
                else STOP_WAIT_S
            )
            deadline = time.monotonic() + wait_s
            if graceful:
                logger.info("Waiting for receiver job to terminate gracefully")
            for thread in stoppers:
                thread.join(_remaining(deadline))
            if self.runner.keeps_blocks_after_stop:
                # Stop is a message to a remote receiver: it is done once it deregistered (its
                # last blocks are added by then), while its job serves its blocks until released.
                with self._registrations_changed:
                    self._registrations_changed.wait_for(lambda: not self._controls, _remaining(deadline))
            else:
                self._join_receiver_jobs(_remaining(deadline))
            still_registered = self.active_receiver_ids()
            if still_registered:
                logger.warning("Not all of the receivers have deregistered, %s", still_registered)
            else:
                logger.info("All of the receivers have deregistered successfully")
        # The block store stays open: after a graceful stop the job generator still runs the
        # batches of the blocks received last, and their RDDs read it.
        self.received_block_tracker.stop()
        with self._lock:
            self._state = TrackerState.STOPPED
        logger.info("ReceiverTracker stopped")

    def release_receivers(self) -> None:
        """After the last batch: let receivers free the blocks they kept for batches, and wait
        (bounded) for their jobs to end."""
        with self._lock:
            # Launched and never registered: a job still queued for a task slot (on a cluster
            # whose receivers outnumber its slots) ends only when cancelled; waiting is no use.
            queued = [
                sid for sid, info in self._tracking_infos.items() if info.state is ReceiverState.SCHEDULED
            ]
        try:
            self.runner.release()
        except Exception:
            logger.exception("Could not release the receivers' resources")
        if queued and self._launcher.any_running():
            logger.info("Cancelling the job(s) of receiver(s) %s, which never got a task slot", queued)
            self.runner.cancel(queued)
        self._join_receiver_jobs(STOP_WAIT_S)

    def _join_receiver_jobs(self, timeout_s: float | None) -> None:
        if not self._launcher.join(timeout_s):
            logger.warning("Receiver jobs still running after %.1f s; cancelling them", timeout_s or 0.0)
            self.runner.cancel()

    def _stop_receiver(self, stream_id: int, control: ReceiverControl) -> None:
        try:
            control.stop_receiver("Stopped by driver")
        except Exception:
            logger.exception("Could not stop receiver %d", stream_id)

    # ------------------------------------------------------------ batches

    def allocate_blocks_to_batch(self, time_ms: int) -> None:
        if self.receiver_input_streams:
            self.received_block_tracker.allocate_blocks_to_batch(time_ms)

    def get_blocks_of_batch(self, time_ms: int) -> dict[int, list[ReceivedBlockInfo]]:
        return self.received_block_tracker.get_blocks_of_batch(time_ms)

    def get_blocks_of_batch_and_stream(self, time_ms: int, stream_id: int) -> list[ReceivedBlockInfo]:
        return self.received_block_tracker.get_blocks_of_batch_and_stream(time_ms, stream_id)

    def num_records_of_batch(self, time_ms: int) -> dict[int, int]:
        return num_records_per_stream(self.get_blocks_of_batch(time_ms))

    def has_unallocated_blocks(self) -> bool:
        return self.received_block_tracker.has_unallocated_received_blocks()

    def on_batch_completed(self, time_ms: int) -> None:
        self.received_block_tracker.mark_batch_completed(time_ms)

    def pending_batch_times(self) -> list[int]:
        return self.received_block_tracker.pending_batch_times()

    def deallocate_batches(self, batch_times_ms: Sequence[int]) -> list[int]:
        """Return the blocks of pending batches that will not run under their own time to the
        unallocated queue (logged), so the next batch runs them; returns the times given back."""
        if not self.receiver_input_streams:
            return []
        return self.received_block_tracker.deallocate_batches(batch_times_ms)

    def cleanup_old_blocks_and_batches(self, clean_threshold_ms: int) -> None:
        """Forget batches before the threshold, delete their blocks, and have receivers delete
        their old WAL data. A batch still running keeps its metadata and everything after it, and
        the receivers keep every block it (or a block still unallocated) may read."""
        pending = self.pending_batch_times()
        threshold = min([clean_threshold_ms, *pending])
        if threshold < clean_threshold_ms:
            logger.info("Cleaning up to %d only: batch %d has not completed", threshold, pending[0])
        blocks_of = {
            batch_time: [
                info.block_id for infos in self.get_blocks_of_batch(batch_time).values() for info in infos
            ]
            for batch_time in self.received_block_tracker.allocated_batch_times()
            if batch_time < threshold
        }
        dropped = self.received_block_tracker.cleanup_old_batches(threshold, wait_for_completion=False)
        self.remove_blocks([block_id for batch_time in dropped for block_id in blocks_of.get(batch_time, ())])
        if self.settings.wal.enable and self._holds_checkpoint():
            receiver_threshold = self.receiver_clean_threshold(clean_threshold_ms)
            logger.info("Cleanup old received batch data: %d", receiver_threshold)
            with self._lock:
                controls = list(self._controls.values()) if self._state is TrackerState.STARTED else []
            for control in controls:
                try:
                    control.cleanup_old_blocks(receiver_threshold)
                except Exception:
                    logger.exception("Receiver could not clean up blocks older than %d", receiver_threshold)

    def _holds_checkpoint(self) -> bool:
        """Whether this driver may change the checkpoint directory: a driver that lost its lease
        must not have receivers delete log data the new driver's batches may still read."""
        if self._checkpoint_fence is None:
            return True
        try:
            self._checkpoint_fence.check()
        except CheckpointLeaseLostError as exc:
            logger.warning("Not cleaning the receivers' write-ahead logs: %s", exc)
            return False
        return True

    def remove_blocks(self, block_ids: Sequence[StreamBlockId]) -> None:
        """Spark's ``BlockRDD.removeBlocks``: from the driver's block store, or, in executor
        placement, from the executor of each stream's receiver, and a second copy from the
        receivers on the executor keeping it (blocks of a receiver that is gone went with its
        executor, or are dropped when it is released)."""
        if not block_ids:
            return
        if self.block_store is not None:
            for block_id in block_ids:
                self.block_store.remove(block_id)
            if not self.runner.keeps_blocks_after_stop:
                return
            # Local masters may also run receivers as tasks (SplitReceiverRunner): their blocks
            # are on the executor, and the driver-run ones' removal below finds nothing left.
        by_stream: dict[int, list[str]] = {}
        for block_id in block_ids:
            by_stream.setdefault(block_id.stream_id, []).append(block_id.name)
        with self._lock:
            for block_id in block_ids:
                holder = self._replica_holders.pop(block_id, None)
                if holder is None:
                    continue
                for sid, info in self._tracking_infos.items():
                    running = info.running_executor
                    if (
                        sid in self._controls
                        and running is not None
                        and holder == (running.host, running.executor_id)
                    ):
                        by_stream.setdefault(sid, []).append(block_id.name)
            controls = {sid: self._controls.get(sid) for sid in by_stream}
        for sid, names in by_stream.items():
            control = controls[sid]
            if control is None:
                continue
            try:
                control.remove_blocks(names)
            except Exception as exc:
                logger.warning("Could not remove %d block(s) of receiver %d: %r", len(names), sid, exc)

    def receiver_clean_threshold(self, clean_threshold_ms: int) -> int:
        """The time before which receivers may delete blocks and WAL segments (see
        :func:`~reliable_kafka.scheduler.receiver_clean_threshold.receiver_clean_threshold_ms`)."""
        pending = self.pending_batch_times()
        needed = [info for t in pending for infos in self.get_blocks_of_batch(t).values() for info in infos]
        for sid in self.receiver_input_stream_ids:
            needed.extend(self.received_block_tracker.get_unallocated_blocks(sid))
        return receiver_clean_threshold_ms(
            clean_threshold_ms,
            oldest_pending_batch_ms=pending[0] if pending else None,
            batch_duration_ms=int(self.ssc.batch_duration_ms),
            remember_ms=self.ssc.graph.get_max_input_stream_remember_duration() if pending else None,
            needed_blocks=needed,
        )

    # ------------------------------------------------------------ rate control

    def send_rate_update(self, stream_id: int, new_rate: int) -> None:
        with self._lock:
            control = self._controls.get(stream_id) if self._state is TrackerState.STARTED else None
        if control is not None:
            control.update_rate_limit(new_rate)

    # ------------------------------------------------------------ receiver status

    def receiver_tracking_infos(self) -> dict[int, ReceiverTrackingInfo]:
        with self._lock:
            return dict(self._tracking_infos)

    def active_receiver_ids(self) -> list[int]:
        with self._lock:
            return sorted(self._controls)

    def receiver_executors(self) -> dict[int, frozenset[str]]:
        """Stream id -> the executors its receiver runs on (Spark's ``allocatedExecutors``) or
        may start on (every executor of its schedule), for every stream not ended; empty while
        that is not known: scheduled by host or anywhere, or launched and not yet registered.
        Dynamic allocation must remove none of them."""
        with self._lock:
            infos = [info for sid, info in self._tracking_infos.items() if sid not in self._ended_streams]
        executors: dict[int, frozenset[str]] = {}
        for info in infos:
            if info.state is ReceiverState.ACTIVE and info.running_executor is not None:
                executors[info.receiver_id] = frozenset({info.running_executor.executor_id})
            elif info.state is ReceiverState.SCHEDULED:
                executors[info.receiver_id] = frozenset(
                    location.executor_id
                    for location in info.scheduled_locations or ()
                    if isinstance(location, ExecutorCacheTaskLocation)
                )
            else:
                executors[info.receiver_id] = frozenset()
        return executors

    def executors_with_unprocessed_blocks(self) -> set[str]:
        """Executors holding a copy (first or second) of a block no completed batch has read."""
        holders = set()
        for info in self.received_block_tracker.unprocessed_blocks():
            for location in (info.block_store_result.location, info.block_store_result.replica):
                if location is not None:
                    holders.add(location.executor_id)
        return holders

    def launch_count(self, stream_id: int) -> int:
        """How many times the receiver of a stream was started (1 + restarts)."""
        return self._launcher.launch_count(stream_id)

    def restart_delay_ms(self, stream_id: int) -> int:
        """How long the receiver of a stream would wait before its next start, were it to end now."""
        return self._launcher.restart_delay_ms(stream_id)

    def all_receivers_stopped(self) -> bool:
        """No receiver registered and none about to (re)start."""
        with self._lock:
            registered = bool(self._controls)
        return not registered and not self._launcher.any_running()

    # ------------------------------------------------------------ ReceiverTrackerEndpoint

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        if stream_id not in self.receiver_input_stream_ids:
            raise ValueError(f"Register received for unexpected id {stream_id}")
        # The executors are asked outside the lock (py4j round trips in executor placement), and
        # only for a receiver with no scheduled locations to check it against.
        executors: list[ExecutorCacheTaskLocation] | None = None
        while True:
            with self._lock:
                if self._state in (TrackerState.STOPPING, TrackerState.STOPPED):
                    return False
                old = self._tracking_infos.get(stream_id)
                scheduled = old.scheduled_locations if old is not None and old.scheduled_locations else None
                if scheduled is not None:
                    acceptable: list[TaskLocation] | None = list(scheduled)
                elif executors is not None:
                    acceptable = self._reschedule(stream_id, executors)
                else:
                    acceptable = None  # the executors are asked below, outside the lock
                if acceptable is not None:
                    info = ReceiverTrackingInfo(
                        stream_id,
                        ReceiverState.ACTIVE,
                        running_executor=ExecutorCacheTaskLocation(host, executor_id),
                        name=f"{receiver_type}-{stream_id}",
                        runs_as=self.runner.runs_as(stream_id),
                        # Kept (Spark drops it): a receiver failing at every start registers before
                        # each failure, and the status page would show its error only between the two.
                        error_info=None if old is None else old.error_info,
                    )
                    accepted = accepts(acceptable, host, executor_id)
                    if accepted:
                        self._tracking_infos[stream_id] = info
                        self._controls[stream_id] = control
                    break
            executors = self.runner.executors()
        if not accepted:
            logger.info(
                "Refused receiver %d from %s/%s: scheduled on %s",
                stream_id,
                host,
                executor_id,
                ", ".join(map(str, acceptable)),
            )
            return False
        self._post(StreamingListenerReceiverStarted(_receiver_info(info)))
        logger.info("Registered receiver for stream %d from %s/%s", stream_id, host, executor_id)
        return True

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        replica = info.block_store_result.replica
        # The streak is read and ended under the lock: checked outside it, two blocks could both
        # end it, or a block end a streak that a failure had just begun.
        with self._lock:
            streak_ended = self._failure_streaks.pop(info.stream_id, None) is not None
            if streak_ended:
                self._reported_launches.pop(info.stream_id, None)
            if replica is not None:
                self._replica_holders[info.block_id] = (replica.host, replica.executor_id)
        if streak_ended:
            self._failure_log(info.stream_id).succeeded()
        return self.received_block_tracker.add_block(info)

    def failure_streak(self, stream_id: int) -> int:
        """Failed launches of the receiver since it last stored a block (the launcher backs off)."""
        with self._lock:
            return self._failure_streaks.get(stream_id, 0)

    def receiver_failed(self, stream_id: int, error: BaseException) -> None:
        """An incarnation of the receiver ended with ``error``; the launcher restarts it."""
        launch = self._launcher.launch_count(stream_id)
        error_info = ReceiverErrorInfo("Receiver job failed", format_error(error), self._now_ms())
        info: ReceiverTrackingInfo | None = None
        with self._lock:
            if self._reported_launches.get(stream_id) == launch:
                return  # its supervisor deregistered with this error (driver placement)
            if self._start_failure(stream_id, launch):
                info = self._with_error(stream_id, error_info)
        if info is not None:
            self._post(StreamingListenerReceiverError(_receiver_info(info)))
        # A worker without the package fails every launch alike: say once what fixes it, instead
        # of a Py4J trace per restart that hides the cause in its middle.
        if report_missing_package(self.ssc.sparkContext, error) is None:
            self._failure_log(stream_id).failed(error, "it has been stopped; restarting it")

    def _start_failure(self, stream_id: int, launch: int) -> bool:
        """Count the failure of ``launch`` (once); whether it begins a streak. Under the lock."""
        streak = self._failure_streaks.get(stream_id, 0)
        if self._reported_launches.get(stream_id) != launch:
            self._reported_launches[stream_id] = launch
            self._failure_streaks[stream_id] = streak + 1
        return streak == 0

    def _with_error(self, stream_id: int, error_info: ReceiverErrorInfo) -> ReceiverTrackingInfo:
        """The stream's tracking info with ``error_info`` as its last error. Called under the lock."""
        old = self._tracking_infos.get(stream_id)
        if old is None:
            info = ReceiverTrackingInfo(stream_id, ReceiverState.INACTIVE, error_info=error_info)
        else:
            info = old.with_state(old.state, error_info=error_info)
        self._tracking_infos[stream_id] = info
        return info

    def _failure_log(self, stream_id: int) -> FailureLog:
        with self._lock:
            log = self._receiver_failures.get(stream_id)
            if log is None:
                log = self._receiver_failures[stream_id] = FailureLog(logger, f"Receiver {stream_id}")
            return log

    def report_error(self, stream_id: int, message: str, error: str) -> None:
        with self._lock:
            old = self._tracking_infos.get(stream_id)
            if old is not None:
                last_time = old.error_info.last_error_time_ms if old.error_info is not None else -1
                info = old.with_state(old.state, error_info=ReceiverErrorInfo(message, error, last_time))
            else:
                logger.warning("No prior receiver info")
                info = ReceiverTrackingInfo(
                    stream_id,
                    ReceiverState.INACTIVE,
                    error_info=ReceiverErrorInfo(message, error, self._now_ms()),
                )
            self._tracking_infos[stream_id] = info
        self._post(StreamingListenerReceiverError(_receiver_info(info)))
        logger.warning("Error reported by receiver for stream %d: %s", stream_id, _with_error(message, error))

    def deregister_receiver(self, stream_id: int, message: str, error: str, *, fatal: bool = False) -> bool:
        last_error_time = self._now_ms() if error else -1
        error_info = ReceiverErrorInfo(message, error, last_error_time)
        launch = self._launcher.launch_count(stream_id)
        with self._lock:
            old = self._tracking_infos.get(stream_id)
            if old is not None:
                info = old.with_state(ReceiverState.INACTIVE, error_info=error_info)
            else:
                logger.warning("No prior receiver info")
                info = ReceiverTrackingInfo(stream_id, ReceiverState.INACTIVE, error_info=error_info)
            self._tracking_infos[stream_id] = info
            self._controls.pop(stream_id, None)
            if fatal:
                # Before the launcher sees the receiver's job end: it must not launch it again.
                self._ended_streams.add(stream_id)
            self._registrations_changed.notify_all()
            first = bool(error) and self._start_failure(stream_id, launch)
        if first or fatal:
            # Once per streak: a receiver failing at every start must not flood the listeners.
            self._post(StreamingListenerReceiverError(_receiver_info(info)))
        self._post(StreamingListenerReceiverStopped(_receiver_info(info)))
        if fatal:
            self._end_stream(stream_id, message, error)
        elif error:
            # The whole error goes to the listeners; the log has its last line (the exception and
            # its message), in full once per streak, then as a count.
            self._failure_log(stream_id).failed(_last_line(error), f"deregistered: {message}")
        else:
            logger.info("Deregistered receiver for stream %d: %s", stream_id, message)
        return True

    def _end_stream(self, stream_id: int, message: str, error: str) -> None:
        """The receiver stopped with an error no restart can mend (a FatalReceiverError): one
        ERROR line, and the error to ``awaitTermination``, as Spark reports a job's error."""
        ended = FatalReceiverError(f"Receiver {stream_id} ended its stream: {_last_line(error) or message}")
        logger.error("%s (%s); it is not launched again", ended, message)
        self.ssc.notify_error(ended)

    def stream_ended(self, stream_id: int) -> bool:
        """Whether a receiver of the stream stopped with an error that ends it (never relaunched)."""
        with self._lock:
            return stream_id in self._ended_streams

    # ------------------------------------------------------------ scheduling (LaunchTarget)

    def schedule(self, streams: Sequence[ReceiverInputStream]) -> dict[int, list[TaskLocation]]:
        """Spark's ``scheduleReceivers``: spread the receivers over the executors."""
        preferred = {stream.id: stream.preferred_location() for stream in streams}
        schedule = self.scheduling_policy.schedule_receivers(
            [_Scheduled(sid, host) for sid, host in preferred.items()], self.runner.executors()
        )
        with self._lock:
            for sid, host in preferred.items():
                self._preferred_locations[sid] = host
                self._tracking_infos[sid] = ReceiverTrackingInfo(
                    sid, ReceiverState.SCHEDULED, scheduled_locations=tuple(schedule[sid])
                )
        return {sid: list(schedule[sid]) for sid in preferred}

    def reschedule(self, stream_id: int) -> list[TaskLocation]:
        """Spark's ``rescheduleReceiver``; registration then checks against these locations."""
        executors = self.runner.executors()  # outside the lock: py4j round trips on executors
        with self._lock:
            locations = self._reschedule(stream_id, executors)
            old = self._tracking_infos.get(stream_id)
            self._tracking_infos[stream_id] = ReceiverTrackingInfo(
                stream_id,
                ReceiverState.SCHEDULED,
                scheduled_locations=tuple(locations),
                error_info=None if old is None else old.error_info,
            )
        return locations

    def _reschedule(
        self, stream_id: int, executors: Sequence[ExecutorCacheTaskLocation]
    ) -> list[TaskLocation]:
        """Candidates for the receiver among ``executors``. Under the lock."""
        return self.scheduling_policy.reschedule_receiver(
            stream_id, self._preferred_locations.get(stream_id), self._tracking_infos, executors
        )

    def _post(self, event: object) -> None:
        try:
            if self._listener_bus is not None:
                self._listener_bus.post(event)
        except Exception:
            logger.exception("Could not post %s to the listener bus", type(event).__name__)


def _receiver_info(info: ReceiverTrackingInfo) -> ReceiverInfo:
    error = info.error_info or ReceiverErrorInfo()
    executor = info.running_executor
    return ReceiverInfo(
        stream_id=info.receiver_id,
        name=info.name or "",
        active=info.state is ReceiverState.ACTIVE,
        location=executor.host if executor is not None else "",
        executor_id=executor.executor_id if executor is not None else "",
        last_error_message=error.last_error_message,
        last_error=error.last_error,
        last_error_time_ms=error.last_error_time_ms,
        runs_as=info.runs_as if executor is not None else "",
    )


def _last_line(error: str) -> str:
    """A formatted traceback's last line: the exception and its message."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else error


def _with_error(message: str, error: str) -> str:
    return f"{message} - {error}" if error else message


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class _Scheduled:
    """A receiver as the scheduling policy sees it: a stream id and a preferred host."""

    def __init__(self, stream_id: int, preferred_location: str | None) -> None:
        self.stream_id = stream_id
        self.preferred_location = preferred_location

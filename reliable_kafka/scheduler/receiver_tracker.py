"""Spark's ``ReceiverTracker``: runs the receivers of every receiver input stream, takes their block
reports, allocates blocks to batches (through the :class:`ReceivedBlockTracker`), passes rate
updates to them and cleans up after completed batches.

Receivers talk to it only through :class:`ReceiverTrackerEndpoint` (the supervisor seam) and it
talks to them only through their :class:`ReceiverControl`, so that receivers can later move to
executors behind a socket. Today each receiver runs in this process on a daemon "launcher"
thread, which plays the part of Spark's one-task receiver job: start a supervisor, wait for it to
terminate, and, unless the tracker is stopping, start the receiver again after the restart delay.
"""

from __future__ import annotations

import enum
import logging
import socket
import threading
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reliable_kafka.receiver.receiver_supervisor import ReceiverSupervisor
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo, ReceiverControl
from reliable_kafka.receiver.wal_block_handler import RECEIVER_WAL_WITHOUT_CHECKPOINT
from reliable_kafka.scheduler.listener import (
    ReceiverInfo,
    StreamingListenerReceiverError,
    StreamingListenerReceiverStarted,
    StreamingListenerReceiverStopped,
)
from reliable_kafka.scheduler.received_block_tracker import (
    ReceivedBlockTracker,
    num_records_per_stream,
    wall_clock_ms,
)
from reliable_kafka.scheduler.receiver_scheduling_policy import (
    ExecutorCacheTaskLocation,
    ReceiverErrorInfo,
    ReceiverSchedulingPolicy,
    ReceiverState,
    ReceiverTrackingInfo,
    TaskLocation,
    accepts,
)
from reliable_kafka.storage.block_manager import BlockManager
from wal.failure_log import FailureLog
from wal.segments import parse_segment_name, segment_basename

if TYPE_CHECKING:
    from reliable_kafka.dstream.receiver_input_dstream import ReceiverInputDStream
    from reliable_kafka.receiver.receiver import Receiver
    from reliable_kafka.storage.block_store import BlockStore

logger = logging.getLogger(__name__)

# How long a non-graceful stop waits for receivers to end (Spark's receiverJobExitLatch wait).
STOP_WAIT_S = 10.0
LOCAL_EXECUTOR_ID = "driver"


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
    ``block_store``: where in-process receivers store blocks; defaults to ``ssc.block_manager``
    when the context has one, else a block manager of the tracker's own. ``executors``: the
    executors to schedule receivers on (default: this process, executor ``"driver"``).
    """

    def __init__(
        self,
        ssc: Any,
        skip_receiver_launch: bool = False,
        *,
        block_store: BlockStore | None = None,
        executors: Sequence[ExecutorCacheTaskLocation] | None = None,
    ) -> None:
        self.ssc = ssc
        self.settings = ssc.settings
        self.skip_receiver_launch = skip_receiver_launch
        self.receiver_input_streams: list[ReceiverInputDStream] = list(ssc.graph.get_receiver_input_streams())
        self.receiver_input_stream_ids = [stream.id for stream in self.receiver_input_streams]
        self.checkpoint_dir: str | None = ssc.checkpoint_dir
        if self.receiver_input_streams:
            check_receiver_write_ahead_log(self.settings.wal.enable, self.checkpoint_dir)
        self._now_ms = _clock_of(ssc)
        self.received_block_tracker = ReceivedBlockTracker.create(
            self.receiver_input_stream_ids,
            self.checkpoint_dir,
            self.settings.wal,
            recover_from_write_ahead_log=self.checkpoint_dir is not None,
            now_ms=self._now_ms,
        )
        if block_store is None:
            block_store = getattr(ssc, "block_manager", None)
        if block_store is None:
            block_store = BlockManager()
            # Not closed on stop: the batches of a graceful stop still read it. Closing it when
            # the tracker goes away (or at exit) removes its spill directory.
            weakref.finalize(self, block_store.close)
        self.block_store: BlockStore = block_store
        self.scheduling_policy = ReceiverSchedulingPolicy()
        self._local_executor = ExecutorCacheTaskLocation(socket.gethostname(), LOCAL_EXECUTOR_ID)
        self._executors = list(executors) if executors is not None else [self._local_executor]

        self._lock = threading.RLock()
        self._state = TrackerState.INITIALIZED
        self._stopping = threading.Event()
        self._tracking_infos: dict[int, ReceiverTrackingInfo] = {}
        self._preferred_locations: dict[int, str | None] = {}
        self._controls: dict[int, ReceiverControl] = {}
        self._launchers: dict[int, threading.Thread] = {}
        self._launch_counts: dict[int, int] = {}
        # Per stream: a receiver failing again and again logs its traceback once, then a line per
        # restart, then a line when it stores a block again.
        self._receiver_failures: dict[int, FailureLog] = {}
        self._failing_streams: set[int] = set()

    # ------------------------------------------------------------ life cycle

    @property
    def state(self) -> TrackerState:
        return self._state

    def start(self) -> None:
        with self._lock:
            if self._state is not TrackerState.INITIALIZED:
                raise RuntimeError(f"ReceiverTracker already started (state {self._state.value})")
            self._state = TrackerState.STARTED
        if self.receiver_input_streams and not self.skip_receiver_launch:
            self._launch_receivers()
        logger.info("ReceiverTracker started with %d receiver stream(s)", len(self.receiver_input_streams))

    def stop(self, graceful: bool) -> None:
        """Stop every receiver (their last blocks are still added), then close the metadata log.

        Waits up to :data:`STOP_WAIT_S` for the receivers, or until they are all done if ``graceful``.
        """
        with self._lock:
            if self._state is TrackerState.STOPPED:
                return
            was_started = self._state is TrackerState.STARTED
            self._state = TrackerState.STOPPING
            self._stopping.set()
            controls = dict(self._controls)
            launchers = list(self._launchers.values())
        if was_started:
            stoppers = [
                threading.Thread(
                    target=self._stop_receiver, args=(sid, control), name=f"stop-receiver-{sid}", daemon=True
                )
                for sid, control in controls.items()
            ]
            for thread in stoppers:
                thread.start()
            deadline = None if graceful else time.monotonic() + STOP_WAIT_S
            if graceful:
                logger.info("Waiting for receiver job to terminate gracefully")
            for thread in [*stoppers, *launchers]:
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
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
        for batch_time in dropped:
            for block_id in blocks_of.get(batch_time, ()):
                self.block_store.remove(block_id)
        if self.settings.wal.enable:
            receiver_threshold = self.receiver_clean_threshold(clean_threshold_ms)
            logger.info("Cleanup old received batch data: %d", receiver_threshold)
            with self._lock:
                controls = list(self._controls.values()) if self._state is TrackerState.STARTED else []
            for control in controls:
                try:
                    control.cleanup_old_blocks(receiver_threshold)
                except Exception:
                    logger.exception("Receiver could not clean up blocks older than %d", receiver_threshold)

    def receiver_clean_threshold(self, clean_threshold_ms: int) -> int:
        """The time before which receivers may delete blocks and WAL segments.

        Receivers delete by store time (WAL segments ending, block manager entries stored, before
        the threshold), not by batch, so a pending batch P must pull the threshold back to before
        its blocks were stored. A block of P was normally stored within the batch before P and is
        remembered as long as its input stream is: hence ``P - batch_duration - remember``. Blocks
        allocated late (after a failed allocation, a restart, or returned to the queue) may be far
        older, so the threshold also goes back to the start of the WAL segment of every block of a
        pending batch and of every unallocated block: that keeps the segment and the block manager
        copy stored in it.
        """
        threshold = clean_threshold_ms
        pending = self.pending_batch_times()
        if pending:
            batch_ms = int(self.ssc.batch_duration_ms)
            remember_ms = self.ssc.graph.get_max_input_stream_remember_duration() or batch_ms
            threshold = min(threshold, pending[0] - batch_ms - remember_ms)
        needed = [info for t in pending for infos in self.get_blocks_of_batch(t).values() for info in infos]
        for sid in self.receiver_input_stream_ids:
            needed.extend(self.received_block_tracker.get_unallocated_blocks(sid))
        for info in needed:
            handle = info.block_store_result.wal_record_handle
            times = None if handle is None else parse_segment_name(segment_basename(handle.path))
            if times is not None:
                threshold = min(threshold, times[0])
        return threshold

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

    def launch_count(self, stream_id: int) -> int:
        """How many times the receiver of a stream was started (1 + restarts)."""
        with self._lock:
            return self._launch_counts.get(stream_id, 0)

    def all_receivers_stopped(self) -> bool:
        """No receiver registered and none about to (re)start."""
        with self._lock:
            return not self._controls and not any(t.is_alive() for t in self._launchers.values())

    # ------------------------------------------------------------ ReceiverTrackerEndpoint

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        if stream_id not in self.receiver_input_stream_ids:
            raise ValueError(f"Register received for unexpected id {stream_id}")
        with self._lock:
            if self._state in (TrackerState.STOPPING, TrackerState.STOPPED):
                return False
            old = self._tracking_infos.get(stream_id)
            scheduled = old.scheduled_locations if old is not None and old.scheduled_locations else None
            acceptable = list(scheduled) if scheduled is not None else self._reschedule(stream_id)
            if not accepts(acceptable, host, executor_id):
                logger.info(
                    "Refused receiver %d from %s/%s: scheduled on %s",
                    stream_id,
                    host,
                    executor_id,
                    ", ".join(map(str, acceptable)),
                )
                return False
            info = ReceiverTrackingInfo(
                stream_id,
                ReceiverState.ACTIVE,
                running_executor=ExecutorCacheTaskLocation(host, executor_id),
                name=f"{receiver_type}-{stream_id}",
            )
            self._tracking_infos[stream_id] = info
            self._controls[stream_id] = control
        self._post(StreamingListenerReceiverStarted(_receiver_info(info)))
        logger.info("Registered receiver for stream %d from %s/%s", stream_id, host, executor_id)
        return True

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        if self._failing_streams and info.stream_id in self._failing_streams:
            self._failing_streams.discard(info.stream_id)
            self._failure_log(info.stream_id).succeeded()
        return self.received_block_tracker.add_block(info)

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

    def deregister_receiver(self, stream_id: int, message: str, error: str) -> bool:
        last_error_time = self._now_ms() if error else -1
        error_info = ReceiverErrorInfo(message, error, last_error_time)
        with self._lock:
            old = self._tracking_infos.get(stream_id)
            if old is not None:
                info = old.with_state(ReceiverState.INACTIVE, error_info=error_info)
            else:
                logger.warning("No prior receiver info")
                info = ReceiverTrackingInfo(stream_id, ReceiverState.INACTIVE, error_info=error_info)
            self._tracking_infos[stream_id] = info
            self._controls.pop(stream_id, None)
        self._post(StreamingListenerReceiverStopped(_receiver_info(info)))
        if error:
            # The whole error goes to the listeners; the log has the launcher's traceback.
            summary = _last_line(error)
            logger.warning("Deregistered receiver for stream %d: %s - %s", stream_id, message, summary)
        else:
            logger.info("Deregistered receiver for stream %d: %s", stream_id, message)
        return True

    # ------------------------------------------------------------ launching

    def _launch_receivers(self) -> None:
        receivers = [self._new_receiver(stream) for stream in self.receiver_input_streams]
        schedule = self.scheduling_policy.schedule_receivers(receivers, self._executors)
        with self._lock:
            for receiver in receivers:
                sid = receiver.stream_id
                self._preferred_locations[sid] = receiver.preferred_location
                self._tracking_infos[sid] = ReceiverTrackingInfo(
                    sid, ReceiverState.SCHEDULED, scheduled_locations=tuple(schedule[sid])
                )
        for stream, receiver in zip(self.receiver_input_streams, receivers, strict=True):
            thread = threading.Thread(
                target=self._run_receiver,
                args=(stream, receiver),
                name=f"receiver-job-{stream.id}",
                daemon=True,
            )
            with self._lock:
                self._launchers[stream.id] = thread
            thread.start()

    def _new_receiver(self, stream: ReceiverInputDStream) -> Receiver:
        # Spark ships a fresh copy of the receiver to every launch; get_receiver() plays that part.
        receiver = stream.get_receiver()
        receiver.set_receiver_id(stream.id)
        return receiver

    def _run_receiver(self, stream: ReceiverInputDStream, receiver: Receiver | None) -> None:
        """Spark's receiver job plus its RestartReceiver loop, until the tracker stops."""
        while receiver is not None:
            self._run_once(stream.id, receiver)
            receiver = self._next_incarnation(stream)
        logger.info("Receiver %d job finished", stream.id)

    def _next_incarnation(self, stream: ReceiverInputDStream) -> Receiver | None:
        """A new, rescheduled receiver after the restart delay; None once the tracker is stopping."""
        delay_s = self.settings.receiver.restart_delay_ms / 1000
        while not self._stopping.is_set():
            logger.info("Restarting Receiver %d in %.3f s", stream.id, delay_s)
            if self._stopping.wait(delay_s):
                break
            try:
                receiver = self._new_receiver(stream)
            except Exception:
                logger.exception("Could not create a new receiver for stream %d", stream.id)
                continue
            with self._lock:
                # Registration checks against these locations, as Spark's does after a restart.
                old = self._tracking_infos.get(stream.id)
                self._tracking_infos[stream.id] = ReceiverTrackingInfo(
                    stream.id,
                    ReceiverState.SCHEDULED,
                    scheduled_locations=tuple(self._reschedule(stream.id)),
                    error_info=None if old is None else old.error_info,
                )
            return receiver
        return None

    def _run_once(self, sid: int, receiver: Receiver) -> None:
        with self._lock:
            self._launch_counts[sid] = self._launch_counts.get(sid, 0) + 1
        try:
            supervisor = ReceiverSupervisor(
                receiver,
                self,
                self.block_store,
                settings=self.settings,
                checkpoint_dir=self.checkpoint_dir,
                host=self._local_executor.host,
                executor_id=self._local_executor.executor_id,
            )
            supervisor.start()
            supervisor.await_termination()
        except Exception as exc:
            with self._lock:
                self._failing_streams.add(sid)
            self._failure_log(sid).failed(exc, "it has been stopped; restarting it")

    def _reschedule(self, stream_id: int) -> list[TaskLocation]:
        with self._lock:
            return self.scheduling_policy.reschedule_receiver(
                stream_id,
                self._preferred_locations.get(stream_id),
                self._tracking_infos,
                self._executors,
            )

    def _post(self, event: object) -> None:
        try:
            self.ssc.scheduler.listener_bus.post(event)
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
    )


def _last_line(error: str) -> str:
    """A formatted traceback's last line: the exception and its message."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else error


def _with_error(message: str, error: str) -> str:
    return f"{message} - {error}" if error else message


def _clock_of(ssc: Any) -> Any:
    """The scheduler's clock when the context has one (manual clocks in tests), else wall time."""
    clock = getattr(getattr(ssc, "scheduler", None), "clock", None) or getattr(ssc, "clock", None)
    return clock.get_time_ms if clock is not None else wall_clock_ms

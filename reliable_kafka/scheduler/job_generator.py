"""Spark's ``JobGenerator``: turns each batch boundary into the jobs of that batch.

A recurring timer posts ``GenerateJobs(time)`` at every batch boundary to an event loop thread,
which handles, in order: generating a batch (allocate received blocks, then build the jobs from
the DStream graph, then submit them), clearing old metadata after a batch completes,
checkpointing, and cleaning the receiver tracker once a checkpoint no longer needs old blocks.

On restart from a checkpoint the batches the old run did not finish are generated again first:
those pending when the checkpoint was written, those the receiver tracker recovered as allocated
but not completed, and every batch time between the last generated one and the restart time.

Recovered pending batches always run. The receiver tracker replays its metadata log whenever
there is a checkpoint directory, also on a first start (the driver died after allocating a batch
but before writing its first checkpoint, or the checkpoint file is gone). Such a start has a new
batch grid whose zero time lies after the old batch times, so those times cannot be generated
again; instead their blocks go back to the unallocated queue (one logged event, see
``ReceivedBlockTracker.deallocate_batches``) and the first new batch runs them, read back from
the WAL. The same happens to recovered batch times a checkpoint restart cannot regenerate (off
its grid) and to a batch whose jobs could not be generated after its blocks were allocated.
Either way their offsets are already committed, so leaving them pending would lose their records
and pin the cleanup of old blocks at their time forever.

With a checkpoint directory, the driver's lease on it (``checkpoint_lease.py``) is asked before
each batch is generated and before each checkpoint or state checkpoint is written: a driver that
lost the lease to another (or cannot tell, having gone unrenewed too long) skips its batches, so
the successor's are the only ones to reach the sinks.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from reliable_kafka import state_checkpoint
from reliable_kafka.checkpoint import Checkpoint, CheckpointWriter, InputStreamRecord
from reliable_kafka.checkpoint_lease import CheckpointLeaseLostError, WriteFence
from reliable_kafka.scheduler.batch_input_info import input_infos_of_batch
from reliable_kafka.scheduler.job import JobSet
from reliable_kafka.scheduler.listener_events import StreamInputInfo
from reliable_kafka.settings import JobSettings
from reliable_kafka.util.bounded_stop import join_within, seconds
from reliable_kafka.util.clock import wall_clock_ms
from reliable_kafka.util.recurring_timer import RecurringTimer
from wal.failure_log import FailureLog

if TYPE_CHECKING:
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
    from reliable_kafka.scheduler.streaming_context import GeneratorContext

logger = logging.getLogger(__name__)

# Spark's default spark.streaming.gracefulStopTimeout: ten batch durations.
_DEFAULT_GRACEFUL_TIMEOUT_BATCHES = 10
_MAX_POLL_S = 0.1
_CHECKPOINT_ALL_MARKED_ANCESTORS = "spark.checkpoint.checkpointAllMarkedAncestors"


def describe_batches(times_ms: Sequence[int]) -> str:
    """``3 batch(es) (1000 ms, 2000 ms, 3000 ms)``, the first five times named."""
    named = ", ".join(f"{t} ms" for t in times_ms[:5]) + (", ..." if len(times_ms) > 5 else "")
    return f"{len(times_ms)} batch(es) ({named})" if times_ms else "no batch"


def graceful_stop_timeout_ms(jobs: JobSettings, batch_duration_ms: int) -> int:
    """``spark.streaming.gracefulStopTimeout``, ten batch durations unless set (Spark's default)."""
    if jobs.graceful_stop_timeout_ms is not None:
        return jobs.graceful_stop_timeout_ms
    return _DEFAULT_GRACEFUL_TIMEOUT_BATCHES * batch_duration_ms


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class GenerateJobs:
    time_ms: int


@dataclass(frozen=True, slots=True)
class ClearMetadata:
    time_ms: int


@dataclass(frozen=True, slots=True)
class DoCheckpoint:
    time_ms: int
    clear_checkpoint_data_later: bool


@dataclass(frozen=True, slots=True)
class ClearCheckpointData:
    time_ms: int


JobGeneratorEvent = GenerateJobs | ClearMetadata | DoCheckpoint | ClearCheckpointData
_STOP = object()


class JobRunner(Protocol):
    """What the generator hands its batches to (the job scheduler)."""

    def submit_job_set(self, job_set: JobSet) -> None: ...

    def report_error(self, message: str, error: BaseException) -> None: ...

    def get_pending_times(self) -> list[int]: ...


class BatchBlocks(Protocol):
    """What the generator uses of the receiver tracker: each batch's blocks."""

    def allocate_blocks_to_batch(self, time_ms: int) -> None: ...

    def get_blocks_of_batch(self, time_ms: int) -> dict[int, list[ReceivedBlockInfo]]: ...

    def num_records_of_batch(self, time_ms: int) -> dict[int, int]: ...

    def has_unallocated_blocks(self) -> bool: ...

    def pending_batch_times(self) -> list[int]: ...

    def deallocate_batches(self, batch_times_ms: Sequence[int]) -> list[int]: ...

    def cleanup_old_blocks_and_batches(self, clean_threshold_ms: int) -> None: ...


class JobGenerator:
    """``ssc``: what the generator uses of its context (graph, clock, checkpoint settings);
    ``jobs``: where its batches' job sets go (the job scheduler). The receiver tracker, built when
    the streams start, is handed to :meth:`start` (None: no receiver input streams)."""

    def __init__(self, ssc: GeneratorContext, jobs: JobRunner) -> None:
        self._jobs = jobs
        self._tracker: BatchBlocks | None = None
        self.ssc = ssc
        self.graph = ssc.graph
        self.clock = ssc.clock
        batch_ms = self.ssc.batch_duration_ms
        self.batch_duration_ms = batch_ms
        self.timer = RecurringTimer(self.clock, batch_ms, self._on_timer, "RecurringTimer - JobGenerator")
        self._events: queue.SimpleQueue[JobGeneratorEvent | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._checkpoint_writer: CheckpointWriter | None = None
        # The driver's lease on the checkpoint directory: every batch and every write there asks
        # it first; refusals are logged as one streak (a pause or a store outage refuses many).
        self._fence: WriteFence | None = None
        self._lease_refusals = FailureLog(logger, "this driver's hold on its checkpoint")
        # Where tasks write state checkpoints; the first checkpoint written also removes what a
        # crashed run left of the ones it was writing.
        self._state_handle: dict[str, Any] | str | None = None
        self._state_dirs_to_clean = True
        self.last_generated_batch_time_ms: int | None = None
        # Submitted batches whose jobs have not all finished: metadata at or after the oldest of
        # them is never cleared, even when later batches finish first (concurrent jobs).
        self._incomplete: set[int] = set()
        self._max_completed_ms: int | None = None
        # Batches posted for generation and not yet cleared and checkpointed: what a graceful
        # stop waits for.
        self._not_fully_processed: set[int] = set()
        self.last_processed_batch_ms: int | None = None

    # ------------------------------------------------------------ life cycle

    @property
    def should_checkpoint(self) -> bool:
        return self.ssc.checkpoint_dir is not None

    def start(self, receiver_tracker: BatchBlocks | None = None) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._tracker = receiver_tracker
            if self.should_checkpoint:
                self._fence = self.ssc.checkpoint_fence
                self._checkpoint_writer = CheckpointWriter(self.ssc.checkpoint_dir, fence=self._fence)
                self._state_handle = state_checkpoint.directory_handle(self.ssc.checkpoint_dir)
            self._thread = threading.Thread(target=self._run, name="JobGenerator", daemon=True)
            self._thread.start()
        checkpoint = self.ssc.initial_checkpoint
        if checkpoint is not None:
            self._restart(checkpoint)
        else:
            self._start_first_time()

    def stop(self, process_received_data: bool) -> None:
        """Stop generating. With ``process_received_data``, first wait (bounded by the graceful
        stop timeout) until every received block is in a batch and every batch is processed."""
        with self._lock:
            if self._thread is None or self._stopped:
                return
            self._stopped = True
        if process_received_data:
            self._stop_gracefully()
        else:
            logger.info("Stopping JobGenerator immediately")
            self.timer.stop(interrupt_timer=True)
            self.graph.stop()
        self._events.put(_STOP)
        if self._thread is not threading.current_thread():
            # A batch stuck in a checkpoint or a metadata log write on dead storage must not hold
            # the stop: the thread is a daemon and is left behind.
            stop_timeout_s = self.ssc.settings.jobs.stop_timeout_ms / 1000
            if not join_within(self._thread, stop_timeout_s):
                return
        logger.info("Stopped JobGenerator")

    def _stop_gracefully(self) -> None:
        logger.info("Stopping JobGenerator gracefully")
        timeout_ms = graceful_stop_timeout_ms(self.ssc.settings.jobs, self.batch_duration_ms)
        deadline = time.monotonic() + timeout_ms / 1000
        poll_s = min(_MAX_POLL_S, self.batch_duration_ms / 1000 / 10)
        tracker = self._tracker

        def wait_for(condition_met: Callable[[], bool], what: str) -> bool:
            logger.info("Waiting for %s", what)
            while not condition_met():
                if time.monotonic() > deadline:
                    return False
                time.sleep(poll_s)
            return True

        if tracker is not None and not wait_for(
            lambda: not tracker.has_unallocated_blocks(), "all received blocks to be in batches"
        ):
            logger.warning(
                "Graceful stop: blocks received are not all in batches after "
                "spark.streaming.gracefulStopTimeout (%s); this run does not process the rest%s",
                seconds(timeout_ms),
                ", a restart from the checkpoint does" if self.should_checkpoint else "",
            )
        stop_time = self.timer.stop(interrupt_timer=False)
        logger.info("Stopped generation timer at %d ms", stop_time)
        if not wait_for(
            lambda: self.has_processed_up_to(stop_time), "jobs to be processed and checkpoints to be written"
        ):
            # Not the end of the drain: the job scheduler runs the jobs submitted on, within the
            # whole stop's bound (scheduler/stop_bound.py), and says if it gives up on some.
            logger.info(
                "Batches still to process after spark.streaming.gracefulStopTimeout (%s); the job "
                "scheduler runs the submitted ones on",
                seconds(timeout_ms),
            )
        self.graph.stop()

    def has_processed_up_to(self, time_ms: int) -> bool:
        # Every batch up to time_ms was posted before the timer stopped, so it is in the set
        # until it is fully processed (or its generation failed).
        with self._lock:
            return not any(t <= time_ms for t in self._not_fully_processed)

    def _start_first_time(self) -> None:
        start_time = self.timer.get_start_time()
        self._return_to_queue(self._tracker_pending(), "recovered from the metadata log on a first start")
        self.graph.start(start_time - self.batch_duration_ms)
        self.timer.start(start_time)
        logger.info("Started JobGenerator at %d ms", start_time)

    def _restart(self, checkpoint: Checkpoint) -> None:
        batch = self.batch_duration_ms
        tracker_pending = self._tracker_pending()
        plan = plan_restart(checkpoint, batch, self.clock.get_time_ms(), tracker_pending)
        if plan.misaligned:
            logger.warning("Ignoring batch times not on this batch grid: %s", plan.misaligned)
        self._return_to_queue(plan.to_return, "recovered but not on this run's batch grid")
        first = plan.to_reschedule[0] if plan.to_reschedule else plan.restart_time_ms
        self.graph.start(checkpoint.zero_time_ms, first - batch)
        logger.info(
            "Restarting from checkpoint of %d ms: batches pending %s, recovered by the receiver tracker %s, "
            "down times %d; regenerating %d batches, then batches from %d ms",
            checkpoint.checkpoint_time_ms,
            sorted(checkpoint.pending_times_ms),
            sorted(tracker_pending),
            plan.down_times,
            len(plan.to_reschedule),
            plan.restart_time_ms,
        )
        with self._lock:
            self.last_generated_batch_time_ms = checkpoint.last_generated_batch_time_ms
        for time_ms in plan.to_reschedule:
            self._post_generate_jobs(time_ms)
        self.timer.start(plan.restart_time_ms)

    def _tracker_pending(self) -> list[int]:
        tracker = self._tracker
        return tracker.pending_batch_times() if tracker is not None else []

    def _return_to_queue(self, batch_times_ms: list[int], why: str) -> None:
        """Have the receiver tracker give these pending batches' blocks to the next batch."""
        tracker = self._tracker
        if tracker is None or not batch_times_ms:
            return
        returned = tracker.deallocate_batches(batch_times_ms)
        if returned:
            logger.warning(
                "Batches %s were allocated but not completed (%s): their blocks go to the next batch",
                returned,
                why,
            )

    # ------------------------------------------------------------ called by the job scheduler

    def on_batch_completion(self, time_ms: int) -> None:
        with self._lock:
            self._incomplete.discard(time_ms)
            if self._max_completed_ms is None or time_ms > self._max_completed_ms:
                self._max_completed_ms = time_ms
        self._events.put(ClearMetadata(time_ms))

    # ------------------------------------------------------------ event loop

    def _on_timer(self, time_ms: int) -> None:
        self._post_generate_jobs(time_ms)

    def _post_generate_jobs(self, time_ms: int) -> None:
        with self._lock:
            self._not_fully_processed.add(time_ms)
        self._events.put(GenerateJobs(time_ms))

    def _run(self) -> None:
        # Only matters for actions run inside transform functions, which run on this thread:
        # they must materialize marked checkpoints (Spark sets it for the same reason, SPARK-6847).
        try:
            self.ssc.sparkContext.setLocalProperty(_CHECKPOINT_ALL_MARKED_ANCESTORS, "true")
        except Exception:
            logger.warning("Could not set %s on the job generator thread", _CHECKPOINT_ALL_MARKED_ANCESTORS)
        while (event := self._events.get()) is not _STOP:
            try:
                self._process(event)
            except Exception as exc:
                self._jobs.report_error("Error in job generator", exc)

    def _process(self, event: object) -> None:
        match event:
            case GenerateJobs(time_ms):
                self._generate_jobs(time_ms)
            case ClearMetadata(time_ms):
                self._clear_metadata(time_ms)
            case DoCheckpoint(time_ms, clear_later):
                self._do_checkpoint(time_ms, clear_later)
            case ClearCheckpointData(time_ms):
                self._clear_checkpoint_data(time_ms)
            case _:
                raise TypeError(f"unknown job generator event {event!r}")

    def _generate_jobs(self, time_ms: int) -> None:
        if not self._holds_checkpoint(f"generate the batch of {time_ms} ms"):
            # A driver that lost its checkpoint runs no more batches: its successor runs them.
            # Skipped, not failed: the next batch this driver may run takes its blocks or ranges.
            with self._lock:
                self._not_fully_processed.discard(time_ms)
            return
        tracker = self._tracker
        try:
            if tracker is not None:
                tracker.allocate_blocks_to_batch(time_ms)
            jobs = self.graph.generate_jobs(time_ms)
            num_records = tracker.num_records_of_batch(time_ms) if tracker is not None else {}
            blocks = tracker.get_blocks_of_batch(time_ms) if tracker is not None else {}
        except Exception as exc:
            with self._lock:
                self.last_generated_batch_time_ms = _later(self.last_generated_batch_time_ms, time_ms)
                # It will never complete: a graceful stop must not wait for it.
                self._not_fully_processed.discard(time_ms)
            self._jobs.report_error(f"Error generating jobs for time {time_ms} ms", exc)
            try:
                self._return_to_queue([time_ms], "its jobs could not be generated")
            except Exception:
                logger.exception("Could not return the blocks of batch %d to the queue", time_ms)
        else:
            with self._lock:
                self.last_generated_batch_time_ms = _later(self.last_generated_batch_time_ms, time_ms)
                self._incomplete.add(time_ms)
            input_infos = input_infos_of_batch(num_records, blocks)
            input_infos.update(self._reported_input_infos(time_ms))
            job_set = JobSet(time_ms, jobs, num_records, input_infos)
            for stream in self.graph.get_receiver_input_streams():
                late = stream.late_input_metadata(time_ms)
                if late is not None:
                    job_set.late_input_metadata[stream.id] = late
            checkpointed = self._checkpoint_before_submitting(time_ms)
            self._jobs.submit_job_set(job_set)
            if checkpointed:
                return
        self._events.put(DoCheckpoint(time_ms, clear_checkpoint_data_later=False))

    def _checkpoint_before_submitting(self, time_ms: int) -> bool:
        """Write the checkpoint of a just generated batch before its jobs run, with the batch pending,
        when an input stream without a receiver made it: such a batch (a direct stream's ranges) is
        written down nowhere but in the checkpoint. Spark writes it after submitting, so a driver
        killed in between had already begun the batch's output with ranges that its restart, not
        finding them, computed again up to the then latest offsets: the same batch time with other
        ranges, which an output keyed by batch time or by ranges does not see as the same batch.
        A receiver stream's batch is in the metadata log from its allocation on, before its jobs."""
        receivers_only = all(stream.is_receiver_input for stream in self.graph.input_streams)
        if receivers_only or not self._is_checkpoint_time(time_ms):
            return False
        assert self._checkpoint_writer is not None
        # A failed write is logged by the writer; the batch runs anyway, as it would in Spark.
        self._checkpoint_writer.write(self._checkpoint(time_ms, also_pending=time_ms))
        return True

    def _is_checkpoint_time(self, time_ms: int) -> bool:
        zero = self.graph.zero_time_ms
        return (
            self._checkpoint_writer is not None
            and zero is not None
            and (time_ms - zero) % self.ssc.checkpoint_duration_ms == 0
        )

    def _reported_input_infos(self, time_ms: int) -> dict[int, StreamInputInfo]:
        """What streams without a receiver report of the batch they just computed."""
        infos = {}
        for stream in self.graph.get_input_streams():
            reported = stream.input_info(time_ms)
            if reported is not None:
                num_records, metadata = reported
                infos[stream.id] = StreamInputInfo(stream.id, num_records, metadata)
        return infos

    def _safe_clear_time(self) -> int | None:
        """The latest completed batch, but before the oldest batch still running."""
        with self._lock:
            upto = self._max_completed_ms
            if upto is not None and self._incomplete:
                upto = min(upto, min(self._incomplete) - self.batch_duration_ms)
            return upto

    def _clear_metadata(self, time_ms: int) -> None:
        clear_time = self._safe_clear_time()
        if clear_time is not None:
            self.graph.clear_metadata(clear_time)
        if self.should_checkpoint:
            # Old block metadata goes only once a checkpoint records this batch as done.
            self._events.put(DoCheckpoint(time_ms, clear_checkpoint_data_later=True))
        else:
            self._cleanup_receiver_tracker(clear_time)
            self._mark_batch_fully_processed(time_ms)

    def _clear_checkpoint_data(self, time_ms: int) -> None:
        self._cleanup_receiver_tracker(self._safe_clear_time())
        self._mark_batch_fully_processed(time_ms)

    def _cleanup_receiver_tracker(self, clear_time: int | None) -> None:
        tracker = self._tracker
        if tracker is None or clear_time is None:
            return
        max_remember = self.graph.get_max_input_stream_remember_duration() or 0
        tracker.cleanup_old_blocks_and_batches(clear_time - max_remember)

    def _do_checkpoint(self, time_ms: int, clear_checkpoint_data_later: bool) -> None:
        writer = self._checkpoint_writer
        if writer is None or not self._is_checkpoint_time(time_ms):
            if clear_checkpoint_data_later:
                self._mark_batch_fully_processed(time_ms)
            return
        if clear_checkpoint_data_later:
            # The batch completed, so its state RDDs are materialized: written from the cache.
            self._write_state_checkpoints(time_ms)
        checkpoint = self._checkpoint(time_ms)
        written = writer.write(checkpoint)
        if written and self._state_dirs_to_clean:
            self._clean_state_checkpoints(checkpoint)
        if clear_checkpoint_data_later:
            if written:
                self._events.put(ClearCheckpointData(time_ms))
            else:
                # Without a checkpoint saying the batch is done, its blocks must stay recoverable.
                self._mark_batch_fully_processed(time_ms)

    def _write_state_checkpoints(self, time_ms: int) -> None:
        if self._state_handle is None or not self._holds_checkpoint("write the state checkpoints"):
            return
        try:
            if self.graph.write_state_checkpoints(time_ms, self._state_handle):
                self._state_dirs_to_clean = True
        except Exception as exc:
            # As a failed checkpoint write: the previous state checkpoint stays the one recorded.
            logger.warning("Could not write the state checkpoints of batch %d ms: %s", time_ms, exc)

    def _clean_state_checkpoints(self, checkpoint: Checkpoint) -> None:
        """Once a driver checkpoint names the newest state snapshots, older ones (and the leftovers
        of writes a crash interrupted) go."""
        assert self._state_handle is not None
        if not self._holds_checkpoint("remove old state checkpoints"):
            return
        keep = {r.position: r.snapshots[0].time_ms for r in checkpoint.state_streams if r.snapshots}
        try:
            removed = state_checkpoint.clean(self._state_handle, keep)
        except Exception as exc:
            logger.warning("Could not remove old state checkpoints: %s", exc)
            return
        self._state_dirs_to_clean = False
        if removed:
            logger.info("Removed %d old state checkpoint(s)", removed)

    def _holds_checkpoint(self, to: str) -> bool:
        """Whether the lease lets this driver run batches and change the checkpoint directory now."""
        if self._fence is None:
            return True
        try:
            self._fence.check()
        except CheckpointLeaseLostError as exc:
            self._lease_refusals.failed(exc, f"did not {to}", traceback=False)
            return False
        if self._lease_refusals.failing:
            self._lease_refusals.succeeded()
        return True

    def _checkpoint(self, time_ms: int, also_pending: int | None = None) -> Checkpoint:
        graph = self.graph
        assert graph.zero_time_ms is not None
        with self._lock:
            last_generated = _later(self.last_generated_batch_time_ms, time_ms)
        pending = set(self._jobs.get_pending_times())
        if also_pending is not None:
            pending.add(also_pending)
        return Checkpoint(
            checkpoint_time_ms=time_ms,
            zero_time_ms=graph.zero_time_ms,
            batch_duration_ms=self.batch_duration_ms,
            checkpoint_duration_ms=self.ssc.checkpoint_duration_ms,
            last_generated_batch_time_ms=last_generated,
            pending_times_ms=tuple(sorted(pending)),
            remember_duration_ms=graph.remember_duration_ms,
            max_input_remember_duration_ms=graph.get_max_input_stream_remember_duration(),
            input_streams=tuple(
                InputStreamRecord(
                    stream.id,
                    type(stream).__name__,
                    stream.is_receiver_input,
                    stream.checkpoint_data(),
                )
                for stream in graph.input_streams
            ),
            written_at_ms=wall_clock_ms(),
            state_streams=graph.state_records(),
        )

    def _mark_batch_fully_processed(self, time_ms: int) -> None:
        with self._lock:
            self._not_fully_processed.discard(time_ms)
            self.last_processed_batch_ms = _later(self.last_processed_batch_ms, time_ms)


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """What a restart from a checkpoint runs: ``to_reschedule`` under their own times, then
    batches from ``restart_time_ms`` on; ``to_return`` are pending batches of the metadata log
    that cannot run under their own time, whose blocks go to the next batch."""

    restart_time_ms: int
    to_reschedule: list[int]
    to_return: list[int]
    misaligned: list[int]
    down_times: int


def plan_restart(
    checkpoint: Checkpoint, batch_duration_ms: int, now_ms: int, tracker_pending: Iterable[int]
) -> RestartPlan:
    """The batches a restart generates again: those pending in the checkpoint, those the metadata
    log holds as allocated but not completed, and every batch time between the last generated
    one and the restart time. A pure function of what the old runs left, so that recovery tests
    can replay kill after kill against the same decisions the job generator makes."""
    batch = batch_duration_ms
    zero = checkpoint.zero_time_ms
    restart_time = ((now_ms - zero) // batch + 1) * batch + zero
    last_generated = checkpoint.last_generated_batch_time_ms
    # Batch times only move forward, even if this clock is behind the old run's.
    restart_time = max(restart_time, last_generated + batch)
    down_times = set(range(last_generated + batch, restart_time, batch))
    pending = set(tracker_pending)
    candidates = down_times | set(checkpoint.pending_times_ms) | pending
    to_reschedule = sorted(t for t in candidates if zero < t < restart_time and (t - zero) % batch == 0)
    return RestartPlan(
        restart_time_ms=restart_time,
        to_reschedule=to_reschedule,
        to_return=sorted(pending - set(to_reschedule)),
        misaligned=sorted(t for t in candidates if (t - zero) % batch),
        down_times=len(down_times),
    )


def _later(current: int | None, time_ms: int) -> int:
    return time_ms if current is None else max(current, time_ms)

"""Spark's ``JobScheduler``: runs the jobs of each batch on a pool of ``concurrent_jobs`` threads.

It owns the receiver tracker (built by the context's factory and started before the job
generator, so that blocks can be allocated from the first batch) and the job generator, and it
starts and stops the listener bus the context hands it. Each job runs with Spark's local
properties for streaming jobs (batch time, output operation id, a job group and description);
when every job of a batch has finished, the batch is reported complete to the receiver tracker
(its metadata log) and to the job generator (which clears old metadata).

A failed output operation still completes its batch, as in Spark: the batch is marked complete
in the metadata log, its blocks become eligible for cleanup, and a restarted driver does not run
it again (its offsets were committed when its blocks were stored). The error is reported to
``awaitTermination`` (which raises it) and to listeners (``OutputOperationInfo.failureReason``);
the context keeps running unless the application stops it. At-least-once delivery therefore
covers failures of the receiver, the driver, the broker and ZooKeeper, not of the sink: the
completion is logged before the error is reported, so stopping the context afterwards does not
bring the batch back. An output operation that must not lose records has to retry inside
``foreachRDD`` until it succeeds (idempotently, keyed by the batch's ``offsetRanges()``), or keep
the offset ranges of a batch it gave up on so that they can be replayed from Kafka.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

from reliable_kafka.scheduler.executor_allocation_client import SparkExecutorAllocationClient
from reliable_kafka.scheduler.executor_allocation_manager import ExecutorAllocationManager
from reliable_kafka.scheduler.job import Job, JobSet
from reliable_kafka.scheduler.job_generator import JobGenerator, describe_batches
from reliable_kafka.scheduler.listener_bus import StreamingListenerBus
from reliable_kafka.scheduler.listener_events import (
    BatchInfo,
    StreamingListenerBatchCompleted,
    StreamingListenerBatchStarted,
    StreamingListenerBatchSubmitted,
    StreamingListenerOutputOperationCompleted,
    StreamingListenerOutputOperationStarted,
)
from reliable_kafka.scheduler.receiver_input import ReceivedBlockSource
from reliable_kafka.scheduler.slot_watch import SlotWatch
from reliable_kafka.scheduler.stop_bound import StopBound
from reliable_kafka.util.clock import wall_clock_ms
from reliable_kafka.util.daemon_pool import DaemonThreadPool
from reliable_kafka.util.worker_python import report_missing_package

if TYPE_CHECKING:
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
    from reliable_kafka.scheduler.streaming_context import SchedulerContext

logger = logging.getLogger(__name__)

BATCH_TIME_PROPERTY_KEY = "spark.streaming.internal.batchTime"
OUTPUT_OP_ID_PROPERTY_KEY = "spark.streaming.internal.outputOpId"
_CHECKPOINT_ALL_MARKED_ANCESTORS = "spark.checkpoint.checkpointAllMarkedAncestors"
# Spark waits this long for running jobs on a non-graceful stop, and an hour on a graceful one
# (after its drain, which here ends within the stop's bound: nothing is left to wait for then).
_STOP_WAIT_S = 2.0
_GRACEFUL_STOP_WAIT_S = 3600.0
# What a graceful stop keeps of its bound for the rest of the stop once it gave up on batches
# (at most half of stopTimeout); the jobs left running get half of it.
_STOP_RESERVE_MS = 4_000


class _JobThreadState(threading.local):
    # A class attribute: every thread, not only the one that made the object, starts with None.
    job: Job | None = None


class ReceiverTrackerLike(ReceivedBlockSource, Protocol):
    """What the scheduler needs of ``scheduler.receiver_tracker.ReceiverTracker``, which it builds at
    start and hands to the job generator (its ``BatchBlocks``) and, as their
    :class:`ReceivedBlockSource`, to the receiver input streams."""

    def start(self) -> None: ...

    def stop(self, graceful: bool) -> None: ...

    def allocate_blocks_to_batch(self, time_ms: int) -> None: ...

    def get_blocks_of_batch(self, time_ms: int) -> dict[int, list[ReceivedBlockInfo]]: ...

    def has_unallocated_blocks(self) -> bool: ...

    def cleanup_old_blocks_and_batches(self, clean_threshold_ms: int) -> None: ...

    def on_batch_completed(self, time_ms: int) -> None: ...

    def pending_batch_times(self) -> list[int]: ...

    def deallocate_batches(self, batch_times_ms: Sequence[int]) -> list[int]: ...

    def num_records_of_batch(self, time_ms: int) -> dict[int, int]: ...

    def all_receivers_stopped(self) -> bool: ...

    def release_receivers(self) -> None: ...

    def active_receiver_ids(self) -> list[int]: ...

    # What streaming dynamic allocation asks (executor_allocation_manager.ReceiverExecutors).
    def receiver_executors(self) -> Mapping[int, Collection[str]]: ...

    def executors_with_unprocessed_blocks(self) -> Collection[str]: ...


ReceiverTrackerFactory = Callable[[], ReceiverTrackerLike]


class JobScheduler:
    """``ssc``: what the scheduler uses of its context; ``listener_bus``: the context's bus, which
    the scheduler starts and stops; ``receiver_tracker_factory``: builds the receiver tracker at
    start, once the graph is complete (the context's, which also attaches the tracker to the
    receiver input streams)."""

    def __init__(
        self,
        ssc: SchedulerContext,
        listener_bus: StreamingListenerBus,
        receiver_tracker_factory: ReceiverTrackerFactory,
    ) -> None:
        self.ssc = ssc
        self.clock = ssc.clock
        self.listener_bus = listener_bus
        self.receiver_tracker: ReceiverTrackerLike | None = None
        self._receiver_tracker_factory = receiver_tracker_factory
        self.job_generator = JobGenerator(ssc, self)
        self.job_group_id = f"reliable-kafka-streaming-{uuid.uuid4().hex}"
        self._lock = threading.Lock()
        self._job_sets: dict[int, JobSet] = {}
        self._futures: set[Future[None]] = set()
        self._running: set[Job] = set()
        self._executor: DaemonThreadPool | None = None
        self._saved_properties: Any = None
        self._state = "initialized"  # -> started -> stopping -> stopped
        self._thread_state = _JobThreadState()
        self._slot_watch: SlotWatch | None = None
        self.executor_allocation_manager: ExecutorAllocationManager | None = None

    @property
    def is_started(self) -> bool:
        return self._state == "started"

    # ------------------------------------------------------------ life cycle

    def start(self) -> None:
        with self._lock:
            if self._state != "initialized":
                return
            self._state = "started"
        settings = self.ssc.settings
        self._executor = DaemonThreadPool(settings.jobs.concurrent_jobs, "streaming-job-executor")
        # The context added its listeners (the status page, rate controllers) before this: they
        # see every event from the first one.
        self.listener_bus.start()
        self._saved_properties = self._capture_local_properties()
        self.receiver_tracker = self._receiver_tracker_factory()
        self.receiver_tracker.start()
        self._start_slot_watch(self.receiver_tracker)
        self._start_executor_allocation_manager(self.receiver_tracker)
        self.job_generator.start(self.receiver_tracker)
        logger.info("Started JobScheduler with %d job thread(s)", settings.jobs.concurrent_jobs)

    def _start_slot_watch(self, tracker: ReceiverTrackerLike) -> None:
        """Receivers that run as tasks hold task slots for good: watch for batches left without."""
        settings = self.ssc.settings
        if settings.receiver.placement != "executors" or not self.ssc.graph.get_receiver_input_streams():
            return
        self._slot_watch = SlotWatch(
            self.ssc.sparkContext,
            self.job_group_id,
            receivers=lambda: len(tracker.active_receiver_ids()),
            post=self.listener_bus.post,
            clock=self.clock,
            period_ms=self.ssc.batch_duration_ms,
        )
        self._slot_watch.start()

    def _start_executor_allocation_manager(self, tracker: ReceiverTrackerLike) -> None:
        """Streaming dynamic allocation, as Spark starts it: after the receivers, as a listener
        (its settings were checked by the context's start, executor_allocation_check)."""
        settings = self.ssc.settings
        if not settings.dynamic_allocation.enabled:
            return
        sc = self.ssc.sparkContext
        manager = ExecutorAllocationManager(
            SparkExecutorAllocationClient(sc),
            tracker,
            settings.dynamic_allocation,
            batch_duration_ms=self.ssc.batch_duration_ms,
            receivers=len(self.ssc.graph.get_receiver_input_streams()),
            clock=self.clock,
            post=self.listener_bus.post,
            task_cpus=int(sc.getConf().get("spark.task.cpus", "1") or 1),
        )
        self.listener_bus.add_listener(manager)
        manager.start()
        self.executor_allocation_manager = manager

    def stop(self, graceful: bool) -> None:
        with self._lock:
            if self._state in ("initialized", "stopping", "stopped"):
                self._state = "stopped" if self._state == "initialized" else self._state
                return
            self._state = "stopping" if graceful else "stopped"
        logger.info("Stopping JobScheduler (graceful=%s)", graceful)
        bound = StopBound.of(self.ssc.settings.jobs, self.ssc.batch_duration_ms, graceful)
        # The jobs of a graceful stop are waited for until the stop's bound, less a reserve for
        # the rest of the stop after that: the jobs left running, the receivers' release.
        reserve_s = min(_STOP_RESERVE_MS, bound.stop_ms // 2) / 1000
        drain_until = time.monotonic() + bound.total_ms / 1000 - reserve_s
        if graceful:
            self._announce_graceful_stop(bound)
        if self._slot_watch is not None:
            self._slot_watch.stop()
        if self.executor_allocation_manager is not None:
            # Before the receivers stop: no executor is removed while the last batches drain.
            self.executor_allocation_manager.stop()
            self.listener_bus.remove_listener(self.executor_allocation_manager)
        # First stop receiving, then stop generating (waiting, if graceful, for every received
        # block to be processed), then stop the job threads.
        if self.receiver_tracker is not None:
            try:
                self.receiver_tracker.stop(graceful)
            except Exception:
                logger.exception("Error stopping the receiver tracker")
        self.job_generator.stop(graceful)
        if graceful and not self._drain(drain_until, bound):
            self._stop_executor(False, min(_STOP_WAIT_S, reserve_s / 2))
        else:
            self._stop_executor(graceful, _STOP_WAIT_S)
        if self.receiver_tracker is not None:
            # The last batches have run: receivers may now drop the blocks they kept for them.
            self.receiver_tracker.release_receivers()
        with self._lock:
            self._state = "stopped"
        self.listener_bus.stop()
        logger.info("Stopped JobScheduler")

    def _announce_graceful_stop(self, bound: StopBound) -> None:
        """Say what a graceful stop waits for and how long it may take: at WARNING when batches
        are queued, since the stop then takes their time and may end without some."""
        with self._lock:
            queued = sorted(t for t, job_set in self._job_sets.items() if not job_set.has_started)
            running = len(self._job_sets) - len(queued)
        if queued:
            logger.warning(
                "Stopping gracefully with %s queued and %d running: processing what was received, "
                "within %s at most; batches left then %s",
                describe_batches(queued),
                running,
                bound,
                self._what_becomes_of_dropped_batches(),
            )
        else:
            logger.info("Stopping gracefully: processing what was received, within %s at most", bound)

    def _what_becomes_of_dropped_batches(self) -> str:
        if self.ssc.checkpoint_dir is not None:
            return "run again after a restart from the checkpoint"
        return "are not run again (no checkpoint)"

    def _drain(self, until: float, bound: StopBound) -> bool:
        """Wait for the jobs of a graceful stop until ``until``. False when the stop goes on
        without some: the bound ran out, or they wait for task slots that receivers hold, which
        are freed only once the receivers are released, after this wait, so they would never
        run. Their batches then stay incomplete in the checkpoint and run again after a restart."""
        watch = self._slot_watch
        starved = watch.starved_streak() if watch is not None else None
        while True:
            with self._lock:
                futures = list(self._futures)
            remaining_s = until - time.monotonic()
            if not futures:
                return True
            if remaining_s <= 0:
                with self._lock:
                    left = sorted(self._job_sets)
                logger.warning(
                    "Graceful stop: %s not processed, to stop within %s; they %s",
                    describe_batches(left),
                    bound,
                    self._what_becomes_of_dropped_batches(),
                )
                break
            if watch is None:
                concurrent.futures.wait(futures, timeout=remaining_s)
                continue
            concurrent.futures.wait(futures, timeout=min(watch.period_s, remaining_s))
            if starved is not None and starved():
                logger.warning(
                    "Stopping without the batches still waiting for task slots that receivers "
                    "hold; they run again after a restart from the checkpoint"
                )
                break
        with self._lock:
            self._state = "stopped"  # their cancelled jobs must not complete their batches
        return False

    def _stop_executor(self, graceful: bool, running_wait_s: float) -> None:
        """Stop the job threads: after the drain (``graceful``), or now, dropping the queued
        jobs and waiting ``running_wait_s`` for the running ones."""
        executor = self._executor
        if executor is None:
            return
        if not graceful:
            with self._lock:
                futures = list(self._futures)
            dropped = sum(future.cancel() for future in futures)
            if dropped:
                logger.info("Dropped %d queued streaming jobs", dropped)
        # Not waiting is the stop's own doing: said below at INFO, not per worker.
        executor.shutdown(_GRACEFUL_STOP_WAIT_S if graceful else running_wait_s, quiet=not graceful)
        with self._lock:
            still_running = list(self._running)
        if still_running:
            # Python threads cannot be interrupted (Spark's shutdownNow); their Spark jobs can.
            logger.info("Stopping without waiting for the streaming jobs still running: %s", still_running)
            self._cancel_running_spark_jobs()

    def _cancel_running_spark_jobs(self) -> None:
        """Cancel this scheduler's Spark jobs, if any runs: a job still in its Python code (a
        sink's own work) has none, and Spark warns about a group without active jobs."""
        sc = self.ssc.sparkContext
        try:
            tracker = sc.statusTracker()
            active = set(tracker.getActiveJobsIds()) & set(tracker.getJobIdsForGroup(self.job_group_id))
            if active:
                logger.info("Cancelling Spark jobs %s of the streaming jobs still running", sorted(active))
                sc.cancelJobGroup(self.job_group_id)
        except Exception:
            logger.exception("Could not cancel the streaming job group")

    # ------------------------------------------------------------ batches

    def submit_job_set(self, job_set: JobSet) -> None:
        if not job_set.jobs:
            # Nothing to run (e.g. a window between slides), but the batch is done: its blocks
            # must not be replayed after a restart.
            logger.debug("No jobs added for time %d ms", job_set.time_ms)
            self._complete_batch(job_set.time_ms, job_set.to_batch_info())
            return
        executor = self._executor
        with self._lock:
            if not self._accepting_jobs():
                # A batch generated while an immediate stop stops the receivers: the stop's doing.
                logger.info("JobScheduler is stopped; dropping the jobs of %d ms", job_set.time_ms)
                return
            self._job_sets[job_set.time_ms] = job_set
            self.listener_bus.post(StreamingListenerBatchSubmitted(job_set.to_batch_info()))
        assert executor is not None
        for job in job_set.jobs:
            future = executor.submit(self._run_job, job)
            with self._lock:
                self._futures.add(future)
            future.add_done_callback(self._forget_future)
        logger.debug("Added %d jobs for time %d ms", len(job_set.jobs), job_set.time_ms)

    def get_pending_times(self) -> list[int]:
        with self._lock:
            return sorted(self._job_sets)

    def report_error(self, message: str, error: BaseException) -> None:
        # The first batch task whose worker cannot import the package becomes one error naming
        # the fix (logged by report_missing_package), also what awaitTermination raises.
        clear = report_missing_package(self.ssc.sparkContext, error)
        if clear is not None:
            self.ssc.notify_error(clear)
            return
        logger.error("%s", message, exc_info=error)
        self.ssc.notify_error(error)

    def _forget_future(self, future: Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)

    # ------------------------------------------------------------ running one job

    def in_job_thread(self) -> bool:
        """True on a thread running one of this scheduler's jobs (e.g. inside ``foreachRDD``)."""
        return self._thread_state.job is not None

    def _run_job(self, job: Job) -> None:
        if not self._accepting_jobs():
            return
        self._thread_state.job = job
        try:
            self._run_job_here(job)
        finally:
            self._thread_state.job = None

    def _run_job_here(self, job: Job) -> None:
        try:
            self._set_job_properties(job)
        except Exception:
            # Properties are for the UI and listeners; a job must not fail for want of them.
            logger.warning("Could not set Spark local properties for %s", job, exc_info=True)
        if not self._handle_job_start(job):
            return
        job.run()
        self._handle_job_completion(job)

    def _accepting_jobs(self) -> bool:
        return self._state in ("started", "stopping")

    def _handle_job_start(self, job: Job) -> bool:
        with self._lock:
            job_set = self._job_sets.get(job.time_ms)
            if job_set is None or not self._accepting_jobs():
                return False
            first = not job_set.has_started
            job_set.handle_job_start(job)
            job.start_time_ms = wall_clock_ms()
            self._running.add(job)
            # Posted under the lock so that listeners see BatchStarted before any job's events.
            if first:
                self.listener_bus.post(StreamingListenerBatchStarted(job_set.to_batch_info()))
            self.listener_bus.post(StreamingListenerOutputOperationStarted(job.to_output_operation_info()))
        return True

    def _handle_job_completion(self, job: Job) -> None:
        batch_info = None
        with self._lock:
            self._running.discard(job)
            job.end_time_ms = wall_clock_ms()
            job_set = self._job_sets.get(job.time_ms)
            if job_set is None or not self._accepting_jobs():
                # Stopped meanwhile (not gracefully): the batch stays incomplete, so that a restart
                # runs it again, as Spark drops the completion of a job outliving its scheduler.
                return
            job_set.handle_job_completion(job)
            self.listener_bus.post(StreamingListenerOutputOperationCompleted(job.to_output_operation_info()))
            if job_set.has_completed:
                del self._job_sets[job.time_ms]
                batch_info = job_set.to_batch_info()
        if batch_info is not None:
            self._complete_batch(job.time_ms, batch_info)
            self.listener_bus.post(StreamingListenerBatchCompleted(batch_info))
        if job.error is not None:
            self.report_error(f"Error running job {job}", job.error)

    def _complete_batch(self, time_ms: int, batch_info: BatchInfo) -> None:
        # Input streams hear of it before the job generator does: what they do on completion
        # (a direct stream's group commit) is then part of the batch a graceful stop waits for.
        for stream in self.ssc.graph.get_input_streams():
            try:
                stream.on_batch_completed(batch_info)
            except Exception as exc:
                self.report_error(f"Error in {stream.name} on completion of batch {time_ms} ms", exc)
        tracker = self.receiver_tracker
        if tracker is not None:
            try:
                tracker.on_batch_completed(time_ms)
            except Exception as exc:
                self.report_error(f"Error recording completion of batch {time_ms} ms", exc)
        self.job_generator.on_batch_completion(time_ms)

    # ------------------------------------------------------------ Spark local properties

    def _capture_local_properties(self) -> Any:
        """The caller's local properties (scheduler pool...), which every job inherits, as in Spark."""
        try:
            properties = self.ssc.sparkContext._jsc.sc().getLocalProperties().clone()
        except Exception:
            logger.debug("Could not read the caller's Spark local properties", exc_info=True)
            return None
        return properties

    def _set_job_properties(self, job: Job) -> None:
        sc = self.ssc.sparkContext
        if self._saved_properties is not None:
            sc._jsc.sc().setLocalProperties(self._saved_properties.clone())
        sc.setJobGroup(self.job_group_id, f"Streaming job from {job.description}", interruptOnCancel=False)
        sc.setLocalProperty(BATCH_TIME_PROPERTY_KEY, str(job.time_ms))
        sc.setLocalProperty(OUTPUT_OP_ID_PROPERTY_KEY, str(job.output_op_id))
        # Truncate the lineage of RDDs marked for (local) checkpointing (SPARK-6847).
        sc.setLocalProperty(_CHECKPOINT_ALL_MARKED_ANCESTORS, "true")

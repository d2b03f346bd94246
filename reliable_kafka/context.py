"""``StreamingContext``: pyspark's entry point to streaming, over our Python DStreams and scheduler.

The public surface is pyspark's (``StreamingContext(sc, batchDuration)``, ``queueStream``,
``start``/``stop``/``awaitTermination``, ``getOrCreate``..., durations in seconds). A context goes
INITIALIZED -> ACTIVE -> STOPPED; it cannot be started again once stopped, and only one context
is active in a process at a time.

Recovery, and how it differs from Spark: Spark's ``getOrCreate`` deserializes the whole DStream
graph, closures included, from the checkpoint. We never read executable data back from disk, so
``getOrCreate`` calls ``setupFunc`` again whether or not a checkpoint exists (the code is the
source of truth, as in Structured Streaming) and then restores the checkpoint's plain metadata
(see ``checkpoint.py``): the zero time, so that batch times stay on the old grid, and the last
generated and pending batch times. On start, the job generator first runs again every batch the
old run did not finish: those pending in the checkpoint, those the receiver tracker recovers from
its metadata write-ahead log as allocated but not completed (their blocks are read back from the
WAL), and the batch times the driver was down for. ``setupFunc`` must therefore build the same
receiver input streams in the same order (their ids key the recovered blocks); a mismatch is an
error. Stateful DStreams (``updateStateByKey``, ``reduceByKeyAndWindow`` with an inverse, streams
marked with ``checkpoint(interval)``) are written to the checkpoint directory every checkpoint
interval (``state_checkpoint.py``); ``getOrCreate`` checks the newest complete state checkpoint
of each (falling back to the one before it when a file is damaged) and restores it, and the
batches after it are recomputed from their blocks in the write-ahead logs: at-least-once state,
as in Spark. ``setupFunc`` must build the same stateful streams in the same order.

One driver per checkpoint: ``start()`` takes a lease on the checkpoint directory and ``stop()``
releases it (``checkpoint_lease.py``). A second driver's ``start()`` fails naming the holder; a
dead holder's lease is taken over; a driver whose lease another took over stops, and
``awaitTermination`` raises why.
"""

from __future__ import annotations

import enum
import functools
import itertools
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark import RDD, SparkContext

from reliable_kafka import state_checkpoint
from reliable_kafka.checkpoint import Checkpoint, CheckpointError, ensure_checkpoint_dir, read_checkpoint
from reliable_kafka.checkpoint_lease import CheckpointLease, CheckpointLeaseLostError, WriteFence
from reliable_kafka.dstream.dstream import DStream
from reliable_kafka.dstream.dstream_graph import DStreamGraph
from reliable_kafka.dstream.functions import duration_ms
from reliable_kafka.dstream.queue_input_dstream import QueueInputDStream
from reliable_kafka.dstream.transformed_dstream import TransformedDStream
from reliable_kafka.dstream.union_dstream import UnionDStream
from reliable_kafka.scheduler.executor_allocation_check import check_dynamic_allocation
from reliable_kafka.scheduler.job_scheduler import JobScheduler, ReceiverTrackerLike
from reliable_kafka.scheduler.listener import StreamingListener
from reliable_kafka.scheduler.listener_bus import StreamingListenerBus
from reliable_kafka.scheduler.listener_events import StreamingListenerStreamingStarted
from reliable_kafka.scheduler.stop_bound import StopBound
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.util import interpreter_exit, jvm_shutdown_hook
from reliable_kafka.util.bounded_stop import stop_within
from reliable_kafka.util.clock import Clock, SystemClock, wall_clock_ms
from reliable_kafka.util.ctrl_c import CtrlCStop
from reliable_kafka.util.filesystems import configure, is_local, options_of_spark_context, qualify
from reliable_kafka.util.jvm_shutdown_hook import JvmShutdownHook
from reliable_kafka.util.spark_internals import stop_console_progress
from reliable_kafka.util.worker_python import default_daemon_module, default_workers_to_this_python

if TYPE_CHECKING:
    from reliable_kafka.ui.status_ui import StatusUI

logger = logging.getLogger(__name__)


class StreamingContextState(enum.Enum):
    INITIALIZED = "INITIALIZED"
    ACTIVE = "ACTIVE"
    STOPPED = "STOPPED"


class ContextWaiter:
    """What ``awaitTermination`` waits on: a stop, or an error reported by the scheduler."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._error: BaseException | None = None
        self._stopped = False

    def notify_error(self, error: BaseException) -> None:
        with self._changed:
            self._error = error
            self._changed.notify_all()

    def notify_stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    def wait_for_stop_or_error(self, timeout_s: float | None = None) -> bool:
        """True once stopped, False on timeout; raises the reported error if there is one."""
        with self._changed:
            self._changed.wait_for(lambda: self._stopped or self._error is not None, timeout_s)
            if self._error is not None:
                raise self._error
            return self._stopped


class StreamingContext:
    """Main entry point for streaming: builds DStreams and runs their jobs every batch.

    What runs is ``StreamingSettings.resolve(sparkContext, settings)``: the fields ``settings`` was
    constructed with, over the SparkConf's ``spark.streaming.*`` keys, over the environment. ``clock`` and
    ``receiver_tracker_factory`` are for tests (a ``ManualClock``; a fake tracker).
    """

    _activation_lock: ClassVar[threading.RLock] = threading.RLock()
    _active_context: ClassVar[StreamingContext | None] = None

    def __init__(
        self,
        sparkContext: SparkContext,
        batchDuration: float,
        settings: StreamingSettings | None = None,
        *,
        clock: Clock | None = None,
        receiver_tracker_factory: Callable[[StreamingContext], ReceiverTrackerLike] | None = None,
    ) -> None:
        self._sc = sparkContext
        default_workers_to_this_python(sparkContext)
        default_daemon_module(sparkContext)
        self.settings = StreamingSettings.resolve(sparkContext, settings)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.graph = DStreamGraph()
        self.graph.set_batch_duration(duration_ms(batchDuration, "batchDuration"))
        self.checkpoint_dir: str | None = None
        self.initial_checkpoint: Checkpoint | None = None
        # Held from start() to stop() when there is a checkpoint directory (checkpoint_lease.py).
        self._checkpoint_lease: CheckpointLease | None = None
        self._input_stream_ids = itertools.count()
        self._ids_lock = threading.Lock()
        self._lock = threading.RLock()
        self._state = StreamingContextState.INITIALIZED
        self._waiter = ContextWaiter()
        # The thread running stop(), while it runs: a SIGTERM then waits for that stop.
        self._stopping_thread: threading.Thread | None = None
        self._stop_finished = threading.Event()
        # Makes checking and setting that mark one step: two stops at once must not both take
        # it. Reentrant: a SIGTERM handler may run on the main thread while it holds the lock.
        self._stopping_mark_lock = threading.RLock()
        self._handling_sigterm = False
        self._sigterm_after_stop: tuple[Callable[[int, FrameType | None], Any] | int, int] | None = None
        self._sigterm_handler: Callable[[int, FrameType | None], None] | None = None
        self._previous_sigterm_handler: Callable[[int, FrameType | None], Any] | int | None = None
        self._ctrl_c: CtrlCStop | None = None
        self._jvm_shutdown_hook: JvmShutdownHook | None = None
        self._console_progress_stopped = False
        # The composition root: the context builds the parts and hands each its collaborators;
        # no part reaches back through the context (tests/test_import_graph.py keeps that).
        self._receiver_tracker_factory = receiver_tracker_factory
        self.listener_bus = StreamingListenerBus()
        self.status_ui: StatusUI | None = None
        self.scheduler = JobScheduler(self, self.listener_bus, self._start_receiver_tracker)

    def _start_receiver_tracker(self) -> ReceiverTrackerLike:
        """The receiver tracker, built when the scheduler starts (the graph is complete then) and
        attached to the receiver input streams, whose batches read its blocks."""
        if self._receiver_tracker_factory is not None:
            tracker = self._receiver_tracker_factory(self)
        else:
            # Imported here: the tracker pulls in the receivers, the block manager and the WAL,
            # which a context without receiver streams never needs to load.
            from reliable_kafka.scheduler.receiver_tracker import ReceiverTracker  # noqa: PLC0415

            tracker = ReceiverTracker(
                self,
                listener_bus=self.listener_bus,
                clock=self.clock,
                checkpoint_fence=self._checkpoint_lease,
            )
        for stream in self.graph.get_receiver_input_streams():
            stream.attach_block_source(tracker)
        return tracker

    def _add_listeners_before_start(self) -> None:
        """The listeners the context brings, on the bus before it starts, so that they see every
        event from the first one: each stream's rate controller (backpressure; the streams own and
        stop them) and the status page."""
        for stream in self.graph.get_input_streams():
            if stream.rate_controller is not None:
                self.listener_bus.add_listener(stream.rate_controller)
        # Imported here: the page loads the Kafka wing and an HTTP server.
        from reliable_kafka.ui.status_ui import start_status_ui  # noqa: PLC0415

        self.status_ui = start_status_ui(self, self.listener_bus)

    def _stop_console_progress(self) -> None:
        """Stop Spark's console progress bar unless ``spark.streaming.ui.showConsoleProgress``:
        at start, and before ``getOrCreate``'s recovery runs Spark jobs (reading state
        checkpoints), whose bar would otherwise be drawn over the log while the driver recovers."""
        if self.settings.ui.console_progress or self._console_progress_stopped:
            return
        self._console_progress_stopped = True
        if stop_console_progress(self._sc):
            logger.info("Spark's console progress bar stopped (spark.streaming.ui.showConsoleProgress)")

    def _stop_status_ui(self) -> None:
        if self.status_ui is not None:
            self.status_ui.stop()

    # ------------------------------------------------------------ properties

    @property
    def sparkContext(self) -> SparkContext:
        return self._sc

    @property
    def batch_duration_ms(self) -> int:
        batch = self.graph.batch_duration_ms
        assert batch is not None
        return batch

    @property
    def checkpoint_duration_ms(self) -> int:
        """The graph is checkpointed every batch (Spark's default), or as the recovered run did."""
        if self.initial_checkpoint is not None:
            return self.initial_checkpoint.checkpoint_duration_ms
        return self.batch_duration_ms

    @property
    def checkpoint_fence(self) -> WriteFence | None:
        """The lease on the checkpoint directory that every write there asks first."""
        return self._checkpoint_lease

    @property
    def state(self) -> StreamingContextState:
        return self._state

    def getState(self) -> StreamingContextState:
        return self._state

    def next_input_stream_id(self) -> int:
        with self._ids_lock:
            return next(self._input_stream_ids)

    def check_accepts_new_streams(self) -> None:
        """DStreams can only be added before start, as in Spark."""
        if self._state is StreamingContextState.ACTIVE:
            raise ValueError(
                "Adding new inputs, transformations, and output operations after starting a context "
                "is not supported"
            )
        if self._state is StreamingContextState.STOPPED:
            raise ValueError(
                "Adding new inputs, transformations, and output operations after stopping a context "
                "is not supported"
            )

    def notify_error(self, error: BaseException) -> None:
        """An error in a job or in job generation: ``awaitTermination`` raises it."""
        self._waiter.notify_error(error)

    # ------------------------------------------------------------ configuration

    def checkpoint(self, directory: str | None) -> None:
        """Checkpoint the driver's metadata to ``directory`` (created 0o700) after every batch.

        A local path or a URL (``hdfs://``, ``s3a://``...), reached with the ``spark.hadoop.*`` keys
        of the SparkConf (see ``util/filesystems.py``); the write-ahead logs live under it too."""
        if directory is None:
            self.checkpoint_dir = None
            return
        options = options_of_spark_context(self.sparkContext)
        url = qualify(directory, options)
        # Recorded for this process's readers and writers that get only the directory; receiver
        # tasks and batch partitions carry the options to executors themselves.
        configure(url, options)
        self.checkpoint_dir = str(ensure_checkpoint_dir(url, options))

    def remember(self, duration: float) -> None:
        """Have every DStream keep its RDDs at least ``duration`` seconds."""
        self.graph.remember(duration_ms(duration, "remember duration"))

    def addStreamingListener(self, streamingListener: StreamingListener) -> None:
        self.listener_bus.add_listener(streamingListener)

    def removeStreamingListener(self, streamingListener: StreamingListener) -> None:
        self.listener_bus.remove_listener(streamingListener)

    # ------------------------------------------------------------ creating streams

    def queueStream(
        self,
        rdds: Sequence[RDD[Any] | Sequence[Any]],
        oneAtATime: bool = True,
        default: RDD[Any] | Sequence[Any] | None = None,
    ) -> DStream:
        """An input stream taking one RDD (or all, ``oneAtATime=False``) from ``rdds`` per batch.

        Lists are parallelized. A ``collections.deque`` is read live, so RDDs appended after the
        stream was created are seen; any other sequence is copied, as in pyspark.
        """
        return QueueInputDStream(self, rdds, oneAtATime, default)

    def union(self, *dstreams: DStream) -> DStream:
        if not dstreams:
            raise ValueError("should have at least one DStream to union")
        if len(dstreams) == 1:
            return dstreams[0]
        if len({stream.slide_duration_ms for stream in dstreams}) > 1:
            raise ValueError("All DStreams should have same slide duration")
        return UnionDStream(list(dstreams))

    def transform(
        self, dstreams: Sequence[DStream], transformFunc: Callable[[list[RDD[Any]]], RDD[Any]]
    ) -> DStream:
        """A stream whose RDD is ``transformFunc([rdd of each stream])`` every batch."""
        return TransformedDStream(list(dstreams), lambda _time, *rdds: transformFunc(list(rdds)))

    # ------------------------------------------------------------ life cycle

    def start(self) -> None:
        with self._lock:
            if self._state is StreamingContextState.ACTIVE:
                logger.warning("StreamingContext has already been started")
                return
            if self._state is StreamingContextState.STOPPED:
                raise ValueError("StreamingContext has already been stopped")
            with StreamingContext._activation_lock:
                active = StreamingContext._active_context
                if active is not None and active is not self:
                    raise ValueError(
                        "Only one StreamingContext may be started in this process; stop the active one first"
                    )
                try:
                    self.graph.validate()
                    check_dynamic_allocation(
                        self.settings.dynamic_allocation, dict(self._sc.getConf().getAll()), self._sc.master
                    )
                    _warn_if_block_interval_exceeds_batch(self)
                    self._take_checkpoint_lease()
                    self._add_listeners_before_start()
                    self.scheduler.start()
                except BaseException as exc:
                    # The error is raised to the application, which shows its traceback: once.
                    logger.error("Error starting the context (%s), marking it as stopped", type(exc).__name__)
                    self.scheduler.stop(False)
                    self._stop_status_ui()
                    self._release_checkpoint_lease(self.settings.jobs.stop_timeout_ms / 1000)
                    self._state = StreamingContextState.STOPPED
                    raise
                self._state = StreamingContextState.ACTIVE
                StreamingContext._active_context = self
            self.listener_bus.post(StreamingListenerStreamingStarted(wall_clock_ms()))
            _register_exit_hook()
            self._register_jvm_shutdown_hook()
            self._install_sigterm_handler()
            self._install_ctrl_c_handler()
            self._stop_console_progress()
        logger.info("StreamingContext started")

    def stop(self, stopSparkContext: bool = True, stopGraceFully: bool = False) -> None:
        """Stop the streams; with ``stopGraceFully``, first process all data already received."""
        if self.listener_bus.in_listener_thread():
            raise RuntimeError("Cannot stop StreamingContext within listener bus thread.")
        if self.scheduler.in_job_thread():
            if stopGraceFully:
                raise RuntimeError(
                    "Cannot stop StreamingContext gracefully from a streaming job: it would wait for itself"
                )
            # The job threads are joined on stop, so this one cannot do it; a helper thread can.
            threading.Thread(
                target=self.stop, args=(stopSparkContext, False), name="streaming-stop", daemon=True
            ).start()
            return
        stop_timeout_s = self.settings.jobs.stop_timeout_ms / 1000
        # Marked for the whole stop, Spark's included: a SIGTERM meanwhile waits for all of it. Its
        # handler may run late, when the main thread wakes from a wait, so the mark must outlast that.
        outermost = self._mark_stopping()
        try:
            with self._lock:
                if self._state is StreamingContextState.INITIALIZED:
                    logger.warning("StreamingContext has not been started yet")
                elif self._state is StreamingContextState.STOPPED:
                    logger.warning("StreamingContext has already been stopped")
                else:
                    self._defer_sigterm_while_stopping()
                    self._stop_scheduler(stopGraceFully)
                    self._release_checkpoint_lease(stop_timeout_s)
                self._state = StreamingContextState.STOPPED
            # Even when already stopped: stop(False) then stop(True) must still stop Spark.
            if stopSparkContext:
                stop_within("the SparkContext", self._sc.stop, stop_timeout_s)
        finally:
            if outermost:
                with self._stopping_mark_lock:
                    self._stopping_thread = None
                    self._stop_finished.set()
        self._restore_sigterm_handler()
        if self._ctrl_c is not None:
            self._ctrl_c.restore()
        hook, self._jvm_shutdown_hook = self._jvm_shutdown_hook, None
        if hook is not None:
            hook.remove()
        self._deliver_sigterm_received_while_stopping()

    def _mark_stopping(self) -> bool:
        """Mark this thread as the one stopping unless a stop is under way; True if it did."""
        with self._stopping_mark_lock:
            if self._stopping_thread is not None:
                return False
            self._stopping_thread = threading.current_thread()
            self._stop_finished.clear()
            return True

    def _stop_scheduler(self, graceful: bool) -> None:
        """Stop receiving and generating within the stop's bound (``scheduler/stop_bound.py``),
        which the scheduler keeps to on its own unless a part of it is stuck."""
        bound = StopBound.of(self.settings.jobs, self.batch_duration_ms, graceful)
        bound_s = bound.total_ms / 1000
        try:
            if not stop_within("the job scheduler", lambda: self.scheduler.stop(graceful), bound_s):
                logger.warning(
                    "StreamingContext stopped without waiting for the rest of its scheduler, which "
                    "did not stop within %s",
                    bound,
                )
        except Exception:
            logger.exception("Error stopping the job scheduler")
        self._stop_status_ui()
        with StreamingContext._activation_lock:
            if StreamingContext._active_context is self:
                StreamingContext._active_context = None
        self._waiter.notify_stop()
        logger.info("StreamingContext stopped successfully")

    def awaitTermination(self, timeout: float | None = None) -> None:
        """Wait for the context to stop (at most ``timeout`` seconds); raises a job's error."""
        self._waiter.wait_for_stop_or_error(timeout)

    def awaitTerminationOrTimeout(self, timeout: float) -> bool:
        """True if stopped within ``timeout`` seconds, False otherwise; raises a job's error."""
        return self._waiter.wait_for_stop_or_error(timeout)

    def _stop_on_shutdown(self) -> None:
        graceful = self.settings.jobs.stop_gracefully_on_shutdown
        if graceful:
            logger.info("Invoking stop(stopGracefully=True) from shutdown hook")
        else:
            # Said once, at INFO: what this stop then logs of receivers and jobs it ends is its
            # own doing, not a failure.
            logger.info(
                "Invoking stop(stopGracefully=False) from shutdown hook: an immediate stop "
                "(spark.streaming.stopGracefullyOnShutdown is false); batches not yet processed "
                "run again only after a restart from the checkpoint"
            )
        self.stop(stopSparkContext=False, stopGraceFully=graceful)

    @classmethod
    def _stop_active_at_exit(cls) -> None:
        active = cls._active_context
        if active is not None:
            active._stop_on_shutdown()
        jvm_shutdown_hook.outlive_jvm_shutdown()

    # ------------------------------------------------------------ checkpoint lease

    def _take_checkpoint_lease(self) -> None:
        """One driver per checkpoint: fails naming the driver that holds it (checkpoint_lease.py)."""
        if self.checkpoint_dir is None:
            return
        lease = CheckpointLease.acquire(
            self.checkpoint_dir,
            timeout_ms=self.settings.checkpoint.lease_timeout_ms,
            application_id=self._sc.applicationId,
        )
        self._checkpoint_lease = lease
        lease.start_renewing(self._on_checkpoint_lease_lost)

    def _on_checkpoint_lease_lost(self, error: CheckpointLeaseLostError) -> None:
        """Another driver took the checkpoint over: this one's writes are refused already; stop
        it, and have awaitTermination raise why. On a thread of its own: the stop releases the
        lease, which joins the renewal thread this runs on."""
        logger.error("%s", error)
        self.notify_error(error)
        stop = threading.Thread(
            target=self.stop,
            kwargs={"stopSparkContext": False},
            name="streaming-stop-lease-lost",
            daemon=True,
        )
        stop.start()

    def _release_checkpoint_lease(self, bound_s: float) -> None:
        """After the scheduler stopped: writes from threads it left behind are refused from now,
        and the next driver takes the checkpoint at once (bounded: the store may be gone)."""
        lease, self._checkpoint_lease = self._checkpoint_lease, None
        if lease is None:
            return
        try:
            if not stop_within("the checkpoint lease", lease.release, bound_s):
                logger.warning("The lease on checkpoint %s was not released in %g s", lease.url, bound_s)
        except Exception:
            logger.exception("Could not release the lease on checkpoint %s", lease.url)

    def _register_jvm_shutdown_hook(self) -> None:
        """A SIGTERM to the driver JVM stops this context before Spark's hooks stop the
        SparkContext under it, as Spark's StreamingContext hook does (util/jvm_shutdown_hook.py)."""
        bound = StopBound.of(self.settings.jobs, self.batch_duration_ms, graceful=True)
        # The JVM waits this long for the stop, plus a margin for the receivers' last commits.
        self._jvm_shutdown_hook = jvm_shutdown_hook.register(
            self._sc, self._stop_on_shutdown, bound.total_ms / 1000 + 10
        )

    def _install_ctrl_c_handler(self) -> None:
        """Ctrl-C stops as a shutdown does (see util/ctrl_c.py), not by cancelling every job."""
        graceful = self.settings.jobs.stop_gracefully_on_shutdown
        how = "gracefully (processing what was received)" if graceful else "now"
        self._ctrl_c = CtrlCStop(self._stop_on_shutdown, lambda: self._stopping_thread is not None, how)
        self._ctrl_c.install()

    # ------------------------------------------------------------ SIGTERM

    def _install_sigterm_handler(self) -> None:
        """Make SIGTERM stop the context first: gracefully with ``stop_gracefully_on_shutdown``,
        else at once, as Spark's shutdown hook does either way.

        Spark's shutdown hook runs on SIGTERM because the JVM runs its hooks then; Python's atexit
        does not (the default SIGTERM action kills the process), so the hook alone would never
        run for ``kill`` or a cluster manager's stop. Without a handler, even an immediate stop
        never ran: the receivers' tasks lost the driver mid-block, and every block they held
        failed its store attempts, its deregistration and its Spark task, each logged as an
        error. Only the main thread may set handlers; a handler set from Python code that is not
        ours is kept and called after the stop (chained), and one that is not Python's (None) or
        SIG_IGN is left alone.
        """
        if threading.current_thread() is not threading.main_thread():
            logger.info("Not on the main thread: SIGTERM will not stop the context gracefully")
            return
        previous = signal.getsignal(signal.SIGTERM)
        if previous is None or previous == signal.SIG_IGN:
            logger.info("SIGTERM is ignored or handled outside Python: not installing a handler for it")
            return
        self._previous_sigterm_handler = previous
        # Bound to the handler it chains to, which must outlive a restore: a handler installed
        # over ours may chain to ours after stop() restored the previous one.
        self._sigterm_handler = functools.partial(self._on_sigterm, previous)
        signal.signal(signal.SIGTERM, self._sigterm_handler)

    def _restore_sigterm_handler(self) -> None:
        handler, previous = self._sigterm_handler, self._previous_sigterm_handler
        if handler is None or previous is None:
            return
        try:
            if signal.getsignal(signal.SIGTERM) is handler:
                signal.signal(signal.SIGTERM, previous)
        except ValueError:
            # stop() on another thread: the handler stays, and restores itself when called.
            return
        self._sigterm_handler = self._previous_sigterm_handler = None

    def _defer_sigterm_while_stopping(self) -> None:
        """A context started off the main thread installed no handler, and SIGTERM's default
        action would end the process in the middle of this stop: hold it until the stop is done
        (only the main thread can; a stop elsewhere keeps the default)."""
        if self._sigterm_handler is None and threading.current_thread() is threading.main_thread():
            self._install_sigterm_handler()

    def _on_sigterm(
        self,
        previous: Callable[[int, FrameType | None], Any] | int,
        signum: int,
        frame: FrameType | None,
    ) -> None:
        logger.info("Received SIGTERM")
        stopping = self._stopping_thread
        if stopping is threading.current_thread():
            # This handler interrupted the very stop it would wait for, on the main thread: the
            # stop delivers the signal when it is done. When an earlier SIGTERM's handler is the
            # one stopping, that handler passes it on; a second one must not.
            if not self._handling_sigterm:
                logger.warning("SIGTERM while stopping: the process ends once the stop is done")
                self._sigterm_after_stop = (previous, signum)
            return
        self._handling_sigterm = True
        try:
            if stopping is not None:
                logger.warning("SIGTERM while stopping: waiting for the stop under way to finish")
                self._stop_finished.wait()  # bounded: that stop is
            elif self._state is StreamingContextState.ACTIVE:
                if self.settings.jobs.stop_gracefully_on_shutdown or not callable(previous):
                    self._stop_on_shutdown()
                else:
                    # The application's own handler owns SIGTERM, as it did in pyspark 2.4 (Spark's
                    # hook runs on the JVM's SIGTERM only): it may stop gracefully itself, and an
                    # immediate stop first would drop the batches it means to finish.
                    logger.info(
                        "SIGTERM goes to the application's own handler "
                        "(spark.streaming.stopGracefullyOnShutdown is false)"
                    )
        finally:
            self._handling_sigterm = False
        self._restore_sigterm_handler()
        self._chain_sigterm(previous, signum, frame)

    def _deliver_sigterm_received_while_stopping(self) -> None:
        pending, self._sigterm_after_stop = self._sigterm_after_stop, None
        if pending is not None:
            previous, signum = pending
            self._chain_sigterm(previous, signum, None)

    @staticmethod
    def _chain_sigterm(
        previous: Callable[[int, FrameType | None], Any] | int, signum: int, frame: FrameType | None
    ) -> None:
        # Chain: the previous handler now gets the signal. Called directly, not by raising the
        # signal again: a handler installed over ours that chains to ours would get it again,
        # call us again, and so on until the recursion limit.
        if callable(previous):
            previous(signum, frame)
            return
        # SIG_DFL: the default action, terminating the process.
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    # ------------------------------------------------------------ recovery

    @classmethod
    def getOrCreate(cls, checkpointPath: str, setupFunc: Callable[[], StreamingContext]) -> StreamingContext:
        """``setupFunc()``'s context, restored from the checkpoint in ``checkpointPath`` if there is one.

        Unlike Spark, ``setupFunc`` runs in both cases (see the module docstring). A checkpoint that
        exists but cannot be read raises :class:`~reliable_kafka.checkpoint.CheckpointError`.
        """
        if not callable(setupFunc):
            raise TypeError("setupFunc should be callable.")
        # A local checkpoint is read first, so a corrupt one fails before anything is built. A
        # remote one is read with the access keys of the SparkConf setupFunc's context was made with.
        local = is_local(str(checkpointPath))
        checkpoint = read_checkpoint(checkpointPath) if local else None
        ssc = setupFunc()
        if not isinstance(ssc, StreamingContext):
            raise TypeError(f"setupFunc must return a StreamingContext, got {type(ssc).__name__}")
        if not local:
            checkpoint = read_checkpoint(checkpointPath, options_of_spark_context(ssc.sparkContext))
        ssc.checkpoint(checkpointPath)
        if checkpoint is not None:
            ssc._restore(checkpoint)
        return ssc

    @classmethod
    def getActive(cls) -> StreamingContext | None:
        return cls._active_context

    @classmethod
    def getActiveOrCreate(
        cls, checkpointPath: str | None, setupFunc: Callable[[], StreamingContext]
    ) -> StreamingContext:
        if not callable(setupFunc):
            raise TypeError("setupFunc should be callable.")
        active = cls.getActive()
        if active is not None:
            return active
        if checkpointPath is not None:
            return cls.getOrCreate(checkpointPath, setupFunc)
        return setupFunc()

    def _restore(self, checkpoint: Checkpoint) -> None:
        if self._state is not StreamingContextState.INITIALIZED:
            raise ValueError("a checkpoint can only be restored into a context that has not started")
        where = self.checkpoint_dir
        if checkpoint.batch_duration_ms != self.batch_duration_ms:
            raise CheckpointError(
                f"The checkpoint in {where} was written with a batch duration of "
                f"{checkpoint.batch_duration_ms} ms "
                f"but setupFunc built one of {self.batch_duration_ms} ms; batch times would not line up. "
                "Use the old batch duration, or delete the checkpoint directory to start afresh."
            )
        old = [(s.id, s.kind) for s in checkpoint.input_streams if s.is_receiver_input]
        new = [(stream.id, type(stream).__name__) for stream in self.graph.get_receiver_input_streams()]
        if old != new:
            raise CheckpointError(
                f"The checkpoint in {where} has receiver input streams {old} (id, kind) "
                f"but setupFunc built {new}. "
                "Recovered blocks are keyed by stream id: build the same receiver streams in the same order."
            )
        for stream in self.graph.get_receiver_input_streams():
            stream.previous_launches = 1
        self._restore_input_stream_data(checkpoint)
        self._stop_console_progress()  # before the state checkpoints are read: Spark jobs
        if checkpoint.remember_duration_ms != self.graph.remember_duration_ms:
            logger.warning(
                "The checkpointed run remembered RDDs for %s ms, this one for %s ms; using this one",
                checkpoint.remember_duration_ms,
                self.graph.remember_duration_ms,
            )
        self._restore_state(checkpoint)
        self.initial_checkpoint = checkpoint
        logger.info(
            "Recovered checkpoint of %d ms from %s: zero time %d ms, last generated batch %d ms, pending %s",
            checkpoint.checkpoint_time_ms,
            where,
            checkpoint.zero_time_ms,
            checkpoint.last_generated_batch_time_ms,
            list(checkpoint.pending_times_ms),
        )

    def _restore_state(self, checkpoint: Checkpoint) -> None:
        """Give each checkpointed stream its newest intact state checkpoint (refusing a checkpoint
        of other stateful streams; a damaged snapshot falls back to the one before it)."""
        where = self.checkpoint_dir
        streams = self.graph.checkpointed_streams()
        old = [(r.position, r.signature) for r in checkpoint.state_streams]
        new = [(position, stream.checkpoint_signature()) for position, stream in enumerate(streams)]
        if checkpoint.state_streams and old != new:
            raise CheckpointError(
                f"The checkpoint in {where} has the state of checkpointed streams {old} (position, "
                f"signature) but setupFunc built {new}. Build the same stateful streams with the same "
                "functions in the same order, or delete the checkpoint directory to start afresh."
            )
        if not checkpoint.state_streams:
            return
        assert where is not None
        handle = state_checkpoint.directory_handle(where)
        for record, stream in zip(checkpoint.state_streams, streams, strict=True):
            if not record.snapshots:
                # The old run died before its first state checkpoint: as Spark does, this run
                # recomputes the state from the zero time, from the batches the logs still hold.
                stream.recompute_state_from(checkpoint.zero_time_ms)
                continue
            problems: list[str] = []
            for snapshot in reversed(record.snapshots):
                found = state_checkpoint.verify_snapshot(self._sc, handle, snapshot)
                if not found:
                    stream.restore_state(snapshot, state_checkpoint.read_snapshot(self._sc, handle, snapshot))
                    logger.info("Restored the state of %s at %d ms", stream, snapshot.time_ms)
                    break
                logger.warning(
                    "State checkpoint %s of %s at %d ms is damaged, not loaded: %s",
                    snapshot.directory,
                    stream,
                    snapshot.time_ms,
                    "; ".join(found),
                )
                problems += found
            else:
                if problems:
                    raise CheckpointError(
                        f"No intact state checkpoint for {record.signature} in {where}: "
                        + "; ".join(problems)
                        + ". Delete the checkpoint directory to start afresh (the state is lost)."
                    )

    def _restore_input_stream_data(self, checkpoint: Checkpoint) -> None:
        """Hand each input stream what it checkpointed (a direct Kafka stream: its offset ranges),
        matched by (id, kind): the same setupFunc builds the same streams in the same order."""
        where = self.checkpoint_dir
        streams = {(stream.id, type(stream).__name__): stream for stream in self.graph.get_input_streams()}
        for record in checkpoint.input_streams:
            if record.data is None:
                continue
            stream = streams.get((record.id, record.kind))
            if stream is None:
                raise CheckpointError(
                    f"The checkpoint in {where} has data of input stream {record.id} ({record.kind}), "
                    f"but setupFunc built {sorted(streams)} (id, kind): build the same input streams in "
                    "the same order, or delete the checkpoint directory to start afresh."
                )
            stream.restore_checkpoint_data(record.data)


_exit_hook_lock = threading.Lock()
_exit_hook_registered = False


def _register_exit_hook() -> None:
    """Stop the active context when the interpreter starts to exit, before anything else goes.

    Not ``atexit``: its hooks run only after ``concurrent.futures`` refused new work (a WAL
    clean then fails every batch) and after hooks registered later than ours, such as the one
    every kazoo client registers on start, which joins a watch callback that retries against a
    ZooKeeper that may be gone: the exit hung there. ``threading``'s exit hooks run first, on
    the main thread, while the interpreter still works (``concurrent.futures`` uses the same).
    One hook for the process: only one context is active at a time.
    """
    global _exit_hook_registered
    with _exit_hook_lock:
        if _exit_hook_registered:
            return
        interpreter_exit.before_atexit(StreamingContext._stop_active_at_exit)
        _exit_hook_registered = True


def _warn_if_block_interval_exceeds_batch(ssc: StreamingContext) -> None:
    """As Spark warns: a block interval longer than the batch leaves batches without blocks."""
    block_ms = ssc.settings.receiver.block_interval_ms
    if ssc.graph.get_receiver_input_streams() and block_ms > ssc.batch_duration_ms:
        logger.warning(
            "Block interval %d ms (spark.streaming.blockInterval) is longer than the batch interval %d ms: "
            "most batches get no block and records wait up to a block interval; use a block interval "
            "of at most the batch interval",
            block_ms,
            ssc.batch_duration_ms,
        )

"""Spark's ``ReceiverSupervisorImpl``: runs one receiver, turns its data into stored blocks and
reports them to the tracker, and carries out the tracker's requests."""

from __future__ import annotations

import dataclasses
import enum
import logging
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from reliable_kafka.receiver.block_generator import BlockGenerator, BlockGeneratorListener
from reliable_kafka.receiver.block_replicator import BlockReplicator
from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.receiver.rate_limiter import RateLimiter
from reliable_kafka.receiver.received_block import (
    ArrayBufferBlock,
    ByteBufferBlock,
    IteratorBlock,
    ReceivedBlock,
)
from reliable_kafka.receiver.received_block_handler import BlockManagerBasedBlockHandler, ReceivedBlockHandler
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.receiver.tracker_endpoint import (
    BlockLocation,
    ReceivedBlockInfo,
    ReceiverControl,
    ReceiverTrackerEndpoint,
)
from reliable_kafka.receiver.wal_block_handler import (
    RECEIVER_WAL_WITHOUT_CHECKPOINT,
    WriteAheadLogBasedBlockHandler,
    create_receiver_write_ahead_log,
)
from reliable_kafka.rpc.errors import ConnectionClosed
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.storage.block_id import StreamBlockId, StreamBlockIdGenerator
from reliable_kafka.storage.block_store import BlockStore
from reliable_kafka.util.clock import Clock, SystemClock
from reliable_kafka.util.filesystems import FilesystemOptions
from wal.failure_log import FailureLog

logger = logging.getLogger(__name__)

# How long a stop waits for the receiver's threads after on_stop returned.
RECEIVING_THREADS_JOIN_TIMEOUT_S = 10.0


class ReceiverState(enum.Enum):
    INITIALIZED = "Initialized"
    STARTED = "Started"
    STOPPED = "Stopped"


class ReceiverTrackerError(RuntimeError):
    """The tracker refused a block report."""


def format_error(error: BaseException | None) -> str:
    """An exception as the text that crosses the tracker seam (empty for none)."""
    return "" if error is None else "".join(traceback.format_exception(error))


class ReceiverSupervisor:
    """Supervises one receiver; the receiver must have its stream id set.

    Start: start the block generators, register with the tracker, call ``receiver.on_start``.
    Stop: ``receiver.on_stop``, join the receiving threads, flush every block generator, then
    deregister and stop the block handler (after the generators, so their last blocks are
    stored, where Spark stopped the handler first).
    """

    def __init__(
        self,
        receiver: Receiver,
        tracker: ReceiverTrackerEndpoint,
        block_store: BlockStore,
        *,
        settings: StreamingSettings | None = None,
        checkpoint_dir: str | None = None,
        filesystem_options: FilesystemOptions | None = None,
        host: str | None = None,
        executor_id: str = "driver",
        received_block_handler: ReceivedBlockHandler | None = None,
        clock: Clock | None = None,
        block_locator: Callable[[StreamBlockId], BlockLocation | None] | None = None,
        block_replicator: BlockReplicator | None = None,
    ) -> None:
        """``received_block_handler`` replaces the handler the settings would choose;
        ``block_locator`` tells where a stored block can be read (executor placement);
        ``block_replicator`` keeps second copies on peers for levels with replication 2 (executor
        placement, WAL off: with the WAL on, replication is 1);
        ``filesystem_options`` how to reach a remote checkpoint directory (on executors, from the
        receiver task; None: as this process was configured)."""
        self.receiver = receiver
        self.stream_id = receiver.stream_id
        self._tracker = tracker
        self._settings = settings or StreamingSettings()
        self.host = host or socket.gethostname()
        self.executor_id = executor_id
        self._clock = clock or SystemClock()
        self._block_store = block_store
        self._block_locator = block_locator
        self._block_replicator = block_replicator
        self._handler = received_block_handler or self._create_block_handler(
            block_store, checkpoint_dir, filesystem_options
        )
        self._block_ids = StreamBlockIdGenerator(self.stream_id)
        self._block_generators: list[BlockGenerator] = []
        self._generators_lock = threading.Lock()
        self._latest_rate: int | None = None
        self.control: ReceiverControl = _SupervisorControl(self)

        self._receiver_state = ReceiverState.INITIALIZED
        # Guards the state only, never a call out: register_receiver is a round trip to the
        # driver and on_start may take a minute (a ZooKeeper connect and first rebalance), and a
        # stop must not wait behind them to be seen. Its condition tells when a start is over.
        self._lifecycle = threading.Condition(threading.RLock())
        self._starting_thread: threading.Thread | None = None  # registering or in on_start
        self._restart_threads_lock = threading.Lock()
        self._one_restart_at_a_time = threading.Lock()
        self._restart_threads: list[threading.Thread] = []
        self._started = False
        self._stop_requested = threading.Event()
        self._terminated = threading.Event()
        self._stopping_error: BaseException | None = None
        # Shared: each launch of a receiver gets a new supervisor, and a receiver restarting on
        # the same error over and over must log its traceback once.
        self._restart_failures = FailureLog(logger, f"Receiver {self.stream_id}", shared=True)

        receiver.attach_supervisor(self)
        self._default_block_generator = self.create_block_generator(_DefaultBlockGeneratorListener(self))

    def _create_block_handler(
        self,
        block_store: BlockStore,
        checkpoint_dir: str | None,
        filesystem_options: FilesystemOptions | None,
    ) -> ReceivedBlockHandler:
        wal = self._settings.wal
        if not wal.enable:
            return BlockManagerBasedBlockHandler(
                block_store, self.receiver.storage_level, self._block_replicator
            )
        if checkpoint_dir is None:
            raise ValueError(RECEIVER_WAL_WITHOUT_CHECKPOINT)
        log = create_receiver_write_ahead_log(
            checkpoint_dir,
            self.stream_id,
            rolling_interval_s=wal.rolling_interval_s,
            max_failures=wal.max_failures,
            close_file_after_write=wal.close_file_after_write,
            fsync=wal.fsync,
            filesystem_options=filesystem_options,
        )
        return WriteAheadLogBasedBlockHandler(
            block_store,
            self.stream_id,
            self.receiver.storage_level,
            log,
            block_store_timeout_s=self._settings.receiver.block_store_timeout_s,
            clock=self._clock,
        )

    @property
    def received_block_handler(self) -> ReceivedBlockHandler:
        return self._handler

    # -- block generators -------------------------------------------------------------------

    def create_block_generator(self, listener: BlockGeneratorListener) -> BlockGenerator:
        """A generator sharing this receiver's settings, block ids and rate updates.

        Generators created before :meth:`start` are started by it; later ones (a receiver's own,
        made in ``on_start``) are started by their creator. Every one is stopped by :meth:`stop`.
        """
        receiver_settings = self._settings.receiver
        with self._generators_lock:
            # Generators of earlier incarnations of the receiver are done with.
            self._block_generators = [g for g in self._block_generators if not g.is_stopped()]
            rate_limiter = RateLimiter(
                receiver_settings.max_rate, initial_rate=self._settings.backpressure.initial_rate
            )
            if self._latest_rate is not None:
                rate_limiter.update_rate(self._latest_rate)
            generator = BlockGenerator(
                listener,
                self.stream_id,
                block_interval_ms=receiver_settings.block_interval_ms,
                block_queue_size=receiver_settings.block_queue_size,
                max_buffered_bytes=receiver_settings.max_buffered_bytes,
                clock=self._clock,
                block_ids=self._block_ids,
                rate_limiter=rate_limiter,
            )
            self._block_generators.append(generator)
        return generator

    def _registered_block_generators(self) -> list[BlockGenerator]:
        with self._generators_lock:
            return list(self._block_generators)

    def update_rate_limit(self, rate: int) -> None:
        with self._generators_lock:
            if rate > 0:
                self._latest_rate = rate
            generators = list(self._block_generators)
        for generator in generators:
            generator.update_rate(rate)

    def get_current_rate_limit(self) -> int | None:
        return self._default_block_generator.get_current_limit()

    # -- storing -----------------------------------------------------------------------------

    def push_single(self, item: Any) -> None:
        self._default_block_generator.add_data(item)

    def push_records(
        self,
        records: list[Any],
        metadata: dict[str, Any] | None = None,
        block_id: StreamBlockId | None = None,
    ) -> None:
        self.push_and_report_block(ArrayBufferBlock(records), metadata, block_id)

    def push_iterator(
        self,
        iterator: Iterable[Any],
        metadata: dict[str, Any] | None = None,
        block_id: StreamBlockId | None = None,
    ) -> None:
        self.push_and_report_block(IteratorBlock(iterator), metadata, block_id)

    def push_bytes(
        self,
        data: bytes,
        metadata: dict[str, Any] | None = None,
        block_id: StreamBlockId | None = None,
        *,
        num_records: int | None = None,
    ) -> None:
        self.push_and_report_block(ByteBufferBlock(data, num_records), metadata, block_id)

    def push_and_report_block(
        self, block: ReceivedBlock, metadata: dict[str, Any] | None, block_id: StreamBlockId | None
    ) -> None:
        """Store the block through the handler, then report it; raises if either fails."""
        if self._terminated.is_set():
            raise RuntimeError(f"receiver supervisor {self.stream_id} is stopped; it stores no more blocks")
        if block_id is None:
            block_id = self._block_ids.next_id()
        started = time.monotonic()
        result = self._handler.store_block(block_id, block)
        if self._block_locator is not None:
            result = dataclasses.replace(result, location=self._block_locator(block_id))
        logger.debug("Pushed block %s in %.1f ms", block_id, (time.monotonic() - started) * 1000)
        info = ReceivedBlockInfo(self.stream_id, result.num_records, metadata, result)
        if not self._tracker.add_block(info):
            raise ReceiverTrackerError(f"Failed to add block {block_id} to receiver tracker")
        if self._restart_failures.failing:
            self._restart_failures.succeeded()
        logger.debug("Reported block %s", block_id)

    def remove_blocks(self, block_names: list[str]) -> None:
        """The driver is done with these blocks (their batches completed)."""
        for name in block_names:
            self._block_store.remove(StreamBlockId.parse(name))

    def report_error(self, message: str, error: BaseException | None) -> None:
        try:
            self._tracker.report_error(self.stream_id, message, format_error(error))
        except Exception:
            logger.exception(
                "Could not report error %r of receiver %d to the tracker", message, self.stream_id
            )
        logger.warning("Reported error %s - %s", message, error)

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        with self._lifecycle:
            if self._started or self._stop_requested.is_set():
                raise RuntimeError(f"receiver supervisor {self.stream_id} was already started or stopped")
            self._started = True
        for generator in self._registered_block_generators():
            generator.start()
        self._start_receiver()

    def stop(self, message: str, error: BaseException | None = None) -> None:
        """Stop the receiver and everything of this supervisor for good; a second call only logs.

        Called from a block generator's push thread (a listener giving up on a block), the stop
        runs on a thread of its own and this call returns at once: a restart running meanwhile
        waits in ``on_stop`` for that very push thread, and this stop waits for the restart.
        """
        with self._lifecycle:
            if self._stop_requested.is_set():
                logger.info("Receiver supervisor %d is already stopping: %s", self.stream_id, message)
                return
            self._stop_requested.set()
            self._stopping_error = error
        if any(generator.on_push_thread() for generator in self._registered_block_generators()):
            threading.Thread(
                target=self._stop,
                args=(message, error),
                name=f"Receiver-{self.stream_id}-stop",
                daemon=True,
            ).start()
            return
        self._stop(message, error)

    def _stop(self, message: str, error: BaseException | None) -> None:
        logger.info("Stopping receiver supervisor %d: %s", self.stream_id, message)
        receiver_was_running = self._stop_receiving(message, error)
        self._stop_block_generators()
        if receiver_was_running:
            self._deregister(message, error, fatal=isinstance(error, FatalReceiverError))
        self._handler.stop()
        with self._restart_threads_lock:
            restart_threads, self._restart_threads = self._restart_threads, []
        for thread in restart_threads:
            if thread is not threading.current_thread():
                thread.join()
        self._terminated.set()
        logger.info("Stopped receiver supervisor %d", self.stream_id)

    def _stop_block_generators(self) -> None:
        for generator in self._registered_block_generators():
            generator.stop()

    def await_termination(self, timeout_s: float | None = None) -> bool:
        """Wait for :meth:`stop` to finish; False on timeout. Re-raises the error it stopped with."""
        if not self._terminated.wait(timeout_s):
            return False
        if self._stopping_error is not None:
            raise self._stopping_error
        return True

    def is_terminated(self) -> bool:
        return self._terminated.is_set()

    def is_stop_requested(self) -> bool:
        """A stop was asked for (it may still be running); seen at once, even during a start."""
        return self._stop_requested.is_set()

    def is_receiver_started(self) -> bool:
        return self._receiver_state is ReceiverState.STARTED

    def is_receiver_stopped(self) -> bool:
        return self._receiver_state is ReceiverState.STOPPED

    def _start_receiver(self) -> None:
        # The stop of a failed start runs once the start is over: it joins the restart threads,
        # and one that a failing on_start began (a failed rebalance) waits for the start to end
        # before it stops the receiver.
        failure = self._register_and_start()
        if failure is not None:
            self.stop(*failure)

    def _register_and_start(self) -> tuple[str, BaseException | None] | None:
        """Register and call on_start, neither under the lifecycle lock; the reason to stop
        when that fails, else None. A stop requested while registering skips on_start."""
        with self._lifecycle:
            if self._stop_requested.is_set():
                return None
            self._starting_thread = threading.current_thread()
        try:
            return self._register_then_on_start()
        finally:
            with self._lifecycle:
                self._starting_thread = None
                self._lifecycle.notify_all()

    def _register_then_on_start(self) -> tuple[str, BaseException | None] | None:
        sid = self.stream_id
        try:
            registered = self._tracker.register_receiver(
                sid, type(self.receiver).__name__, self.host, self.executor_id, self.control
            )
        except Exception as exc:
            return f"Error starting receiver {sid}", exc
        if not registered:
            return f"Registered unsuccessfully because Driver refused to start receiver {sid}", None
        with self._lifecycle:
            stopped_meanwhile = self._stop_requested.is_set()
            if not stopped_meanwhile:
                self._receiver_state = ReceiverState.STARTED
        if stopped_meanwhile:
            # Registered, never started: the stop finds nothing to stop, so undo the register here.
            logger.info("Receiver %d was stopped while it registered; not starting it", sid)
            self._deregister("Stopped while starting", None)
            return None
        logger.info("Starting receiver %d", sid)
        try:
            self.receiver.on_start()
        except Exception as exc:
            return f"Error starting receiver {sid}", exc
        logger.info("Called receiver %d on_start", sid)
        return None

    def _no_start_elsewhere(self) -> bool:
        """No start in progress on another thread. Under the lifecycle lock. on_stop never runs
        beside on_start (receivers are not written for it); from the starting thread itself
        (on_start stopping its own receiver) there is nothing to wait for."""
        return self._starting_thread is None or self._starting_thread is threading.current_thread()

    def _stop_receiving(self, message: str, error: BaseException | None) -> bool:
        """on_stop and join the receiving threads; False if the receiver was not running."""
        with self._lifecycle:
            self._lifecycle.wait_for(self._no_start_elsewhere)
            state = self._receiver_state
            if state is ReceiverState.STARTED:
                self._receiver_state = ReceiverState.STOPPED
        if state is not ReceiverState.STARTED:
            logger.info("Receiver %d is %s; nothing to stop (%s)", self.stream_id, state.value, message)
            return False
        logger.info("Stopping receiver %d with message: %s: %s", self.stream_id, message, error or "")
        try:
            self.receiver.on_stop()
        except Exception:
            logger.exception("Error stopping receiver %d", self.stream_id)
        self.receiver.join_receiving_threads(RECEIVING_THREADS_JOIN_TIMEOUT_S)
        logger.info("Called receiver %d on_stop", self.stream_id)
        return True

    def _deregister(self, message: str, error: BaseException | None, *, fatal: bool = False) -> None:
        logger.info("Deregistering receiver %d", self.stream_id)
        try:
            self._tracker.deregister_receiver(self.stream_id, message, format_error(error), fatal=fatal)
        except ConnectionClosed as exc:
            # The driver is gone (the connection's loss was logged when it happened): there is
            # no one to deregister from, and no stack of ours to show for it.
            logger.warning("Could not deregister receiver %d: %s", self.stream_id, exc)
        except Exception:
            logger.exception("Could not deregister receiver %d", self.stream_id)
        logger.info("Stopped receiver %d", self.stream_id)

    def restart_receiver(
        self, message: str, error: BaseException | None = None, delay_ms: int | None = None
    ) -> None:
        """Stop the receiver, wait, start it again, on a thread of its own (so a receiving
        thread may ask for it); restarts run one at a time and are dropped once stop begins."""
        delay_ms = self._settings.receiver.restart_delay_ms if delay_ms is None else delay_ms
        with self._restart_threads_lock:
            if self._stop_requested.is_set():
                logger.info("Not restarting receiver %d, it is stopping: %s", self.stream_id, message)
                return
            self._restart_threads = [t for t in self._restart_threads if t.is_alive()]
            thread = threading.Thread(
                target=self._restart,
                args=(message, error, delay_ms),
                name=f"Receiver-{self.stream_id}-restart",
                daemon=True,
            )
            self._restart_threads.append(thread)
            thread.start()

    def _restart(self, message: str, error: BaseException | None, delay_ms: int) -> None:
        with self._one_restart_at_a_time:
            if self._stop_requested.is_set():
                return
            if error is None:
                sid = self.stream_id
                logger.warning("Restarting receiver %d with delay %d ms: %s", sid, delay_ms, message)
            else:
                self._restart_failures.failed(error, f"{message}; restarting with delay {delay_ms} ms")
            reason = f"Restarting receiver with delay {delay_ms}ms: {message}"
            if self._stop_receiving(reason, error):
                self._deregister(reason, error)
            # On the supervisor's clock, so tests can see the delay; wakes early when the
            # supervisor is stopped meanwhile, and then there is nothing to start.
            self._clock.wait_till_time(self._clock.get_time_ms() + delay_ms, self._stop_requested)
            if self._stop_requested.is_set():
                return
            logger.info("Starting receiver %d again", self.stream_id)
            self._start_receiver()
            logger.info("Receiver %d started again", self.stream_id)


class _DefaultBlockGeneratorListener(BlockGeneratorListener):
    """Pushes the blocks of records given to ``Receiver.store(item)``."""

    def __init__(self, supervisor: ReceiverSupervisor) -> None:
        self._supervisor = supervisor

    def on_add_data(self, data: Any, metadata: Any) -> None:
        pass

    def on_generate_block(self, block_id: StreamBlockId) -> None:
        pass

    def on_push_block(self, block_id: StreamBlockId, records: list[Any]) -> None:
        self._supervisor.push_records(records, None, block_id)

    def on_error(self, message: str, error: BaseException) -> None:
        self._supervisor.report_error(message, error)


class _SupervisorControl:
    """The :class:`ReceiverControl` a supervisor registers with the tracker."""

    def __init__(self, supervisor: ReceiverSupervisor) -> None:
        self._supervisor = supervisor

    def update_rate_limit(self, rate: int) -> None:
        self._supervisor.update_rate_limit(rate)

    def stop_receiver(self, message: str) -> None:
        logger.info("Received stop signal: %s", message)
        self._supervisor.stop(message)

    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        logger.debug("Cleaning up blocks older than %d", thresh_time_ms)
        self._supervisor.received_block_handler.cleanup_old_blocks(thresh_time_ms)

    def remove_blocks(self, block_ids: list[str]) -> None:
        self._supervisor.remove_blocks(block_ids)

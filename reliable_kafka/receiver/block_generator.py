"""Spark's ``BlockGenerator``: buffers received records and cuts them into blocks on a timer.

Threads: callers add records to the current buffer; a :class:`RecurringTimer` swaps the buffer
for an empty one every block interval, lets the listener prepare it (``prepare_block``, e.g.
serialize it) and queues it as a block (the queue is bounded, so a slow
push thread throttles the timer, which throttles nobody else: adds keep filling the buffer, and
the rate limiter is what bounds them); a push thread hands queued blocks to the listener.

Memory (not in Spark, where the current buffer has no size limit): with ``max_buffered_bytes``,
the bytes added and not yet pushed (the current buffer, the queued blocks, the block being
pushed) stay within that bound. While storing stalls (a slow block store or WAL, a ZooKeeper
outage holding commits, a block store timeout being waited out) the queue fills, the timer stops
cutting, and adds that would pass the bound wait until a push frees room: the source's threads
stop taking records, rather than the buffer growing with everything received meanwhile. Adds
that state no size (``num_bytes=0``) are bounded only by a max rate, as in Spark.
"""

from __future__ import annotations

import enum
import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from reliable_kafka.receiver.rate_limiter import RateLimiter
from reliable_kafka.storage.block_id import StreamBlockId, StreamBlockIdGenerator
from reliable_kafka.util.clock import Clock, SystemClock
from reliable_kafka.util.recurring_timer import RecurringTimer

logger = logging.getLogger(__name__)


class BlockGeneratorListener(ABC):
    """Callbacks of a :class:`BlockGenerator`.

    ``on_add_data`` and ``on_generate_block`` run under the generator's lock, atomically with the
    add and with the cut: whatever ``on_add_data`` recorded (e.g. an offset) belongs to exactly
    the block announced by the next ``on_generate_block``. They must be quick and must not call
    back into the generator. ``prepare_block`` runs on the thread that cut the block, unlocked;
    ``on_push_block`` and ``on_error`` run on the push thread, unlocked.
    """

    @abstractmethod
    def on_add_data(self, data: Any, metadata: Any) -> None:
        """After ``data`` (an item, or the list of items of one multiple-add) joined the buffer."""

    @abstractmethod
    def on_generate_block(self, block_id: StreamBlockId) -> None:
        """When the buffer is cut into block ``block_id``."""

    def prepare_block(self, block_id: StreamBlockId, records: list[Any]) -> Any:
        """What ``on_push_block`` will get for the block just cut; by default its records.

        Not in Spark, which serializes a block on the push thread as part of storing it: a
        listener that serializes here does it while the block before is being stored, and the
        push thread, which stores one block at a time, only stores. If this raises, the error
        is reported and the records are pushed as they are.
        """
        return records

    @abstractmethod
    def on_push_block(self, block_id: StreamBlockId, records: Any) -> None:
        """Store the block (what ``prepare_block`` made of its records); may block (that is the
        back-pressure on block generation)."""

    @abstractmethod
    def on_error(self, message: str, error: BaseException) -> None:
        """An error in the generator's threads, including one raised by ``on_push_block``."""


class BlockGeneratorState(enum.Enum):
    INITIALIZED = "Initialized"
    ACTIVE = "Active"
    STOPPED_ADDING_DATA = "StoppedAddingData"
    STOPPED_GENERATING_BLOCKS = "StoppedGeneratingBlocks"
    STOPPED_ALL = "StoppedAll"


class BlockGeneratorStateError(RuntimeError):
    """Data added to, or start called on, a generator not in the state that allows it."""


@dataclass(frozen=True, slots=True)
class Block:
    id: StreamBlockId
    records: Any  # what the listener's prepare_block made of the records
    num_bytes: int = 0  # what the adds of its records said they weigh


# Queued after the last block so the push thread can wait on the queue without polling.
_END_OF_BLOCKS = None


class BlockGenerator:
    def __init__(
        self,
        listener: BlockGeneratorListener,
        receiver_id: int,
        *,
        block_interval_ms: int = 200,
        block_queue_size: int = 10,
        max_rate: int | None = None,
        clock: Clock | None = None,
        block_ids: StreamBlockIdGenerator | None = None,
        rate_limiter: RateLimiter | None = None,
        max_buffered_bytes: int | None = None,
    ) -> None:
        """``block_ids`` lets generators of one receiver share a counter (unique ids per stream);
        ``rate_limiter`` replaces the one built from ``max_rate``; ``max_buffered_bytes`` bounds
        the bytes added and not yet pushed (see the module docstring)."""
        if block_interval_ms <= 0:
            raise ValueError(f"block interval must be > 0 ms, got {block_interval_ms}")
        if block_queue_size <= 0:
            raise ValueError(f"block queue size must be > 0, got {block_queue_size}")
        if max_buffered_bytes is not None and max_buffered_bytes <= 0:
            raise ValueError(f"max buffered bytes must be > 0, got {max_buffered_bytes}")
        if block_ids is not None and block_ids.stream_id != receiver_id:
            raise ValueError(f"block ids are for stream {block_ids.stream_id}, not {receiver_id}")
        self._listener = listener
        self.receiver_id = receiver_id
        self.block_interval_ms = block_interval_ms
        self._block_ids = block_ids or StreamBlockIdGenerator(receiver_id)
        self._rate_limiter = rate_limiter or RateLimiter(max_rate)
        self._lock = threading.Lock()
        self._state = BlockGeneratorState.INITIALIZED
        self._current_buffer: list[Any] = []
        self._max_buffered_bytes = max_buffered_bytes
        self._current_bytes = 0  # of the current buffer
        self._buffered_bytes = 0  # added and not yet pushed
        self._room = threading.Condition(self._lock)  # pushes made room, or adding stopped
        self._adds_waiting = 0
        self._blocks_for_pushing: queue.Queue[Block | None] = queue.Queue(maxsize=block_queue_size)
        self._block_interval_timer = RecurringTimer(
            clock or SystemClock(),
            block_interval_ms,
            self._update_current_buffer,
            name=f"BlockGenerator-{receiver_id}",
        )
        self._block_pushing_thread = threading.Thread(
            target=self._keep_pushing_blocks, name=f"BlockGenerator-{receiver_id}-push", daemon=True
        )
        self._stopper: threading.Thread | None = None
        self._stopped_all = threading.Event()

    @property
    def state(self) -> BlockGeneratorState:
        return self._state

    def start(self) -> None:
        with self._lock:
            if self._state is not BlockGeneratorState.INITIALIZED:
                raise BlockGeneratorStateError(
                    f"cannot start BlockGenerator {self.receiver_id}: it is {self._state.value}, "
                    "not Initialized"
                )
            self._state = BlockGeneratorState.ACTIVE
        self._block_interval_timer.start()
        self._block_pushing_thread.start()
        logger.info("Started BlockGenerator %d", self.receiver_id)

    def stop(self) -> None:
        """Refuse new data, cut a last block from what is buffered, push every block, then stop.

        Returns once everything is pushed; a call while another stop runs waits for that one,
        and a call after stop (or before start) returns at once. Called from the generator's
        own push thread (a listener giving up), it cannot wait for that thread, so the stop runs
        on a thread of its own and this call returns at once.
        """
        with self._lock:
            state = self._state
            if state is BlockGeneratorState.ACTIVE:
                self._state = BlockGeneratorState.STOPPED_ADDING_DATA
                self._room.notify_all()  # adds waiting for room give up
        if state is BlockGeneratorState.INITIALIZED:
            logger.warning("Cannot stop BlockGenerator %d as it was never started", self.receiver_id)
            return
        on_push_thread = threading.current_thread() is self._block_pushing_thread
        if state is not BlockGeneratorState.ACTIVE:
            logger.debug("BlockGenerator %d is already %s", self.receiver_id, state.value)
            if not on_push_thread:
                self._stopped_all.wait()
                if self._stopper is not None:
                    self._stopper.join()
            return
        if on_push_thread:
            self._stopper = threading.Thread(
                target=self._finish_stop, name=f"BlockGenerator-{self.receiver_id}-stop", daemon=True
            )
            self._stopper.start()
            return
        self._finish_stop()

    def _finish_stop(self) -> None:
        logger.info("Stopping BlockGenerator %d", self.receiver_id)
        # Interrupt rather than wait up to one interval for the next tick: cutting the final
        # block here, after the timer thread is gone, is the same cut made sooner.
        self._block_interval_timer.stop(interrupt_timer=True)
        self._update_current_buffer(self._block_interval_timer.get_start_time())
        with self._lock:
            self._state = BlockGeneratorState.STOPPED_GENERATING_BLOCKS
        self._blocks_for_pushing.put(_END_OF_BLOCKS)
        self._block_pushing_thread.join()
        self._state = BlockGeneratorState.STOPPED_ALL
        self._stopped_all.set()
        logger.info("Stopped BlockGenerator %d", self.receiver_id)

    # The adds are the hot path (one call per record): the state checks are inlined, and the
    # second one, under the lock, is what makes "no add after stop" exact.

    def add_data(self, data: Any) -> None:
        """Add one record; no callback."""
        if self._state is not BlockGeneratorState.ACTIVE:
            self._raise_not_active()
        self._rate_limiter.acquire(1)
        with self._lock:
            if self._state is not BlockGeneratorState.ACTIVE:
                self._raise_not_active()
            self._current_buffer.append(data)

    def add_data_with_callback(
        self, data: Any, metadata: Any, num_records: int = 1, num_bytes: int = 0
    ) -> None:
        """Add one item and call ``on_add_data(data, metadata)`` atomically with it.

        ``num_records`` is how many records the item stands for in the rate limit (a receiver
        that buffers packed chunks of records counts each chunk's records); ``num_bytes`` what it
        weighs against ``max_buffered_bytes``: the call waits for room first.
        """
        if self._state is not BlockGeneratorState.ACTIVE:
            self._raise_not_active()
        self._rate_limiter.acquire(num_records)
        with self._lock:
            if num_bytes and self._max_buffered_bytes is not None:
                self._wait_for_room(num_bytes, self._max_buffered_bytes)
            if self._state is not BlockGeneratorState.ACTIVE:
                self._raise_not_active()
            self._current_buffer.append(data)
            self._current_bytes += num_bytes
            self._buffered_bytes += num_bytes
            self._listener.on_add_data(data, metadata)

    def _wait_for_room(self, num_bytes: int, bound: int) -> None:
        # Under the lock. One item larger than the bound still goes in when nothing else is
        # buffered, or it would wait for ever.
        while (
            self._buffered_bytes
            and self._buffered_bytes + num_bytes > bound
            and self._state is BlockGeneratorState.ACTIVE
        ):
            self._adds_waiting += 1
            try:
                self._room.wait()
            finally:
                self._adds_waiting -= 1

    @property
    def buffered_bytes(self) -> int:
        """Bytes added (with their size stated) and not yet pushed."""
        return self._buffered_bytes

    @property
    def adds_waiting(self) -> int:
        """Adds waiting for room under ``max_buffered_bytes`` now."""
        return self._adds_waiting

    def add_multiple_data_with_callback(self, items: Iterable[Any], metadata: Any) -> None:
        """Add records as one unit: all land in the same block, then one ``on_add_data(items, metadata)``."""
        if self._state is not BlockGeneratorState.ACTIVE:
            self._raise_not_active()
        batch = list(items)
        self._rate_limiter.acquire(len(batch))
        with self._lock:
            if self._state is not BlockGeneratorState.ACTIVE:
                self._raise_not_active()
            self._current_buffer.extend(batch)
            self._listener.on_add_data(batch, metadata)

    def _raise_not_active(self) -> NoReturn:
        raise BlockGeneratorStateError(
            f"cannot add data as BlockGenerator {self.receiver_id} has not been started or has been "
            f"stopped [state = {self._state.value}]"
        )

    def is_active(self) -> bool:
        return self._state is BlockGeneratorState.ACTIVE

    def is_stopped(self) -> bool:
        return self._state is BlockGeneratorState.STOPPED_ALL

    def on_push_thread(self) -> bool:
        """True when called from this generator's push thread (i.e. from ``on_push_block``)."""
        return threading.current_thread() is self._block_pushing_thread

    def update_rate(self, new_rate: int) -> None:
        self._rate_limiter.update_rate(new_rate)

    def get_current_limit(self) -> int | None:
        return self._rate_limiter.get_current_limit()

    def _update_current_buffer(self, time_ms: int) -> None:
        """Cut the buffer into a block (timer thread, and once more on stop)."""
        try:
            records = None
            with self._lock:
                if self._current_buffer:
                    block_id = self._block_ids.next_id()
                    # Announce before swapping: if the listener fails, the records stay buffered
                    # for the next cut instead of being dropped with a block nobody recorded.
                    self._listener.on_generate_block(block_id)
                    records = self._current_buffer
                    num_bytes = self._current_bytes
                    self._current_buffer = []
                    self._current_bytes = 0
            if records is not None:
                self._blocks_for_pushing.put(Block(block_id, self._prepared(block_id, records), num_bytes))
                logger.debug("Queued block %s (%d items) at %d", block_id, len(records), time_ms)
        except Exception as exc:
            self._report_error("Error in block updating thread", exc)

    def _prepared(self, block_id: StreamBlockId, records: list[Any]) -> Any:
        try:
            return self._listener.prepare_block(block_id, records)
        except Exception as exc:
            # The block is announced and its records are out of the buffer: push it anyway.
            self._report_error(f"Error preparing block {block_id}; pushing its records as they are", exc)
            return records

    def _keep_pushing_blocks(self) -> None:
        logger.info("Started block pushing thread of BlockGenerator %d", self.receiver_id)
        while (block := self._blocks_for_pushing.get()) is not _END_OF_BLOCKS:
            self._push_block(block)
        logger.info("Stopped block pushing thread of BlockGenerator %d", self.receiver_id)

    def _push_block(self, block: Block) -> None:
        try:
            self._listener.on_push_block(block.id, block.records)
        except Exception as exc:
            # Keep pushing later blocks; what to do about this one is the listener's call.
            self._report_error(f"Error pushing block {block.id}", exc)
        else:
            logger.debug("Pushed block %s", block.id)
        finally:
            if block.num_bytes:
                with self._lock:
                    self._buffered_bytes -= block.num_bytes
                    self._room.notify_all()

    def _report_error(self, message: str, error: BaseException) -> None:
        logger.warning("%s: %s", message, error)
        try:
            self._listener.on_error(message, error)
        except Exception:
            logger.exception("BlockGeneratorListener.on_error failed for: %s", message)

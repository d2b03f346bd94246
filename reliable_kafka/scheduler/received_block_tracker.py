"""Spark's ``ReceivedBlockTracker``: which received blocks belong to which batch, made durable by
the driver's metadata write-ahead log.

Every change is first written to the log as an event, then applied in memory, so that a driver
that dies at any point recovers exactly the state whose events reached the log.

A block belongs to one place at a time: the unallocated queue or one batch. A remote store can
report a write as failed after its bytes landed (a timed-out upload, a refused permission change
after the upload), and the write is then retried, or the receiver reports the block again: the log
may hold an event twice, or an allocation that the live tracker never applied. So a block reported
again is not queued again (live and in recovery), and in recovery a later allocation of a block
takes it from the earlier batch: live, the block could only be allocated again if that earlier
allocation had not happened (or had been given back). Without this, a restart delivered such a
block twice, once under each batch time. The events and their byte format are in
``received_block_events``; the log itself is built by ``driver_write_ahead_log``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from reliable_kafka.checkpoint_lease import CheckpointLeaseLostError, WriteFence
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
from reliable_kafka.scheduler.driver_write_ahead_log import create_driver_write_ahead_log
from reliable_kafka.scheduler.received_block_events import (
    EVENT_MAGIC,
    AllocatedBlocks,
    BatchAllocationEvent,
    BatchCleanupEvent,
    BatchCompletionEvent,
    BatchDeallocationEvent,
    BlockAdditionEvent,
    EventFormatError,
    ReceivedBlockTrackerLogEvent,
    decode_event,
    encode_event,
)
from reliable_kafka.settings import WriteAheadLogSettings
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.util.clock import wall_clock_ms
from wal import BatchedWriteAheadLog, WriteAheadLog
from wal.aggregate import deaggregate
from wal.failure_log import FailureLog

logger = logging.getLogger(__name__)


class ReceivedBlockTracker:
    """Unallocated blocks per stream, blocks allocated per batch time, and completed batches.

    ``write_ahead_log`` None (no checkpoint directory) keeps everything in memory only.
    With ``recover_from_write_ahead_log`` the constructor replays the log first.

    :meth:`stop` closes the log. A graceful stop of the context still allocates and completes
    the last batches after that, so ``log_after_stop`` (when given) makes the log that records
    them; without it, events after stop fail like any other failed write.

    ``fence``: the driver's lease on the checkpoint directory, asked before every event is
    written (and its epoch written with the event): a driver that lost the lease logs nothing
    more, as if every write failed.
    """

    def __init__(
        self,
        stream_ids: Iterable[int],
        write_ahead_log: WriteAheadLog | None,
        *,
        recover_from_write_ahead_log: bool = False,
        now_ms: Callable[[], int] = wall_clock_ms,
        log_after_stop: Callable[[], WriteAheadLog] | None = None,
        fence: WriteFence | None = None,
    ) -> None:
        self._stream_ids = list(stream_ids)
        self._log = write_ahead_log
        self._fence = fence
        self._log_failures = FailureLog(logger, "writing to the received block metadata log")
        self._log_after_stop = log_after_stop
        self._stopped = False
        self._now_ms = now_ms
        self._lock = threading.RLock()
        self._unallocated: dict[int, deque[ReceivedBlockInfo]] = {}
        self._allocated: dict[int, AllocatedBlocks] = {}
        self._completed: set[int] = set()
        # Where each tracked block is: the time of its batch, None while queued.
        self._block_batch: dict[StreamBlockId, int | None] = {}
        self._last_allocated_batch_time: int | None = None
        if recover_from_write_ahead_log:
            self._recover_past_events()

    @classmethod
    def create(
        cls,
        stream_ids: Iterable[int],
        checkpoint_dir: str | None,
        settings: WriteAheadLogSettings,
        *,
        recover_from_write_ahead_log: bool = False,
        now_ms: Callable[[], int] = wall_clock_ms,
        fence: WriteFence | None = None,
    ) -> ReceivedBlockTracker:
        if checkpoint_dir is None:
            return cls(stream_ids, None, now_ms=now_ms)
        return cls(
            stream_ids,
            create_driver_write_ahead_log(checkpoint_dir, settings),
            recover_from_write_ahead_log=recover_from_write_ahead_log,
            now_ms=now_ms,
            log_after_stop=lambda: create_driver_write_ahead_log(checkpoint_dir, settings, after_stop=True),
            fence=fence,
        )

    @property
    def is_write_ahead_log_enabled(self) -> bool:
        return self._log is not None

    @property
    def last_allocated_batch_time(self) -> int | None:
        with self._lock:
            return self._last_allocated_batch_time

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        """Queue a block reported by a receiver; False if its event could not be logged.

        A block already tracked (a receiver's retry after a report whose answer it did not get)
        is not queued again: True, nothing logged."""
        if self._is_tracked(info):
            return True
        # Not under the lock: concurrent receivers' writes must reach the batched log together.
        if not self._write_to_log(BlockAdditionEvent(info)):
            return False
        with self._lock:
            if info.block_id not in self._block_batch:  # else a concurrent report of it won
                self._block_batch[info.block_id] = None
                self._queue(info.stream_id).append(info)
        logger.debug("Stream %d received block %s", info.stream_id, info.block_id)
        return True

    def _is_tracked(self, info: ReceivedBlockInfo) -> bool:
        with self._lock:
            if info.block_id not in self._block_batch:
                return False
            where = self._block_batch[info.block_id]
        logger.info(
            "Block %s of stream %d reported again (%s); kept once",
            info.block_id,
            info.stream_id,
            "still unallocated" if where is None else f"in batch {where}",
        )
        return True

    def allocate_blocks_to_batch(self, batch_time_ms: int) -> None:
        """Give every queued block of every stream to this batch; no-op for a time already passed."""
        with self._lock:
            last = self._last_allocated_batch_time
            if last is not None and batch_time_ms <= last:
                # After a driver restart the job generator replays batch times the log already
                # allocated; those keep their recovered blocks.
                logger.info(
                    "Possibly processed batch %d needs to be processed again in WAL recovery", batch_time_ms
                )
                return
            allocated = AllocatedBlocks({sid: list(self._queue(sid)) for sid in self._stream_ids})
            if not self._write_to_log(BatchAllocationEvent(batch_time_ms, allocated)):
                # Blocks stay queued; the next batch takes them.
                logger.info(
                    "Possibly processed batch %d needs to be processed again in WAL recovery", batch_time_ms
                )
                return
            for sid in self._stream_ids:
                self._queue(sid).clear()
            self._allocated[batch_time_ms] = allocated
            self._place(allocated, batch_time_ms)
            self._last_allocated_batch_time = batch_time_ms

    def get_blocks_of_batch(self, batch_time_ms: int) -> dict[int, list[ReceivedBlockInfo]]:
        with self._lock:
            allocated = self._allocated.get(batch_time_ms)
            if allocated is None:
                return {}
            return {sid: list(infos) for sid, infos in allocated.stream_id_to_allocated_blocks.items()}

    def get_blocks_of_batch_and_stream(self, batch_time_ms: int, stream_id: int) -> list[ReceivedBlockInfo]:
        with self._lock:
            allocated = self._allocated.get(batch_time_ms)
            return [] if allocated is None else allocated.get_blocks_of_stream(stream_id)

    def has_unallocated_received_blocks(self) -> bool:
        with self._lock:
            return any(self._unallocated.values())

    def get_unallocated_blocks(self, stream_id: int) -> list[ReceivedBlockInfo]:
        with self._lock:
            return list(self._queue(stream_id))

    def unprocessed_blocks(self) -> list[ReceivedBlockInfo]:
        """The blocks no completed batch has read yet: queued, or of a batch not completed."""
        with self._lock:
            queued = [info for queue in self._unallocated.values() for info in queue]
            return queued + [
                info
                for time_ms, allocated in self._allocated.items()
                if time_ms not in self._completed
                for infos in allocated.stream_id_to_allocated_blocks.values()
                for info in infos
            ]

    def allocated_batch_times(self) -> list[int]:
        with self._lock:
            return sorted(self._allocated)

    def pending_batch_times(self) -> list[int]:
        """Allocated batches not marked completed: after a restart, the ones to run again."""
        with self._lock:
            return sorted(t for t in self._allocated if t not in self._completed)

    def mark_batch_completed(self, batch_time_ms: int) -> bool:
        with self._lock:
            if batch_time_ms in self._completed:
                return True
            if not self._write_to_log(BatchCompletionEvent(batch_time_ms)):
                # The failed write is logged (once per retry) by the log itself: the consequence
                # is worth knowing, not another warning per batch of an outage.
                logger.info(
                    "Failed to record completion of batch %d in the write-ahead log: a restart would "
                    "run it again",
                    batch_time_ms,
                )
                return False
            self._completed.add(batch_time_ms)
            return True

    def deallocate_batches(self, batch_times_ms: Iterable[int]) -> list[int]:
        """Give the blocks of these pending (allocated, not completed) batches back to the front of
        the unallocated queues, so that the next batch to be allocated runs them; returns the batch
        times given back. For batches that will never run under their own time: recovered by a
        fresh start without a checkpoint, or whose jobs could not be generated.

        Logged as one event, so a driver dying at any point recovers the blocks either in their
        old batch or back in the queue, never in both and never in neither. Completed and unknown
        times are ignored. If the event cannot be logged nothing changes and [] is returned (the
        batches stay pending, and the cleanup clamp keeps their blocks).
        """
        with self._lock:
            times = tuple(
                sorted(t for t in set(batch_times_ms) if t in self._allocated and t not in self._completed)
            )
            if not times:
                return []
            if not self._write_to_log(BatchDeallocationEvent(times)):
                logger.warning(
                    "Failed to record the return of batches %s to the queue in the write-ahead log", times
                )
                return []
            self._deallocate(times)
        logger.info("Returned the blocks of batches %s to the unallocated queue", " ".join(map(str, times)))
        return list(times)

    def cleanup_old_batches(self, clean_threshold_ms: int, wait_for_completion: bool) -> list[int]:
        """Forget batches before the threshold and clean the log; returns the batch times dropped."""
        with self._lock:
            now = self._now_ms()
            if clean_threshold_ms >= now:
                raise ValueError(
                    f"cleanup threshold {clean_threshold_ms} is not before the current time {now}"
                )
            times = sorted(t for t in self._allocated if t < clean_threshold_ms)
            logger.info("Deleting batches: %s", " ".join(map(str, times)))
            if not self._write_to_log(BatchCleanupEvent(tuple(times))):
                logger.warning("Failed to acknowledge batch clean up in the Write Ahead Log.")
                return []
            for t in times:
                self._forget_batch(t)
        if self._log is not None and not self._stopped:
            # After stop the next run cleans: cleaning would start a thread nobody joins.
            self._log.clean(clean_threshold_ms, wait_for_completion)
        return times

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            log = self._log
            if log is not None and self._log_after_stop is not None:
                self._log = self._log_after_stop()
        if log is not None:
            log.close()

    # ------------------------------------------------------------ internals

    def _queue(self, stream_id: int) -> deque[ReceivedBlockInfo]:
        queue = self._unallocated.get(stream_id)
        if queue is None:
            queue = self._unallocated[stream_id] = deque()
        return queue

    def _write_to_log(self, event: ReceivedBlockTrackerLogEvent) -> bool:
        if self._log is None:
            return True
        try:
            epoch = self._fence.check() if self._fence is not None else None
            self._log.write(encode_event(event, epoch), self._now_ms())
        except CheckpointLeaseLostError as exc:
            # The lease said no, not the store: its message is the whole story. The exception, not
            # its text: a refusal the lease reports itself is then logged here once per streak.
            self._log_failures.failed(exc, type(event).__name__, traceback=False)
            return False
        except Exception as exc:
            self._log_failures.failed(exc, type(event).__name__)
            return False
        self._log_failures.succeeded()
        return True

    def _recover_past_events(self) -> None:
        if self._log is None:
            return
        logger.info("Recovering received block metadata from the write-ahead log")
        counts: dict[str, int] = {}
        with self._lock:
            for event in self._read_events():
                counts[type(event).__name__] = counts.get(type(event).__name__, 0) + 1
                self._apply_recovered(event)
        logger.info(
            "Recovered %s; %d unallocated block(s), %d batch(es) allocated, %d pending",
            counts or "no events",
            sum(len(q) for q in self._unallocated.values()),
            len(self._allocated),
            len(self.pending_batch_times()),
        )

    def _apply_recovered(self, event: ReceivedBlockTrackerLogEvent) -> None:
        match event:
            case BlockAdditionEvent(info):
                # The same block twice: a retried write, or the receiver's report again.
                if info.block_id not in self._block_batch:
                    self._block_batch[info.block_id] = None
                    self._queue(info.stream_id).append(info)
            case BatchAllocationEvent(time_ms, allocated):
                allocated = _once_each(allocated)
                taken = {
                    info.block_id
                    for infos in allocated.stream_id_to_allocated_blocks.values()
                    for info in infos
                }
                self._take_from_earlier_batches(taken, time_ms)
                for sid in allocated.stream_id_to_allocated_blocks:
                    queue = self._queue(sid)
                    kept = [info for info in queue if info.block_id not in taken]
                    queue.clear()
                    queue.extend(kept)
                self._allocated[time_ms] = allocated
                self._place(allocated, time_ms)
                self._last_allocated_batch_time = time_ms
            case BatchCompletionEvent(time_ms):
                self._completed.add(time_ms)
            case BatchCleanupEvent(times_ms):
                for t in times_ms:
                    self._forget_batch(t)
            case BatchDeallocationEvent(times_ms):
                self._deallocate(times_ms)

    def _take_from_earlier_batches(self, taken: set[StreamBlockId], time_ms: int) -> None:
        """Recovery: blocks allocated again at ``time_ms`` leave the batch the log gave them before.

        The live tracker allocates a block only from its queue, so the earlier allocation is one
        whose write failed (after landing) or that was given back: that batch ran without them.
        """
        earlier: dict[int, set[StreamBlockId]] = {}
        for block_id in taken:
            where = self._block_batch.get(block_id)
            if where is not None and where != time_ms and where in self._allocated:
                earlier.setdefault(where, set()).add(block_id)
        for t, block_ids in sorted(earlier.items()):
            logger.warning(
                "Metadata log: %d block(s) of batch %d allocated again to batch %d (an allocation "
                "logged although its write failed); they belong to batch %d only",
                len(block_ids),
                t,
                time_ms,
                time_ms,
            )
            self._allocated[t] = AllocatedBlocks(
                {
                    sid: [info for info in infos if info.block_id not in block_ids]
                    for sid, infos in self._allocated[t].stream_id_to_allocated_blocks.items()
                }
            )

    def _place(self, allocated: AllocatedBlocks, time_ms: int) -> None:
        for infos in allocated.stream_id_to_allocated_blocks.values():
            for info in infos:
                self._block_batch[info.block_id] = time_ms

    def _forget_batch(self, time_ms: int) -> None:
        allocated = self._allocated.pop(time_ms, None)
        self._completed.discard(time_ms)
        if allocated is None:
            return
        for infos in allocated.stream_id_to_allocated_blocks.values():
            for info in infos:
                if self._block_batch.get(info.block_id) == time_ms:
                    del self._block_batch[info.block_id]

    def _deallocate(self, times_ms: Iterable[int]) -> None:
        # Oldest batch first, all before the blocks already queued: records keep their order.
        returned: dict[int, list[ReceivedBlockInfo]] = {}
        for t in sorted(times_ms):
            allocated = self._allocated.pop(t, None)
            self._completed.discard(t)
            if allocated is None:
                continue
            for sid, infos in allocated.stream_id_to_allocated_blocks.items():
                returned.setdefault(sid, []).extend(infos)
        for sid, infos in returned.items():
            if infos and sid not in self._stream_ids:
                logger.warning(
                    "Stream %d of %d returned block(s) is not tracked by this run; they will not be "
                    "allocated (build the same receiver streams in the same order)",
                    sid,
                    len(infos),
                )
            for info in infos:
                self._block_batch[info.block_id] = None
            queue = self._queue(sid)
            queue.extendleft(reversed(infos))

    def _read_events(self) -> Iterator[ReceivedBlockTrackerLogEvent]:
        # Read the files underneath any group-commit wrapper and accept both record shapes, so a
        # restart with driver_allow_batching flipped still recovers what the last run wrote.
        assert self._log is not None
        log = self._log.wrapped if isinstance(self._log, BatchedWriteAheadLog) else self._log
        for record in log.read_all():
            for data in _event_records(record):
                try:
                    yield decode_event(data)
                except EventFormatError:
                    logger.error(
                        "Skipping an unreadable record in the metadata write-ahead log", exc_info=True
                    )


def _once_each(allocated: AllocatedBlocks) -> AllocatedBlocks:
    """The allocation with each block once, first occurrence kept: a tracker before this check
    queued a block reported twice twice, and logged it so."""
    seen: set[StreamBlockId] = set()
    streams: dict[int, list[ReceivedBlockInfo]] = {}
    for sid, infos in allocated.stream_id_to_allocated_blocks.items():
        kept = streams[sid] = []
        for info in infos:
            if info.block_id not in seen:
                seen.add(info.block_id)
                kept.append(info)
    return AllocatedBlocks(streams)


def _event_records(record: bytes) -> list[bytes]:
    if record[: len(EVENT_MAGIC)] == EVENT_MAGIC:
        return [record]
    try:
        return deaggregate(record)
    except ValueError:
        logger.error(
            "Skipping a metadata write-ahead log record that is neither an event nor a batch of them"
        )
        return []


def num_records_per_stream(blocks: Mapping[int, Sequence[ReceivedBlockInfo]]) -> dict[int, int]:
    """Records per stream (blocks without a count count as 0, as in Spark's ``StreamInputInfo``)."""
    return {sid: sum(info.num_records or 0 for info in infos) for sid, infos in blocks.items()}

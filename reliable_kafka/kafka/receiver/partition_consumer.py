"""One partition, one thread, reading through the receiver's shared client from a given offset.

The receiver's offset store keeps offsets, so the client never joins a Kafka group through this
thread and never commits; it starts at the committed offset, or where ``auto.offset.reset`` says
when there is none, and librdkafka applies the same reset if that offset is out of range. Broker
outages are librdkafka's to ride out: it reconnects and resumes fetching at the position it had,
so transport errors are logged and the thread keeps going. The client is shared by every
partition of the receiver (:mod:`reliable_kafka.kafka.client.shared_client`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from reliable_kafka.kafka.client.error_log import ClientErrorLog
from reliable_kafka.kafka.client.fetch_stall import (
    NO_RECORDS_CAUSE,
    FetchStallMonitor,
    FetchWatch,
    likely_cause,
)
from reliable_kafka.kafka.client.params import OffsetReset
from reliable_kafka.kafka.client.shared_client import PackedReader, PartitionReader, SharedFetchClient
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.storage.block_format import PackedChunk
from reliable_kafka.util.kafka_errors import kafka_error_of

# Types only: the refusal judge imports the receiver package, too heavy for the ZooKeeper wing.
if TYPE_CHECKING:
    from reliable_kafka.kafka.client.access_refusal import AccessRefusals

logger = logging.getLogger(__name__)
# A Kafka record as blocks decode to it.
Record = tuple[bytes | None, bytes | None, str, int, int]  # key, value, topic, partition, offset

# (partition, its next records packed, first offset, last offset) -> None; may block (rate limiting).
RecordSink = Callable[[TopicAndPartition, PackedChunk, int, int], None]
FailureHandler = Callable[[str, BaseException], None]
# (partition, committed offset the broker rejected, offset auto.offset.reset chose) -> None.
OutOfRangeHandler = Callable[[TopicAndPartition, int, int], None]

# Small batches: a batch of 10,000 messages keeps that many GC-tracked Message objects alive at
# once (Python path), and the collections they trigger cost more than the message handling
# (receiver_bench: ~2.5 vs ~1.4 CPU seconds per million records at 10,000 vs 200); a small
# batch is also still in the CPU cache when it is packed.
DEFAULT_BATCH_SIZE = 200
DEFAULT_POLL_TIMEOUT_S = 0.2
_METADATA_TIMEOUT_S = 5.0


class PartitionConsumer:
    """Reads ``tp`` from ``start_offset`` (None: ``offset_reset``) and hands batches to ``sink``.

    The records come through ``client``: read and packed by the C extension with the GIL released
    (packed fetch), or handed over by the client's dispatcher and packed here (Python path). Both
    hand ``sink`` the same bytes.

    ``on_failure`` hears about errors the thread cannot recover from (fatal client errors, a
    failing sink); the thread has ended by then.
    """

    def __init__(
        self,
        tp: TopicAndPartition,
        thread_id: str,
        client: SharedFetchClient,
        *,
        start_offset: int | None,
        offset_reset: OffsetReset,
        sink: RecordSink,
        on_failure: FailureHandler,
        batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
        on_out_of_range: OutOfRangeHandler | None = None,
        stall_monitor: FetchStallMonitor | None = None,
        refusals: AccessRefusals | None = None,
    ) -> None:
        self.tp = tp
        self._offset_reset = offset_reset
        self._on_out_of_range = on_out_of_range
        self.thread_id = thread_id
        self._sink = sink
        self._on_failure = on_failure
        self._batch_size = batch_size
        self._poll_timeout_s = poll_timeout_s
        self._stopping = threading.Event()
        self._running = threading.Event()  # cleared while paused
        self._running.set()
        self.start_offset = start_offset
        if start_offset is None:
            start_offset = OFFSET_BEGINNING if offset_reset == "smallest" else OFFSET_END
        self._start_at = start_offset
        self._client = client
        self._reader: PartitionReader | None = None
        self._assigned_here = False
        self._error_log = ClientErrorLog(f"{thread_id} {tp}", refusals)
        self._thread = threading.Thread(
            target=self._run, name=f"kafka-{tp.topic}-{tp.partition}", daemon=True
        )
        self.next_offset: int | None = self.start_offset  # after the last record handed to the sink
        self._watch: FetchWatch | None = None
        if stall_monitor is not None:
            self._probe_timeout_s = max(0.1, min(_METADATA_TIMEOUT_S, stall_monitor.probe_interval_s))
            bootstrap = str(client.consumer_config.get("bootstrap.servers", ""))
            self._watch = stall_monitor.watch(tp, bootstrap, self._probe)

    @property
    def packed_fetch(self) -> bool:
        """Whether the C extension reads this partition (known once the thread has started)."""
        return isinstance(self._reader, PackedReader)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end (after the batch in hand); see :meth:`join`."""
        self._stopping.set()
        if self._thread.ident is None:
            self._close()  # never started: the thread that would close its reader never will

    def join(self, timeout_s: float | None = None) -> bool:
        if self._thread is threading.current_thread() or not self._thread.is_alive():
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def pause(self) -> None:
        """Hand nothing more to the sink (a sink call under way finishes) until :meth:`resume`.

        A batch already fetched is held, and the client keeps its position and prefetched
        messages: resuming goes on from the next offset, so a pause neither skips nor re-reads.
        """
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def _run(self) -> None:
        try:
            self._consume_until_stopped()
        except BaseException as exc:
            if self._stopping.is_set():
                logger.info("%s consumer ended while stopping: %r", self.tp, exc)
            else:
                logger.error("%s consumer failed: %r", self.tp, exc)
                self._on_failure(f"consumer of {self.tp} failed", exc)
        finally:
            self._close()

    def _close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._assigned_here:
            self._client.unassign([self.tp])

    def prepare(self) -> int:
        """Before the partition is assigned: repair an out-of-range start, take the partition's
        reader; returns the offset to assign it at. A connector prepares all the partitions of a
        rebalance, assigns them in one call and starts their threads; a consumer started
        unprepared prepares and assigns itself (and unassigns itself when it ends)."""
        self._reset_if_out_of_range()
        self._reader = self._client.attach(self.tp)
        return self._start_at

    def _reset_if_out_of_range(self) -> None:
        """Start at the reset offset, and have it committed, when the broker's log no longer (or
        never) holds the committed offset: librdkafka would reset by itself, but the committed
        offset would stay, and one past the log end would refuse every later commit."""
        committed = self.start_offset
        if committed is None:
            return
        try:
            low, high = self._client.consumer.get_watermark_offsets(
                TopicPartition(self.tp.topic, self.tp.partition), timeout=_METADATA_TIMEOUT_S, cached=False
            )
        except KafkaException as exc:
            logger.info("%s: log range unknown (%r); librdkafka resets out-of-range offsets", self.tp, exc)
            return
        if low <= committed <= high:
            return
        reset_to = low if self._offset_reset == "smallest" else high
        logger.warning(
            "%s: committed offset %d is outside the log [%d, %d]; auto.offset.reset=%s starts at %d",
            self.tp,
            committed,
            low,
            high,
            self._offset_reset,
            reset_to,
        )
        self._start_at = reset_to
        self.next_offset = reset_to
        if self._on_out_of_range is not None:
            self._on_out_of_range(self.tp, committed, reset_to)

    def _consume_until_stopped(self) -> None:
        if self._stopping.is_set():
            return
        if self._reader is None:
            self._client.ensure_metadata([self.tp.topic])
            self._client.assign({self.tp: self.prepare()})
            self._assigned_here = True
        reader = self._reader
        assert reader is not None
        tp = self.tp
        batch_size, timeout = self._batch_size, self._poll_timeout_s
        stopping = self._stopping.is_set
        running = self._running
        sink = self._sink
        watch = self._watch
        while not stopping():
            batch = reader.fetch(batch_size, timeout)
            for error in batch.errors:
                self._on_error(error)
            if batch.chunk is None:
                if watch is not None and reader.held:
                    watch.held()  # quiet by choice: waiting for its turn to fetch
                elif watch is not None:
                    watch.quiet()
                continue
            if not running.is_set():
                # Paused while the fetch waited, or before it: hold the batch (the client's
                # position is already past it) until resumed; a stop drops it unstored.
                while not running.wait(timeout):
                    if stopping():
                        return
            if watch is not None:
                watch.fetched()
            sink(tp, batch.chunk, batch.first_offset, batch.last_offset)
            self.next_offset = batch.last_offset + 1

    def _probe(self) -> str | None:
        """None when the leader of this partition answers and holds nothing past our position."""
        try:
            low, high = self._client.consumer.get_watermark_offsets(
                TopicPartition(self.tp.topic, self.tp.partition), timeout=self._probe_timeout_s, cached=False
            )
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if error is None:
                return str(exc)
            return likely_cause(error.name(), error.str())
        position = self.next_offset
        if position is None and self._offset_reset == "smallest":
            position = low
        if position is not None and high > position:
            return NO_RECORDS_CAUSE.format(position=position, high=high)
        return None

    def _on_error(self, error: KafkaError) -> None:
        """An error among the records: fatal ones end the thread, the rest are logged."""
        if error.fatal():
            raise KafkaException(error)
        if error.code() != KafkaError._PARTITION_EOF:
            self._error_log.log(error)

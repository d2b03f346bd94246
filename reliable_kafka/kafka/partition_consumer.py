"""One partition, one confluent-kafka consumer, one thread: reads by assign() from a given offset.

Offsets live in ZooKeeper, so the consumer never joins a Kafka group and never commits; it
starts at the committed offset, or where ``auto.offset.reset`` says when there is none, and
librdkafka applies the same reset if that offset is out of range. Broker outages are
librdkafka's to ride out: it reconnects and resumes fetching at the position it had, so
transport errors are logged and the thread keeps going.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from reliable_kafka.kafka.fetch_stall import NO_RECORDS_CAUSE, FetchStallMonitor, FetchWatch, likely_cause
from reliable_kafka.kafka.packed_fetch import PackedFetch
from reliable_kafka.kafka.params import OffsetReset, is_secret_key
from reliable_kafka.kafka.topic_partition import TopicAndPartition
from reliable_kafka.storage.block_format import PackedChunk, pack_chunk
from reliable_kafka.util.librdkafka_log import LibrdkafkaLog

logger = logging.getLogger(__name__)
# The configuration check's client has no brokers, and says so; nobody needs to read that.
_quiet_logger = logging.getLogger("reliable_kafka.librdkafka.config_check")
_quiet_logger.propagate = False
_quiet_logger.addHandler(logging.NullHandler())

# A Kafka record as blocks decode to it.
Record = tuple[bytes | None, bytes | None, str, int, int]  # key, value, topic, partition, offset

# (partition, its next records packed, first offset, last offset) -> None; may block (rate limiting).
RecordSink = Callable[[TopicAndPartition, PackedChunk, int, int], None]
FailureHandler = Callable[[str, BaseException], None]
# (partition, committed offset the broker rejected, offset auto.offset.reset chose) -> None.
OutOfRangeHandler = Callable[[TopicAndPartition, int, int], None]

# Small batches: a consume() of 10,000 messages keeps that many GC-tracked Message objects
# alive at once, and the collections they trigger cost more than the message handling
# (receiver_bench: ~2.5 vs ~1.4 CPU seconds per million records at 10,000 vs 200); a small
# batch is also still in the CPU cache when it is packed.
DEFAULT_BATCH_SIZE = 200
_message_error = Message.error
_message_key = Message.key
_message_value = Message.value
_message_offset = Message.offset
DEFAULT_POLL_TIMEOUT_S = 0.2
# How often a packed fetch serves the consumer's logs and error callbacks.
_EVENT_SERVE_INTERVAL_S = 0.1
_METADATA_TIMEOUT_S = 5.0
_ERROR_LOG_INTERVAL_S = 30.0

# Errors a broker restart or a leader move produces; librdkafka recovers from them itself.
_TRANSIENT_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._TIMED_OUT,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.NETWORK_EXCEPTION,
    }
)


class ClientErrorLog:
    """librdkafka's error callback, logged at most every 30 s per error code so that a broker
    outage does not flood the log."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._last: dict[int, float] = {}

    def __call__(self, error: KafkaError) -> None:
        self.log(error)

    def log(self, error: KafkaError) -> None:
        now = time.monotonic()
        if now - self._last.get(error.code(), -_ERROR_LOG_INTERVAL_S) < _ERROR_LOG_INTERVAL_S:
            return
        self._last[error.code()] = now
        level = logging.INFO if error.code() in _TRANSIENT_ERRORS else logging.WARNING
        logger.log(level, "%s: %s (librdkafka recovers by itself where it can)", self._name, error)


def create_consumer(config: dict[str, Any], name: str) -> Consumer:
    """A Consumer, or ``ValueError`` with librdkafka's message (it names the bad key)."""
    try:
        return Consumer({**config, "error_cb": ClientErrorLog(name), "logger": LibrdkafkaLog()})
    except (KafkaException, TypeError, ValueError) as exc:
        raise ValueError(f"kafka params rejected by confluent-kafka: {exc}") from exc


# librdkafka's callbacks and logger: the only config values that are not plain data.
_CALLBACK_KEYS = frozenset({"error_cb", "throttle_cb", "stats_cb", "oauth_cb", "on_commit", "logger"})
_QUOTED_PROPERTY = re.compile(r'property:? "([^"]+)"')


def check_client_config(config: Mapping[str, Any]) -> None:
    """``ValueError`` naming the key when librdkafka would refuse ``config`` (an unknown key, a
    bad value, a value of the wrong type). Builds a client without brokers: nothing connects."""
    for key, value in config.items():
        if key in _CALLBACK_KEYS:
            continue
        if not isinstance(value, str | int | float | bool):
            raise ValueError(
                f"kafka param {key}: expected a string, number or boolean, got {type(value).__name__}"
            )
    probe = {k: v for k, v in config.items() if k not in ("bootstrap.servers", "metadata.broker.list")}
    probe.setdefault("group.id", "reliable-kafka-config-check")
    probe["logger"] = _quiet_logger
    try:
        Consumer(probe).close()
    except (KafkaException, TypeError, ValueError) as exc:
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        text = error.str() if error is not None else str(exc)
        match = _QUOTED_PROPERTY.search(text)
        key = match.group(1) if match else None
        if key is not None and is_secret_key(key):
            # librdkafka quotes the value, and this one is a secret.
            raise ValueError(f"kafka param {key}: invalid value (rejected by librdkafka)") from None
        named = f"kafka param {key}: " if key is not None else "kafka params: "
        raise ValueError(f"{named}{text}") from None


class PartitionConsumer:
    """Reads ``tp`` from ``start_offset`` (None: ``offset_reset``) and hands batches to ``sink``.

    With ``packed_fetch`` (and the C extension available) the records are read and packed by
    :class:`~reliable_kafka.kafka.packed_fetch.PackedFetch`, with the GIL released; otherwise
    from confluent-kafka's ``Message`` objects, in Python. Both hand ``sink`` the same bytes.

    ``on_failure`` hears about errors the thread cannot recover from (fatal client errors, a
    failing sink); the thread has ended by then.
    """

    def __init__(
        self,
        tp: TopicAndPartition,
        thread_id: str,
        config: dict[str, Any],
        *,
        start_offset: int | None,
        offset_reset: OffsetReset,
        sink: RecordSink,
        on_failure: FailureHandler,
        batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
        on_out_of_range: OutOfRangeHandler | None = None,
        stall_monitor: FetchStallMonitor | None = None,
        packed_fetch: bool = True,
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
        self._assignment = TopicPartition(tp.topic, tp.partition, start_offset)
        self._consumer = create_consumer(config, f"{thread_id} {tp}")
        self._packed_fetch_wanted = packed_fetch
        self._packed: PackedFetch | None = None
        self._error_log = ClientErrorLog(f"{thread_id} {tp}")
        self._events_due = 0.0
        self._thread = threading.Thread(
            target=self._run, name=f"kafka-{tp.topic}-{tp.partition}", daemon=True
        )
        self.next_offset: int | None = self.start_offset  # after the last record handed to the sink
        self._watch: FetchWatch | None = None
        if stall_monitor is not None:
            self._probe_timeout_s = max(0.1, min(_METADATA_TIMEOUT_S, stall_monitor.probe_interval_s))
            self._watch = stall_monitor.watch(tp, str(config.get("bootstrap.servers", "")), self._probe)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end (after the batch in hand); see :meth:`join`."""
        self._stopping.set()
        if self._thread.ident is None:
            self._close()  # never started: the thread that would close it never will

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
        if self._packed is not None:
            self._packed.close()
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            logger.debug("closing the consumer of %s: %r", self.tp, exc)

    def _assign(self) -> None:
        # librdkafka resolves smallest/largest only once it knows the partition's leader, and a
        # partition assigned before the first metadata reply waits for a fixed 500 ms retry
        # timer; asking for the topic's metadata first makes the first fetch ~10x sooner.
        # Best effort: without an answer, librdkafka keeps asking by itself.
        try:
            self._consumer.list_topics(self.tp.topic, timeout=_METADATA_TIMEOUT_S)
        except KafkaException as exc:
            logger.debug("%s: no metadata before assign (%r); librdkafka retries", self.tp, exc)
        self._reset_if_out_of_range()
        if self._packed_fetch_wanted:
            self._packed = PackedFetch.attach(self._consumer, self.tp)
        self._consumer.assign([self._assignment])

    def _reset_if_out_of_range(self) -> None:
        """Start at the reset offset, and have it committed, when the broker's log no longer (or
        never) holds the committed offset: librdkafka would reset by itself, but the committed
        offset would stay, and one past the log end would refuse every later commit."""
        committed = self.start_offset
        if committed is None:
            return
        try:
            low, high = self._consumer.get_watermark_offsets(
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
        self._assignment = TopicPartition(self.tp.topic, self.tp.partition, reset_to)
        self.next_offset = reset_to
        if self._on_out_of_range is not None:
            self._on_out_of_range(self.tp, committed, reset_to)

    def _consume_until_stopped(self) -> None:
        self._assign()
        tp = self.tp
        next_batch = self._next_packed_batch if self._packed is not None else self._next_batch
        batch_size, timeout = self._batch_size, self._poll_timeout_s
        stopping = self._stopping.is_set
        running = self._running
        sink = self._sink
        watch = self._watch
        while not stopping():
            batch = next_batch(batch_size, timeout)
            if batch is None:
                if watch is not None:
                    watch.quiet()
                continue
            if not running.is_set():
                # Paused while the fetch waited, or before it: hold the batch (the client's
                # position is already past it) until resumed; a stop drops it unstored.
                while not running.wait(timeout):
                    if stopping():
                        return
            chunk, first, last = batch
            if watch is not None:
                watch.fetched()
            sink(tp, chunk, first, last)
            self.next_offset = last + 1

    def _next_batch(self, batch_size: int, timeout_s: float) -> tuple[PackedChunk, int, int] | None:
        """The next records from confluent-kafka's ``Message`` objects, packed; None if none came.

        The whole per-message Python work, as maps over the client's C accessors (no bytecode
        per message): an error check, then the columns of a chunk, packed while the messages are
        still in the CPU cache."""
        messages = self._consumer.consume(batch_size, timeout_s)
        if not messages:
            return None
        if any(map(_message_error, messages)):
            messages = self._without_errors(messages)
            if not messages:
                return None
        offsets = list(map(_message_offset, messages))
        chunk = pack_chunk(
            self.tp.topic,
            self.tp.partition,
            list(map(_message_key, messages)),
            list(map(_message_value, messages)),
            offsets,
        )
        return chunk, offsets[0], offsets[-1]

    def _next_packed_batch(self, batch_size: int, timeout_s: float) -> tuple[PackedChunk, int, int] | None:
        """The next records read and packed by the C extension; None if none came."""
        packed = self._packed
        assert packed is not None
        now = time.monotonic()
        if now >= self._events_due:
            # The consumer queue now carries only the client's logs and errors.
            self._events_due = now + _EVENT_SERVE_INTERVAL_S
            for error in packed.serve_events():
                self._on_error(error)
        batch = packed.fetch(batch_size, timeout_s)
        for error in batch.errors:
            self._on_error(error)
        if batch.chunk is None:
            return None
        return batch.chunk, batch.first_offset, batch.last_offset

    def _probe(self) -> str | None:
        """None when the leader of this partition answers and holds nothing past our position."""
        try:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.tp.topic, self.tp.partition), timeout=self._probe_timeout_s, cached=False
            )
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None:
                return str(exc)
            return likely_cause(error.name(), error.str())
        position = self.next_offset
        if position is None and self._offset_reset == "smallest":
            position = low
        if position is not None and high > position:
            return NO_RECORDS_CAUSE.format(position=position, high=high)
        return None

    def _without_errors(self, messages: list[Message]) -> list[Message]:
        records: list[Message] = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(message)
            else:
                self._on_error(error)
        return records

    def _on_error(self, error: KafkaError) -> None:
        """An error among the records: fatal ones end the thread, the rest are logged."""
        if error.fatal():
            raise KafkaException(error)
        if error.code() != KafkaError._PARTITION_EOF:
            self._error_log.log(error)

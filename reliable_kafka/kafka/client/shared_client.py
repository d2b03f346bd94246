"""One librdkafka client per receiver, shared by its partition threads.

A confluent-kafka ``Consumer`` is a whole librdkafka client: its own threads, a connection per
broker, and a prefetch queue filled up to ``queued.max.messages.kbytes`` (64 MB by default). One
per partition made a receiver of 256 partitions hold ~1,300 threads and fetch up to 16 GB ahead.
Here every partition thread of a receiver reads through the receiver's one client, which fetches
for all of its partitions over one connection per broker; each thread still reads only its own
partition, in order:

- **Packed fetch** (the C extension): each partition's librdkafka queue is detached from the
  consumer queue before the partition is assigned, and its thread reads it directly
  (:class:`~reliable_kafka.kafka.client.packed_fetch.PackedFetch`); the consumer queue then carries
  only the client's logs and errors, served by whichever partition thread comes first.
- **Python path** (no extension): confluent-kafka offers no per-partition queues, so one
  dispatcher thread polls the client and hands each partition's messages to that partition's
  thread (:class:`PartitionHandoff`), which packs them; a partition whose thread falls behind by
  its share of the prefetch budget is paused in librdkafka (which then stops fetching it) until
  its thread catches up. Packing stays on the partition threads, as with packed fetch.

Prefetch is bounded per receiver, not per partition (:func:`fetch_plan`): fetches keep a size
that takes the producers' record batches whole, and at most :attr:`FetchPlan.slots` partitions
fetch at once, the others paused in librdkafka until their turn
(:mod:`reliable_kafka.kafka.client.fetch_admission`).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from reliable_kafka.kafka.client.consumer import create_consumer
from reliable_kafka.kafka.client.fetch_admission import Change, FetchAdmission
from reliable_kafka.kafka.client.packed_fetch import FetchedBatch, PackedFetch, serve_events
from reliable_kafka.kafka.client.packed_fetch import available as packed_fetch_available
from reliable_kafka.kafka.client.params import DEFAULT_PREFETCH_BYTES
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.storage.block_format import PackedChunk, pack_chunk
from reliable_kafka.util.malloc_tuning import tune_malloc_for_receivers

# Types only: the refusal judge imports the receiver package, too heavy for the ZooKeeper wing.
if TYPE_CHECKING:
    from reliable_kafka.kafka.client.access_refusal import AccessRefusals

logger = logging.getLogger(__name__)

# The librdkafka keys the prefetch budget sets, unless kafkaParams set them.
_QUEUED_KBYTES = "queued.max.messages.kbytes"
_FETCH_MAX_BYTES = "fetch.max.bytes"
_PARTITION_FETCH_BYTES = "max.partition.fetch.bytes"
_FETCH_WAIT_MAX_MS = "fetch.wait.max.ms"
# While partitions take turns: a broker holds a fetch of partitions at their log end this long
# (librdkafka's default 500 ms), and librdkafka sends a broker no other fetch meanwhile, so the
# partitions admitted after caught-up ones waited that long for their first fetch.
_TURN_FETCH_WAIT_MS = 10
# Below this a queue would make every fetch a round trip for a few records.
_MIN_SHARE_BYTES = 16 << 10
# A fetch takes at most this much of a partition: librdkafka's default, the size of librdkafka
# producers' record batches (batch.size, 1,000,000) and of brokers' message.max.bytes. A broker
# returns a larger batch only for the first partition of a response (KIP-74), so a fetch much
# smaller than the batches brings about one batch per round trip.
_PARTITION_FETCH_BYTES_DEFAULT = 1 << 20
# An admitted partition's queue holds at least this fraction of a fetch (librdkafka fetches again
# once it holds less): more partitions fetch at once than with a whole fetch each.
_QUEUE_FETCH_RATIO = 4
# An admitted partition yields its slot to a waiting one after taking this many fetches' worth:
# a yield drops what its queue holds (fetched again on its next turn), at most two fetches.
_QUANTUM_FETCHES = 16
# How often the broker is asked for the log end offsets of idle partitions (one ListOffsets
# request per broker for all of them): a record written to an idle partition waits this long,
# at most, to be seen, and then for a slot.
_IDLE_WATCH_INTERVAL_S = 0.2
_LIST_OFFSETS_TIMEOUT_S = 2.0
# How often the client's logs and errors are served off the consumer queue (packed fetch).
_EVENT_SERVE_INTERVAL_S = 0.1
_DISPATCH_BATCH = 500
_DISPATCH_TIMEOUT_S = 0.1
_METADATA_TIMEOUT_S = 5.0


_message_error = Message.error
_message_key = Message.key
_message_value = Message.value
_message_offset = Message.offset


def _size(messages: list[Message]) -> int:
    """What ``messages`` weigh against a partition's share of the prefetch budget."""
    return sum(len(v) for v in map(_message_value, messages) if v) + sum(
        len(k) for k in map(_message_key, messages) if k
    )


@dataclass(frozen=True)
class FetchPlan:
    """How a receiver's prefetch budget is spent: ``slots`` partitions fetch at once, each up to
    ``fetch_bytes`` a fetch while its queue holds less than ``queue_bytes``."""

    slots: int
    queue_bytes: int
    fetch_bytes: int
    response_bytes: int

    @property
    def slot_bytes(self) -> int:
        """What one admitted partition holds at most: its queue, filled up to ``queue_bytes`` and
        then by one more fetch; the batch its thread holds was taken out of it."""
        return self.queue_bytes + self.fetch_bytes


def fetch_plan(
    budget_bytes: int, partitions: int, client_config: Mapping[str, Any] | None = None
) -> FetchPlan:
    """A quarter of the budget for the admitted partitions' queues (as much again for the batches
    their threads hold), a quarter for one fetch response per broker. Each admitted partition
    fetches up to ``max.partition.fetch.bytes`` (1 MiB unless set) and keeps a queue of at least
    a quarter of that, so as many partitions are admitted as a fetch and a quarter each fit in
    the quarter (12 for the default 64 MiB), at most all of them; with fewer partitions each
    one's queue grows instead."""
    config = client_config or {}
    fetch = int(config.get(_PARTITION_FETCH_BYTES, _PARTITION_FETCH_BYTES_DEFAULT))
    quarter = max(_MIN_SHARE_BYTES, budget_bytes // 4)
    slots = max(1, min(max(1, partitions), quarter // (fetch + fetch // _QUEUE_FETCH_RATIO)))
    queue = max(_MIN_SHARE_BYTES, quarter // slots - fetch)
    return FetchPlan(slots=slots, queue_bytes=queue, fetch_bytes=fetch, response_bytes=quarter)


def prefetch_config(
    budget_bytes: int, partitions: int, client_config: Mapping[str, Any], *, shared_queue: bool = False
) -> dict[str, Any]:
    """librdkafka settings that keep a receiver's prefetch within ``budget_bytes`` whatever its
    partition count, with at most :func:`fetch_plan`'s slots fetching (see
    :func:`receiver_memory_bound`): librdkafka fetches a partition while its queue holds less
    than ``queued.max.messages.kbytes``, up to ``max.partition.fetch.bytes`` a fetch, and one
    fetch response of at most ``fetch.max.bytes`` (a quarter of the budget) is in flight per
    broker. Keys already in ``client_config`` are left as the user set them.

    With ``shared_queue`` (the Python path: every partition's queue forwarded to the client's)
    librdkafka compares the *shared* queue's size with ``queued.max.messages.kbytes`` for each
    partition (measured: 2,520 messages, 246 KB shown for every one of 256 partitions), so
    there it is the whole receiver's quarter, not an admitted partition's queue, which would let
    one partition's worth through for all (9k records/s at 256 partitions); the partitions'
    handoffs hold the slots' queues instead (:class:`PartitionHandoff`)."""
    plan = fetch_plan(budget_bytes, partitions, client_config)
    queued = plan.response_bytes if shared_queue else plan.queue_bytes
    wanted = {
        _QUEUED_KBYTES: max(1, queued // 1024),
        _PARTITION_FETCH_BYTES: plan.fetch_bytes,
        _FETCH_MAX_BYTES: plan.response_bytes,
    }
    if plan.slots < partitions:
        wanted[_FETCH_WAIT_MAX_MS] = _TURN_FETCH_WAIT_MS
    return {key: value for key, value in wanted.items() if key not in client_config}


# What each partition costs a receiver whatever it reads: its thread (stack pages touched, the
# interpreter's thread state), its fetch watch and librdkafka's state of it (measured: ~16 MiB
# for 256 partitions).
PER_PARTITION_BYTES = 64 << 10
# librdkafka's bookkeeping of each prefetched record, beyond its bytes (its op and message).
PER_RECORD_BYTES = 320


def receiver_memory_bound(
    prefetch_bytes: int,
    max_buffered_bytes: int,
    *,
    brokers: int,
    partitions: int,
    record_bytes: int,
    producer_batch_bytes: int = 16 << 10,
) -> int:
    """What a Kafka receiver holds at most beyond its process's size before it started, for
    records of about ``record_bytes`` written in record batches of at most
    ``producer_batch_bytes`` (the producers' ``batch.size``; Java's default is 16 KiB):

    - prefetch: only the admitted partitions (:func:`fetch_plan`'s slots) hold records: each
      its queue and the batch its thread holds, at most a slot's bytes each (a fetch brings
      whole record batches: at least one, however large), plus librdkafka's bookkeeping of
      those records, plus one fetch response (a quarter of the budget) per broker;
    - the blocks received and not yet stored (``spark.streaming.receiver.maxBufferedBytes``),
      the one being stored counted twice (its chunks and its joined copy);
    - a fixed cost per partition (:data:`PER_PARTITION_BYTES`).
    """
    plan = fetch_plan(prefetch_bytes, partitions)
    slot = plan.queue_bytes + max(plan.fetch_bytes, producer_batch_bytes)
    held = 2 * slot * plan.slots
    held += held // max(1, record_bytes) * PER_RECORD_BYTES
    prefetch = held + brokers * plan.response_bytes
    return prefetch + 2 * max_buffered_bytes + partitions * PER_PARTITION_BYTES


class PartitionReader(Protocol):
    """What a partition thread reads its records through."""

    def fetch(self, max_messages: int, timeout_s: float) -> FetchedBatch: ...

    @property
    def held(self) -> bool:
        """Whether the partition waits for its turn to fetch (quiet by choice, not stalled)."""
        ...

    def close(self) -> None: ...


class SharedFetchClient:
    """The receiver's client. Thread-safe: partition threads attach, assign and unassign their
    own partitions concurrently; :meth:`close` once every partition thread has ended."""

    def __init__(
        self,
        consumer: Consumer,
        consumer_config: Mapping[str, Any],
        *,
        packed_fetch: bool,
        handoff_bytes: int,
        admission: FetchAdmission | None = None,
    ) -> None:
        self.consumer = consumer
        # Plain data only (no callbacks): what the fetch-stall report names (bootstrap.servers).
        self.consumer_config = dict(consumer_config)
        self._packed_fetch = packed_fetch
        self._handoff_bytes = handoff_bytes
        self._lock = threading.Lock()
        # librdkafka's (incremental_)assign waits for ever while another thread is inside
        # consume() of the same consumer: the dispatcher polls under this lock, and assignment
        # changes take it between two polls.
        self._poll_lock = threading.Lock()
        self._handoffs: dict[TopicAndPartition, PartitionHandoff] = {}
        # Without a plan, every partition fetches at once.
        self.admission = admission or FetchAdmission(1 << 30, quantum_bytes=1 << 62)
        # What librdkafka was last told to pause for admission (packed fetch; under _poll_lock).
        self._admission_paused: set[TopicAndPartition] = set()
        # Handoffs whose wanted pause state may differ from librdkafka's, applied by the
        # dispatcher between two polls (under _lock).
        self._flow_changed: set[PartitionHandoff] = set()
        self._dispatcher: threading.Thread | None = None
        self._closing = threading.Event()
        # Packed readers not yet closed (under _lock): librdkafka aborts the process when a queue
        # is read or destroyed after its consumer closed, so a reader's thread that outlived its
        # join at a stop closes the consumer itself, last (see close()).
        self._open_packed_readers = 0
        self._consumer_closed = False
        self._events_due = 0.0
        self._idle_watch_lock = threading.Lock()
        self._idle_watch_due = 0.0

    @classmethod
    def create(
        cls,
        config: Mapping[str, Any],
        name: str,
        *,
        prefetch_bytes: int = DEFAULT_PREFETCH_BYTES,
        partitions: int = 1,
        packed_fetch: bool = True,
        refusals: AccessRefusals | None = None,
    ) -> SharedFetchClient:
        """A client for up to ``partitions`` partitions within ``prefetch_bytes`` (see
        :func:`prefetch_config`); ``ValueError`` naming the key librdkafka refuses. Its refusals
        go to ``refusals``."""
        tune_malloc_for_receivers()  # before any partition thread allocates (util/malloc_tuning.py)
        shared_queue = not (packed_fetch and packed_fetch_available())
        tuned = {**config, **prefetch_config(prefetch_bytes, partitions, config, shared_queue=shared_queue)}
        plan = fetch_plan(prefetch_bytes, partitions, config)
        admission = FetchAdmission(plan.slots, quantum_bytes=_QUANTUM_FETCHES * plan.fetch_bytes)
        return cls(
            create_consumer(tuned, name, refusals),
            tuned,
            packed_fetch=packed_fetch,
            handoff_bytes=plan.queue_bytes,
            admission=admission,
        )

    # ------------------------------------------------------------ partitions

    def attach(self, tp: TopicAndPartition) -> PartitionReader:
        """The reader of ``tp``; call before :meth:`assign`."""
        if self._packed_fetch:
            packed = PackedFetch.attach(self.consumer, tp)
            if packed is not None:
                with self._lock:
                    self._open_packed_readers += 1
                return PackedReader(self, packed, tp)
        handoff = PartitionHandoff(self, tp, self._handoff_bytes)
        with self._lock:
            self._handoffs[tp] = handoff
            if self._dispatcher is None:
                self._dispatcher = threading.Thread(
                    target=self._dispatch, name="kafka-fetch-dispatcher", daemon=True
                )
                self._dispatcher.start()
        return handoff

    def ensure_metadata(self, topics: Iterable[str]) -> None:
        """Ask for the topics' metadata now, once for all their partitions: librdkafka resolves
        smallest/largest only once it knows a partition's leader, and a partition assigned before
        the first metadata reply waits for a fixed 500 ms retry timer (asking first makes the
        first fetch ~10x sooner). Best effort: without an answer, librdkafka keeps asking."""
        for topic in sorted(set(topics)):
            try:
                self.consumer.list_topics(topic, timeout=_METADATA_TIMEOUT_S)
            except KafkaException as exc:
                logger.debug("%s: no metadata before assign (%r); librdkafka retries", topic, exc)

    def assign(self, offsets: Mapping[TopicAndPartition, int]) -> None:
        """Start fetching these partitions, in one assignment change (librdkafka serves each
        change on its own: one per partition of a 256-partition rebalance took seconds)."""
        if self.admission.limited(adding=len(offsets)):
            offsets = self._resolve_logical(offsets)
        assignment = [TopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        with self._poll_lock:
            self.consumer.incremental_assign(assignment)
            # Those beyond the free slots wait for their turn, paused before their first fetch
            # completes (what it brought is dropped: they start at the assigned offset).
            change = self.admission.add(offsets)
            self._admit(change, self._hand_to_dispatcher(change))

    def _resolve_logical(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, int]:
        """Partitions that will take turns start at concrete offsets: the log's start or end now,
        as librdkafka would resolve them at its first fetch, so that admission knows each one's
        next offset and can leave it idle until its log grows. Those the broker cannot resolve
        now keep their logical offset (and take turns, never idle, until they take a record)."""
        logical = {OFFSET_BEGINNING, OFFSET_END}
        wanted = {tp: offset for tp, offset in offsets.items() if offset in logical}
        if not wanted:
            return dict(offsets)
        try:
            return {**offsets, **self._list_offsets(wanted)}
        except (KafkaException, RuntimeError) as exc:
            logger.debug("start offsets of %d partitions left to librdkafka: %r", len(wanted), exc)
            return dict(offsets)

    def _list_offsets(self, wanted: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, int]:
        """The log start (``OFFSET_BEGINNING``) or end (``OFFSET_END``) offsets of partitions, in
        one ListOffsets request per broker; those the broker answered with an error are left out."""
        query = [TopicPartition(tp.topic, tp.partition, offset) for tp, offset in wanted.items()]
        # Between two of the dispatcher's polls, as every other call of the client's.
        with self._poll_lock:
            answered = self.consumer.offsets_for_times(query, timeout=_LIST_OFFSETS_TIMEOUT_S)
        return {
            TopicAndPartition(tp.topic, tp.partition): tp.offset
            for tp in answered
            if tp.error is None and tp.offset >= 0
        }

    def unassign(self, partitions: Iterable[TopicAndPartition]) -> None:
        """Stop fetching these partitions (their threads have ended), in one change."""
        partitions = list(partitions)
        with self._lock:
            for tp in partitions:
                self._handoffs.pop(tp, None)
        try:
            with self._poll_lock:
                self.consumer.incremental_unassign(
                    [TopicPartition(tp.topic, tp.partition) for tp in partitions]
                )
        except (KafkaException, RuntimeError) as exc:
            logger.debug("unassigning %s: %r", partitions, exc)
        self.admission_changed(self.admission.remove(partitions))  # their slots to waiting ones

    def took(self, tp: TopicAndPartition, size: int, last_offset: int) -> None:
        """``tp``'s thread is back for more after handing on ``size`` bytes up to ``last_offset``.
        While others wait, whether that was the log's end as of the latest fetch response
        (librdkafka's cached high watermark: no request) lets a caught-up partition yield at
        once, not after a poll's timeout of finding its queue empty."""
        admission = self.admission
        caught_up = False
        # Only between two of the dispatcher's polls, and not waiting for one: called while it
        # polled, get_watermark_offsets waited for ever (as resume did, see flow_changed).
        if admission.waiting() and self._poll_lock.acquire(blocking=False):
            try:
                _, high = self.consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), cached=True
                )
            except (KafkaException, RuntimeError):
                high = -1
            finally:
                self._poll_lock.release()
            caught_up = 0 <= high <= last_offset + 1
        self.admission_changed(admission.took(tp, size, next_offset=last_offset + 1, caught_up=caught_up))

    def found_empty(self, tp: TopicAndPartition) -> None:
        """``tp``'s thread found its queue empty: perhaps its turn ends (:meth:`FetchAdmission.empty`),
        and it is a moment to ask whether idle partitions' logs grew (:meth:`watch_idle`)."""
        self.admission_changed(self.admission.empty(tp))
        self.watch_idle()

    def watch_idle(self) -> None:
        """Ready the idle partitions whose logs grew (:meth:`FetchAdmission.log_ends`): asked of
        the brokers at most every 200 ms, by one partition thread at a time, from a fetch that
        found nothing (the others go on reading)."""
        now = time.monotonic()
        if now < self._idle_watch_due or not self._idle_watch_lock.acquire(blocking=False):
            return
        try:
            self._idle_watch_due = now + _IDLE_WATCH_INTERVAL_S
            idle = self.admission.idle_positions()
            if idle:
                self.admission_changed(self.admission.log_ends(self._log_ends(idle)))
        finally:
            self._idle_watch_lock.release()

    def _log_ends(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        """Each partition's log end offset (one ListOffsets request per broker); ``None`` where
        the broker could not tell."""
        ends: dict[TopicAndPartition, int | None] = dict.fromkeys(partitions)
        try:
            ends.update(self._list_offsets(dict.fromkeys(ends, OFFSET_END)))
        except (KafkaException, RuntimeError) as exc:
            logger.debug("log end offsets of %d idle partitions: %r; they take turns", len(ends), exc)
        return ends

    def admission_changed(self, change: Change) -> None:
        """Tell librdkafka which partitions admission paused or resumed: the Python path's through
        its dispatcher (see :meth:`flow_changed`), packed fetch's now."""
        if not change:
            return
        handed = self._hand_to_dispatcher(change)
        if self._packed_fetch and len(handed) < len(change.pause) + len(change.resume):
            with self._poll_lock:
                self._admit(change, handed)

    def _hand_to_dispatcher(self, change: Change) -> set[TopicAndPartition]:
        """The Python path's partitions of ``change``, marked for the dispatcher."""
        with self._lock:
            handoffs = [self._handoffs[tp] for tp in (*change.pause, *change.resume) if tp in self._handoffs]
            self._flow_changed.update(handoffs)
        return {handoff.tp for handoff in handoffs}

    def _admit(self, change: Change, handed: set[TopicAndPartition]) -> None:
        """Packed fetch, under _poll_lock: pause and resume as admission wants *now* (two threads'
        changes may come here in either order; the last one sees the latest state)."""
        pause, resume = [], []
        for tp in dict.fromkeys((*change.pause, *change.resume)):
            if tp in handed or not self.admission.knows(tp):
                continue  # the dispatcher's, or unassigned meanwhile
            admitted = self.admission.admitted(tp)
            if not admitted and tp not in self._admission_paused:
                self._admission_paused.add(tp)
                pause.append(TopicPartition(tp.topic, tp.partition))
            elif admitted and tp in self._admission_paused:
                # Kept after unassign too: a partition assigned again may still be paused there.
                self._admission_paused.discard(tp)
                resume.append(TopicPartition(tp.topic, tp.partition))
        try:
            if pause:
                self.consumer.pause(pause)
            if resume:
                self.consumer.resume(resume)
        except (KafkaException, RuntimeError) as exc:  # closed: the reader that closed it was last
            logger.debug("pausing %s, resuming %s: %r", pause, resume, exc)

    def flow_changed(self, handoff: PartitionHandoff) -> None:
        """``handoff`` wants to be paused or resumed: the dispatcher does it before its next poll.

        Only the dispatcher calls pause/resume, between two polls: called from the partition
        threads while it polled, librdkafka's resume waited for ever (77 of 256 partition threads
        hung in it, their records fetched but never stored)."""
        with self._lock:
            self._flow_changed.add(handoff)

    def _apply_flow(self) -> None:
        with self._lock:
            changed, self._flow_changed = self._flow_changed, set()
        pause: list[TopicPartition] = []
        resume: list[TopicPartition] = []
        for handoff in changed:
            wanted = handoff.wants_pause() or not self.admission.admitted(handoff.tp)
            if wanted != handoff.client_paused:
                handoff.client_paused = wanted
                (pause if wanted else resume).append(TopicPartition(handoff.tp.topic, handoff.tp.partition))
        # One call each for all the partitions that changed (librdkafka serves each call on its own).
        if pause:
            self.consumer.pause(pause)
        if resume:
            self.consumer.resume(resume)

    # ------------------------------------------------------------ client events

    def serve_events(self) -> list[KafkaError]:
        """Packed fetch: the client's pending logs and errors, at most every 100 ms, by one
        partition thread at a time (the others go on reading)."""
        now = time.monotonic()
        if now < self._events_due or not self._poll_lock.acquire(blocking=False):
            return []
        try:
            self._events_due = now + _EVENT_SERVE_INTERVAL_S
            return serve_events(self.consumer)
        finally:
            self._poll_lock.release()

    def _dispatch(self) -> None:
        """Python path: poll the client, hand each partition its messages in order."""
        while not self._closing.is_set():
            try:
                with self._poll_lock:
                    self._apply_flow()
                    # What is there now, else the first message to come: librdkafka's batch
                    # consume waits for a whole batch or the timeout (see PackedFetch.fetch).
                    messages = self.consumer.consume(_DISPATCH_BATCH, 0)
                    if not messages:
                        messages = self.consumer.consume(1, _DISPATCH_TIMEOUT_S)
            except (KafkaException, RuntimeError) as exc:
                if self._closing.is_set():
                    return
                self._fail_all(exc)
                return
            by_partition: dict[TopicAndPartition, list[Message]] = {}
            for message in messages:
                error = message.error()
                topic, partition = message.topic(), message.partition()
                if error is not None and (topic is None or partition is None or partition < 0):
                    self._client_error(error)
                    continue
                by_partition.setdefault(TopicAndPartition(topic, partition), []).append(message)
            with self._lock:
                handoffs = {tp: self._handoffs.get(tp) for tp in by_partition}
            for tp, batch in by_partition.items():
                handoff = handoffs[tp]
                if handoff is not None:  # else unassigned meanwhile: its next owner reads them
                    handoff.put(batch)

    def _client_error(self, error: KafkaError) -> None:
        """An error of the whole client (not one partition's): fatal ones end every partition."""
        if error.fatal():
            self._fail_all(KafkaException(error))
            return
        with self._lock:
            handoffs = list(self._handoffs.values())
        for handoff in handoffs[:1]:  # logged once, by one partition thread
            handoff.put_error(error)

    def _fail_all(self, exc: BaseException) -> None:
        with self._lock:
            handoffs = list(self._handoffs.values())
        for handoff in handoffs:
            handoff.fail(exc)

    # ------------------------------------------------------------ life cycle

    def close(self) -> None:
        """Closes the consumer, or, while a packed reader is still open (its thread outlived the
        stop's join), leaves that to the last reader's close."""
        self._closing.set()
        dispatcher = self._dispatcher
        if dispatcher is not None and dispatcher is not threading.current_thread():
            dispatcher.join()
        with self._lock:
            readers = self._open_packed_readers
        if readers:
            logger.info(
                "the receiver's Kafka client closes once its %d partition reader(s) still reading end",
                readers,
            )
        self._close_consumer_unless_read()

    def packed_reader_closed(self) -> None:
        with self._lock:
            self._open_packed_readers -= 1
        if self._closing.is_set():
            self._close_consumer_unless_read()

    def _close_consumer_unless_read(self) -> None:
        with self._lock:
            if self._open_packed_readers or self._consumer_closed:
                return
            self._consumer_closed = True
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:
            logger.debug("closing the receiver's Kafka client: %r", exc)


class PackedReader:
    """A partition's queue read by the C extension, plus the client's events now and then."""

    def __init__(self, client: SharedFetchClient, packed: PackedFetch, tp: TopicAndPartition) -> None:
        self._client = client
        self._packed = packed
        self._tp = tp
        # The size and last offset of the batch last fetched, reported once its thread is back.
        self._taken = 0
        self._last = -1
        self._closed = False

    def fetch(self, max_messages: int, timeout_s: float) -> FetchedBatch:
        client = self._client
        if self._taken:  # back for more: the batch before is handed on
            client.took(self._tp, self._taken, self._last)
            self._taken = 0
        events = client.serve_events()
        batch = self._packed.fetch(max_messages, timeout_s)
        if batch.chunk is None:
            client.found_empty(self._tp)
        else:
            self._taken, self._last = len(batch.chunk.data), batch.last_offset
        return batch._replace(errors=events + batch.errors) if events else batch

    @property
    def held(self) -> bool:
        return not self._client.admission.admitted(self._tp)

    def close(self) -> None:
        """Releases the partition's queue (idempotent); the client's consumer closes after the
        last reader's queue."""
        if self._closed:
            return
        self._closed = True
        self._packed.close()
        self._client.packed_reader_closed()


class PartitionHandoff:
    """Python path: one partition's messages from the dispatcher to its thread, bounded.

    Past ``max_bytes`` waiting, the partition is paused in librdkafka; below half, resumed
    (by the dispatcher: :meth:`SharedFetchClient.flow_changed`).
    A pause drops what librdkafka had prefetched of it and resumes at the next message not yet
    handed over, so nothing is skipped or read twice.
    """

    def __init__(self, client: SharedFetchClient, tp: TopicAndPartition, max_bytes: int) -> None:
        self._client = client
        self.tp = tp
        self._max_bytes = max(1, max_bytes)
        self._cond = threading.Condition()
        self._messages: collections.deque[Message] = collections.deque()
        self._errors: list[KafkaError] = []
        self._bytes = 0
        self._paused = False
        # The size and last offset of the batch last fetched; this partition's thread only.
        self._taken = 0
        self._last = -1
        # What librdkafka was told last; read and written by the dispatcher only.
        self.client_paused = False
        self._failure: BaseException | None = None

    def put(self, messages: Iterable[Message]) -> None:
        pause = False
        batch = list(messages)
        if any(map(_message_error, batch)):
            errors = [m.error() for m in batch if m.error() is not None]
            batch = [m for m in batch if m.error() is None]
        else:
            errors = []
        with self._cond:
            self._errors.extend(errors)
            self._messages.extend(batch)
            self._bytes += _size(batch)
            if self._bytes > self._max_bytes and not self._paused:
                self._paused = pause = True
            self._cond.notify_all()
        if pause:
            self._client.flow_changed(self)

    def put_error(self, error: KafkaError) -> None:
        with self._cond:
            self._errors.append(error)
            self._cond.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self._cond:
            self._failure = exc
            self._cond.notify_all()

    def fetch(self, max_messages: int, timeout_s: float) -> FetchedBatch:
        if self._taken:  # back for more: the batch before is handed on
            self._client.took(self.tp, self._taken, self._last)
            self._taken = 0
        resume = False
        with self._cond:
            if not self._messages and not self._errors and self._failure is None:
                self._cond.wait(timeout_s)
            if self._failure is not None:
                raise self._failure
            errors, self._errors = self._errors, []
            taken = [self._messages.popleft() for _ in range(min(max_messages, len(self._messages)))]
            self._taken = _size(taken)
            self._bytes -= self._taken
            if taken:
                self._last = taken[-1].offset()
            if self._paused and self._bytes <= self._max_bytes // 2:
                self._paused, resume = False, True
        if resume:
            self._client.flow_changed(self)
        if not taken:
            self._client.found_empty(self.tp)
            return FetchedBatch(None, -1, -1, errors)
        # Maps over the client's C accessors: no bytecode per message.
        offsets = list(map(_message_offset, taken))
        chunk: PackedChunk = pack_chunk(
            self.tp.topic,
            self.tp.partition,
            list(map(_message_key, taken)),
            list(map(_message_value, taken)),
            offsets,
        )
        return FetchedBatch(chunk, offsets[0], offsets[-1], errors)

    def wants_pause(self) -> bool:
        with self._cond:
            return self._paused

    @property
    def held(self) -> bool:
        return not self._client.admission.admitted(self.tp)

    def close(self) -> None:
        pass  # the client forgets it on unassign

"""Which of a receiver's partitions librdkafka may fetch now: at most ``slots`` at a time.

A fetch must be large enough for the partitions' record batches: a broker returns a batch larger
than ``max.partition.fetch.bytes`` only for the first partition of a fetch response (KIP-74), so
a per-partition share of the prefetch budget (tens of KiB at 256 partitions) brought about one
batch per round trip. Here every fetch keeps librdkafka's 1 MiB, and the budget bounds how many
partitions fetch at once instead: the others are paused in librdkafka and take their turn.

State machine of one partition (:class:`FetchAdmission` keeps it; the shared client applies
each :class:`Change` to librdkafka):

- *admitted* (fetching) -> (a partition is *ready* to take the slot, its thread is back for
  more holding nothing, and it either took at least ``quantum_bytes`` since admitted, or took
  the last record the broker held at its latest fetch (caught up), or found its queue empty
  after taking records, or found it empty ``idle_polls`` times in a row) -> paused: *ready*
  after a quantum (it has more to fetch), *idle* otherwise;
- *ready* (paused, in line) -> (a slot frees: a partition yields, or ends) -> *admitted*,
  resumed, in the order they began to wait (round robin: none starves);
- *idle* (paused, caught up as far as its thread saw, its next offset known) -> (the log's end
  offset, asked of the broker for all idle partitions at once (:meth:`FetchAdmission.log_ends`),
  is beyond that next offset, or the broker could not tell) -> *ready*.

Idle partitions do not take turns: a turn of a partition with nothing to fetch cost a round of
idle polls, so at 256 partitions a record written to one waited ~13 s for its turn to come
round. An idle partition only needs the broker's log end offsets (one ListOffsets request per
broker for all of them, a few times a second), and is ready once it has records to fetch.
Being ready wrongly costs a turn; being idle wrongly would hold records back, so a partition
becomes idle only with its next offset known, stays idle only while the broker says its log
ends there, and is ready as soon as the broker cannot say.

A partition yields only from its own thread's fetch, holding no batch, so a slot covers the
partition's queue and the batch its thread holds. Pausing drops what librdkafka prefetched of
the partition and resumes at the next record not handed out, so nothing is lost or reordered;
yielding with an empty queue drops at most the fetch in flight.

Admission is one reason to pause; a ZooKeeper session SUSPENDED holds the partition threads'
batches instead (:meth:`PartitionConsumer.pause`), and neither undoes the other. The Python
path's handoffs also pause a partition whose thread falls behind; the client pauses a partition
in librdkafka while either reason holds (:meth:`SharedFetchClient.flow_changed`).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

# Empty polls in a row after which an admitted partition that took nothing yields its slot to a
# waiting one: one covers its first fetch after the resume, the next finds it caught up.
DEFAULT_IDLE_POLLS = 3


@dataclass
class Change:
    """What librdkafka must be told: partitions to pause and to resume."""

    pause: list[TopicAndPartition] = field(default_factory=list)
    resume: list[TopicAndPartition] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.pause or self.resume)


@dataclass
class _Turn:
    taken_bytes: int = 0
    empty_polls: int = 0


class FetchAdmission:
    """One per receiver. Thread-safe: each partition thread reports its own fetches."""

    def __init__(self, slots: int, *, quantum_bytes: int, idle_polls: int = DEFAULT_IDLE_POLLS) -> None:
        self.slots = max(1, slots)
        self._quantum = max(1, quantum_bytes)
        self._idle_polls = max(1, idle_polls)
        self._lock = threading.Lock()
        self._admitted: dict[TopicAndPartition, _Turn] = {}
        self._ready: collections.OrderedDict[TopicAndPartition, None] = collections.OrderedDict()
        self._idle: set[TopicAndPartition] = set()
        # The next offset each partition's thread would take, where known (a concrete start
        # offset, or one past the last record taken): what an idle partition's log end is
        # compared with.
        self._next: dict[TopicAndPartition, int] = {}

    def add(self, offsets: Mapping[TopicAndPartition, int]) -> Change:
        """New partitions (just assigned at ``offsets``; logical ones are negative): admitted
        while slots are free, else ready (they may have records to fetch)."""
        change = Change()
        with self._lock:
            for tp, offset in offsets.items():
                if self._knows(tp):
                    continue
                if offset >= 0:
                    self._next[tp] = offset
                if len(self._admitted) < self.slots:
                    self._admitted[tp] = _Turn()
                    change.resume.append(tp)
                else:
                    self._ready[tp] = None
                    change.pause.append(tp)
        return change

    def remove(self, partitions: Iterable[TopicAndPartition]) -> Change:
        """Partitions whose threads ended: their slots go to ready ones."""
        with self._lock:
            for tp in partitions:
                self._admitted.pop(tp, None)
                self._ready.pop(tp, None)
                self._idle.discard(tp)
                self._next.pop(tp, None)
            return Change(resume=self._fill())

    def limited(self, adding: int = 0) -> bool:
        """Whether partitions have to wait with ``adding`` more: more of them than slots."""
        with self._lock:
            return len(self._admitted) + len(self._ready) + len(self._idle) + adding > self.slots

    def admitted(self, tp: TopicAndPartition) -> bool:
        with self._lock:
            return tp in self._admitted

    def knows(self, tp: TopicAndPartition) -> bool:
        """Whether ``tp`` is admitted or waiting (not yet removed)."""
        with self._lock:
            return self._knows(tp)

    def _knows(self, tp: TopicAndPartition) -> bool:
        return tp in self._admitted or tp in self._ready or tp in self._idle

    def waiting(self) -> int:
        """Partitions ready for a slot (idle ones do not count: they wait for records)."""
        with self._lock:
            return len(self._ready)

    def idle_positions(self) -> dict[TopicAndPartition, int]:
        """The idle partitions and the next offset each one's thread would take."""
        with self._lock:
            return {tp: self._next[tp] for tp in self._idle}

    def took(
        self, tp: TopicAndPartition, size: int, *, next_offset: int | None = None, caught_up: bool = False
    ) -> Change:
        """``tp``'s thread took ``size`` bytes, up to before ``next_offset``, and comes back holding
        none of them; ``caught_up``: they reached the end of the log as the broker last told
        (nothing more to fetch now)."""
        with self._lock:
            if next_offset is not None and self._knows(tp):
                self._next[tp] = next_offset
            turn = self._admitted.get(tp)
            if turn is None:
                return Change()  # fetched before its pause took effect: its turn comes later
            turn.taken_bytes += size
            turn.empty_polls = 0
            if turn.taken_bytes < self._quantum and not caught_up:
                return Change()
            return self._yield(tp, turn, more=not caught_up)

    def empty(self, tp: TopicAndPartition) -> Change:
        """``tp``'s thread found its queue empty."""
        with self._lock:
            turn = self._admitted.get(tp)
            if turn is None:
                return Change()
            turn.empty_polls += 1
            if turn.taken_bytes == 0 and turn.empty_polls < self._idle_polls:
                return Change()
            return self._yield(tp, turn, more=False)

    def log_ends(self, ends: Mapping[TopicAndPartition, int | None]) -> Change:
        """The broker's log end offsets of idle partitions (``None``: it could not tell): those
        with records beyond their next offset, or with no answer, are ready."""
        with self._lock:
            for tp, end in ends.items():
                if tp in self._idle and (end is None or tp not in self._next or end > self._next[tp]):
                    self._idle.discard(tp)
                    self._ready[tp] = None
            return Change(resume=self._fill())

    def _yield(self, tp: TopicAndPartition, turn: _Turn, *, more: bool) -> Change:
        """``more``: it stopped with records left to fetch (its quantum), so it is ready again at
        once; otherwise it is idle, if its next offset is known to compare the log end with."""
        if not self._ready:
            # Nobody ready waits: a new turn in place. The empty polls go on counting, so that an
            # idle partition yields at its next empty poll once one is ready.
            turn.taken_bytes = 0
            return Change()
        del self._admitted[tp]
        if more or tp not in self._next:
            self._ready[tp] = None  # at the back of the line
        else:
            self._idle.add(tp)
        return Change(pause=[tp], resume=self._fill())

    def _fill(self) -> list[TopicAndPartition]:
        admitted = []
        while self._ready and len(self._admitted) < self.slots:
            tp, _ = self._ready.popitem(last=False)
            self._admitted[tp] = _Turn()
            admitted.append(tp)
        return admitted

"""Which of a receiver's partitions librdkafka may fetch now: at most ``slots`` at a time.

A fetch must be large enough for the partitions' record batches: a broker returns a batch larger
than ``max.partition.fetch.bytes`` only for the first partition of a fetch response (KIP-74), so
a per-partition share of the prefetch budget (tens of KiB at 256 partitions) brought about one
batch per round trip. Here every fetch keeps librdkafka's 1 MiB, and the budget bounds how many
partitions fetch at once instead: the others are paused in librdkafka and take their turn.

State machine of one partition (:class:`FetchAdmission` keeps it; the shared client applies
each :class:`Change` to librdkafka):

- *admitted* (fetching) -> (others wait, its thread is back for more holding nothing, and it
  either took at least ``quantum_bytes`` since admitted, or took the last record the broker
  held at its latest fetch (caught up), or found its queue empty after taking records, or
  found it empty ``idle_polls`` times in a row) -> *waiting*, paused;
- *waiting* -> (a slot frees: a partition yields, or ends) -> *admitted*, resumed; waiting
  partitions are admitted in the order they began to wait (round robin: none starves).

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
from collections.abc import Iterable
from dataclasses import dataclass, field

from reliable_kafka.kafka.topic_partition import TopicAndPartition

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
        self._waiting: collections.OrderedDict[TopicAndPartition, None] = collections.OrderedDict()

    def add(self, partitions: Iterable[TopicAndPartition]) -> Change:
        """New partitions (just assigned): admitted while slots are free, else waiting."""
        change = Change()
        with self._lock:
            for tp in partitions:
                if tp in self._admitted or tp in self._waiting:
                    continue
                if len(self._admitted) < self.slots:
                    self._admitted[tp] = _Turn()
                    change.resume.append(tp)
                else:
                    self._waiting[tp] = None
                    change.pause.append(tp)
        return change

    def remove(self, partitions: Iterable[TopicAndPartition]) -> Change:
        """Partitions whose threads ended: their slots go to waiting ones."""
        with self._lock:
            for tp in partitions:
                self._admitted.pop(tp, None)
                self._waiting.pop(tp, None)
            return Change(resume=self._fill())

    def admitted(self, tp: TopicAndPartition) -> bool:
        with self._lock:
            return tp in self._admitted

    def knows(self, tp: TopicAndPartition) -> bool:
        """Whether ``tp`` is admitted or waiting (not yet removed)."""
        with self._lock:
            return tp in self._admitted or tp in self._waiting

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def took(self, tp: TopicAndPartition, size: int, *, caught_up: bool = False) -> Change:
        """``tp``'s thread took ``size`` bytes and comes back holding none of them; ``caught_up``:
        they reached the end of the log as the broker last told (nothing more to fetch now)."""
        with self._lock:
            turn = self._admitted.get(tp)
            if turn is None:
                return Change()  # fetched before its pause took effect: its turn comes later
            turn.taken_bytes += size
            turn.empty_polls = 0
            if turn.taken_bytes < self._quantum and not caught_up:
                return Change()
            return self._yield(tp)

    def empty(self, tp: TopicAndPartition) -> Change:
        """``tp``'s thread found its queue empty."""
        with self._lock:
            turn = self._admitted.get(tp)
            if turn is None:
                return Change()
            turn.empty_polls += 1
            if turn.taken_bytes == 0 and turn.empty_polls < self._idle_polls:
                return Change()
            return self._yield(tp)

    def _yield(self, tp: TopicAndPartition) -> Change:
        if not self._waiting:
            self._admitted[tp] = _Turn()  # nobody waits: a new turn, in place
            return Change()
        del self._admitted[tp]
        self._waiting[tp] = None  # at the back of the line
        return Change(pause=[tp], resume=self._fill())

    def _fill(self) -> list[TopicAndPartition]:
        admitted = []
        while self._waiting and len(self._admitted) < self.slots:
            tp, _ = self._waiting.popitem(last=False)
            self._admitted[tp] = _Turn()
            admitted.append(tp)
        return admitted

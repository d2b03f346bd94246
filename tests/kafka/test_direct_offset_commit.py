"""DirectOffsetCommitter with an in-memory store: in order, coalesced, halted by a failed batch,
a failed commit carried into the next."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.offset_commit import DirectOffsetCommitter
from reliable_kafka.kafka.offsets.store import CommitResult

T0, T1 = TopicAndPartition("t", 0), TopicAndPartition("t", 1)


class MemoryStore:
    def __init__(self, fail_first: int = 0) -> None:
        self.commits: list[dict[TopicAndPartition, int]] = []
        self.fail_first = fail_first
        self.closed = False
        self.gate = threading.Event()
        self.gate.set()

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        return {}

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        self.gate.wait(10)
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("store down")
        self.commits.append(dict(offsets))
        return dict.fromkeys(offsets, CommitResult.COMMITTED)

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True


def ranges(*spans: tuple[int, int, int]) -> list[OffsetRange]:
    return [OffsetRange("t", p, a, b) for p, a, b in spans]


def test_the_stop_writes_the_latest_ends_of_every_partition_and_closes_the_store() -> None:
    store = MemoryStore()
    store.gate.clear()  # commits wait: batches pile up and coalesce
    committer = DirectOffsetCommitter("s", "g", store)
    committer.batch_completed(1000, ranges((0, 0, 5), (1, 0, 3)), None)
    committer.batch_completed(2000, ranges((0, 5, 9)), None)
    store.gate.set()
    committer.stop(10)
    merged: dict[TopicAndPartition, int] = {}
    for commit in store.commits:
        merged.update(commit)
    assert merged == {T0: 9, T1: 3} and store.closed


def test_a_failed_batch_halts_the_commits() -> None:
    store = MemoryStore()
    committer = DirectOffsetCommitter("s", "g", store)
    committer.batch_completed(1000, ranges((0, 0, 5)), None)
    committer.batch_completed(2000, ranges((0, 5, 9)), "RuntimeError: the sink is down")
    committer.batch_completed(3000, ranges((0, 9, 12)), None)
    committer.stop(10)
    assert [c[T0] for c in store.commits] == [5]


def test_a_failed_commit_is_carried_into_the_next() -> None:
    store = MemoryStore(fail_first=1)
    committer = DirectOffsetCommitter("s", "g", store)
    committer.batch_completed(1000, ranges((0, 0, 5), (1, 0, 2)), None)
    committer.stop(10)
    assert store.commits == [{T0: 5, T1: 2}]

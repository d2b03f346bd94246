"""The stream reader's commits to the group, with an in-memory store and lookups: the group gets
a batch's end only once Spark committed the batch, and the last batch's end without waiting for
a next batch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.offset_commit import GroupStore
from reliable_kafka.kafka.offsets.store import CommitResult
from reliable_kafka.sql.options import KafkaSourceOptions
from reliable_kafka.sql.source import ReliableKafkaStreamReader, kafka_schema

T0, T1 = TopicAndPartition("t", 0), TopicAndPartition("t", 1)


class MemoryStore:
    def __init__(self, committed: Mapping[TopicAndPartition, int], fail: bool = False) -> None:
        self.committed = dict(committed)
        self.commits: list[dict[TopicAndPartition, int]] = []
        self.fail = fail
        self.fetches = 0

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        self.fetches += 1
        return {tp: self.committed.get(tp) for tp in partitions}

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        self.commits.append(dict(offsets))
        if self.fail:
            raise ConnectionError("the store is down")
        self.committed.update(offsets)
        return dict.fromkeys(offsets, CommitResult.COMMITTED)

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Logs:
    """The lookups the reader makes of Kafka: each partition's log start and end."""

    def __init__(self, ends: Mapping[TopicAndPartition, int]) -> None:
        self.ends = dict(ends)

    def offsets(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, tuple[int, int]]:
        return {tp: (0, self.ends[tp]) for tp in partitions}

    def latest_offsets(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int]:
        return {tp: self.ends[tp] for tp in partitions}

    def close(self) -> None:
        pass


def reader(store: MemoryStore, logs: Logs, **options: str) -> ReliableKafkaStreamReader:
    parsed = KafkaSourceOptions.of(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "group.id": "g", "assign": '{"t": [0, 1]}', **options}
    )
    group = GroupStore(store, parse_kafka_params(parsed.group_params()), {}, lambda: None)
    return ReliableKafkaStreamReader(parsed, kafka_schema(False), lookups=logs, group=group)  # type: ignore[arg-type]


def test_the_group_gets_each_batch_s_end_once_spark_committed_it() -> None:
    store = MemoryStore({T0: 5})  # the createStream app's position; it never read partition 1
    logs = Logs({T0: 10, T1: 4})
    source = reader(store, logs, startingOffsets="earliest")

    start = source.initialOffset()
    assert start == {"t": {"0": 5, "1": 0}}
    end = source.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 10, "1": 4}}
    assert store.commits == []  # the start is the group's own; the batch runs next

    logs.ends[T0] = 12  # the batch is in Spark's commit log; the next round plans from its end
    after = source.latestOffset(end, ReadAllAvailable())
    assert store.commits == [{T0: 10, T1: 4}]
    source.commit(end)  # Spark's own hook, for the same batch, a round later
    source.latestOffset(end, ReadAllAvailable())  # an idle round: nothing new for the group
    assert store.commits == [{T0: 10, T1: 4}]
    assert after == {"t": {"0": 12, "1": 4}}


def test_a_failed_commit_is_a_warning_and_is_not_tried_every_round() -> None:
    store = MemoryStore({T0: 0, T1: 0}, fail=True)
    source = reader(store, Logs({T0: 3, T1: 3}))
    end = source.latestOffset(source.initialOffset(), ReadAllAvailable())
    source.latestOffset(end, ReadAllAvailable())
    source.latestOffset(end, ReadAllAvailable())
    assert store.commits == [{T0: 3, T1: 3}]


def test_the_read_limit_bounds_the_batch_and_available_now_the_start_s_ends() -> None:
    logs = Logs({T0: 100, T1: 100})
    source = reader(MemoryStore({T0: 0, T1: 0}), logs, maxOffsetsPerTrigger="50")
    assert source.getDefaultReadLimit() == ReadMaxRows(50)
    source.prepareForTriggerAvailableNow()
    logs.ends = {T0: 200, T1: 200}  # records that came after the query began
    start = source.initialOffset()
    ends = []
    while (end := source.latestOffset(start, ReadMaxRows(50))) != start:
        ends.append(end)
        start = end
    assert ends[-1] == {"t": {"0": 100, "1": 100}} and len(ends) == 4


def test_a_second_initial_offset_is_the_first_one_without_asking_again() -> None:
    store = MemoryStore({T0: 5})
    logs = Logs({T0: 10, T1: 4})
    source = reader(store, logs, startingOffsets="latest")
    first = source.initialOffset()
    store.committed[T1] = 2  # whatever the group or the logs say meanwhile
    logs.ends[T1] = 7
    assert source.initialOffset() == first == {"t": {"0": 5, "1": 4}}
    assert store.fetches == 1

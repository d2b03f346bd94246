"""The source's options alone: what they parse to, and each mistake named before a query starts."""

from __future__ import annotations

import pytest

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.sql.options import KafkaSourceOptions
from reliable_kafka.sql.source_offsets import admitted, from_json, to_json

BROKERS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(**options: str) -> KafkaSourceOptions:
    # As Spark hands them to a Python data source: names lower-cased.
    return KafkaSourceOptions.of({key.lower(): value for key, value in {**BROKERS, **options}.items()})


def test_spark_s_options_and_the_group_s_parse() -> None:
    parsed = parse(
        **{"group.id": "g", "zookeeper.connect": "zk:2181", "offsets.storage": "dual"},
        subscribe="a, b",
        startingOffsets='{"a": {"0": 5, "1": -2}}',
        maxOffsetsPerTrigger="100",
        failOnDataLoss="false",
        includeHeaders="true",
    )
    assert parsed.subscribe == ["a", "b"]
    assert parsed.starting_offsets == {TopicAndPartition("a", 0): 5, TopicAndPartition("a", 1): -2}
    assert (parsed.max_offsets_per_trigger, parsed.fail_on_data_loss, parsed.include_headers) == (
        100,
        False,
        True,
    )
    # The group as createStream takes it; the readers get no ZooKeeper.
    assert parsed.group_params() == {
        "bootstrap.servers": "127.0.0.1:9092",
        "zookeeper.connect": "zk:2181",
        "group.id": "g",
        "offsets.storage": "kafka",
        "dual.commit.enabled": "true",
    }
    assert parsed.reader_params() == {"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}
    assigned = parse(**{"group.id": "g"}, assign='{"t": [1, 0]}')
    assert assigned.assign == [TopicAndPartition("t", 0), TopicAndPartition("t", 1)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"group.id": "g", "subscribe": "t", "maxOffsetsPerTriger": "5"},
            r"unknown option 'maxoffsetspertriger' .*did you mean maxOffsetsPerTrigger\?",
        ),
        ({"subscribe": "t"}, r"option group\.id is required"),
        ({"group.id": "g"}, r"exactly one of subscribe, subscribePattern, assign \(the topics to read\)"),
        (
            {"group.id": "g", "subscribe": "t", "assign": '{"t": [0]}'},
            r"exactly one of .* \(got subscribe, assign\)",
        ),
        (
            {"group.id": "g", "subscribe": "t", "offsets.storage": "zookeeper"},
            r"offsets\.storage=zookeeper needs ZooKeeper",
        ),
        (
            {"group.id": "g", "subscribe": "t", "kafka.group.id": "h"},
            r"kafka\.group\.id is not an option of this source",
        ),
        ({"group.id": "g", "subscribe": "t", "kafka.fetch.max.bytez": "1"}, r"kafka param fetch\.max\.bytez"),
        ({"group.id": "g", "subscribe": "t", "maxOffsetsPerTrigger": "0"}, r"maxOffsetsPerTrigger"),
        (
            {"group.id": "g", "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'},
            r"startingOffsets: t partition '0' offset -3",
        ),
    ],
)
def test_a_mistake_is_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(**options)


def test_the_brokers_are_required() -> None:
    with pytest.raises(ValueError, match=r"kafka\.bootstrap\.servers is required"):
        KafkaSourceOptions.of({"group.id": "g", "subscribe": "t"})


def test_offsets_are_spark_s_kafka_json() -> None:
    offsets = {TopicAndPartition("t", 1): 7, TopicAndPartition("t", 0): 3, TopicAndPartition("a", 0): 0}
    assert to_json(offsets) == {"a": {"0": 0}, "t": {"0": 3, "1": 7}}
    assert from_json(to_json(offsets)) == offsets


T0, T1, T2 = (TopicAndPartition("t", p) for p in range(3))


def test_admission_takes_exactly_the_limit_in_proportion_to_what_waits() -> None:
    start = {T0: 0, T1: 10, T2: 5}
    latest = {T0: 100, T1: 12, T2: 5}  # 100, 2 and 0 waiting
    end = admitted(start, latest, 10)
    assert sum(end[tp] - start[tp] for tp in start) == 10
    assert end == {T0: 10, T1: 10, T2: 5}
    # Shares below one still move: 3 offsets over three partitions with 1000, 1 and 1 waiting.
    end = admitted({T0: 0, T1: 0, T2: 0}, {T0: 1000, T1: 1, T2: 1}, 3)
    assert sum(end.values()) == 3 and all(end[tp] <= {T0: 1000, T1: 1, T2: 1}[tp] for tp in end)
    # Less than the limit waiting: all of it.
    assert admitted(start, latest, 1000) == latest

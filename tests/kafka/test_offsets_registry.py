"""The offsets registry: the one place that turns offsets.storage / dual.commit.enabled into a store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition as TP
from reliable_kafka.kafka.offsets.dual import DualOffsetStore
from reliable_kafka.kafka.offsets.registry import (
    OFFSETS_STORAGES,
    checked_storage,
    default_storage,
    in_kafka,
    in_zookeeper,
    open_store,
    storage_of,
    where,
)
from reliable_kafka.kafka.offsets.store import CommitResult

ZK = {"zookeeper.connect": "zk:2181", "group.id": "g"}
BROKERS = {"bootstrap.servers": "b:9092", "group.id": "g"}


@pytest.mark.parametrize(
    ("params", "storage"),
    [
        (ZK, "zookeeper"),
        ({**ZK, "offsets.storage": "kafka"}, "dual"),  # 0.8.2: dual commit on by default with a ZooKeeper
        ({**ZK, "offsets.storage": "kafka", "dual.commit.enabled": "false"}, "kafka"),
        ({**ZK, "offsets.storage": "zookeeper", "dual.commit.enabled": "true"}, "zookeeper"),
        (BROKERS, "kafka"),
    ],
)
def test_the_storage_a_group_names(params: dict[str, str], storage: str) -> None:
    assert storage_of(parse_kafka_params(params).group) == storage


def test_what_each_storage_reads() -> None:
    assert [(s, in_zookeeper(s), in_kafka(s)) for s in OFFSETS_STORAGES] == [
        ("zookeeper", True, False),
        ("kafka", False, True),
        ("dual", True, True),
    ]
    assert (default_storage(has_zookeeper=True), default_storage(has_zookeeper=False)) == (
        "zookeeper",
        "kafka",
    )
    assert where("dual") == "ZooKeeper and Kafka"
    with pytest.raises(ValueError, match="expected one of zookeeper, kafka, dual"):
        checked_storage("broker")


class NamedStore:
    def __init__(self, name: str, closed: list[str]) -> None:
        self.name, self._closed = name, closed

    def fetch(self, partitions: Iterable[TP]) -> dict[TP, int | None]:
        return dict.fromkeys(partitions)

    def commit(self, offsets: Mapping[TP, int]) -> dict[TP, CommitResult]:
        return dict.fromkeys(offsets, CommitResult.COMMITTED)

    def repair(self, tp: TP, rejected: int, reset_to: int) -> CommitResult:
        return CommitResult.UNCHANGED

    def close(self) -> None:
        self._closed.append(self.name)


class Backends:
    """Builds each backend as a user of the registry would, recording what was built."""

    def __init__(self, kafka_fails: bool = False) -> None:
        self.built: list[str] = []
        self.closed: list[str] = []
        self._kafka_fails = kafka_fails

    def zookeeper(self) -> NamedStore:
        self.built.append("zookeeper")
        return NamedStore("zookeeper", self.closed)

    def kafka(self) -> NamedStore:
        if self._kafka_fails:
            raise ConnectionError("no brokers")
        self.built.append("kafka")
        return NamedStore("kafka", self.closed)


def test_each_storage_is_built_of_its_backends() -> None:
    for storage, built in (
        ("zookeeper", ["zookeeper"]),
        ("kafka", ["kafka"]),
        ("dual", ["zookeeper", "kafka"]),
    ):
        backends = Backends()
        store = open_store(storage, backends)  # type: ignore[arg-type]
        assert backends.built == built
        assert isinstance(store, DualOffsetStore) == (storage == "dual")


def test_a_dual_store_whose_kafka_side_fails_closes_its_zookeeper_side() -> None:
    backends = Backends(kafka_fails=True)
    with pytest.raises(ConnectionError):
        open_store("dual", backends)
    assert backends.closed == ["zookeeper"]

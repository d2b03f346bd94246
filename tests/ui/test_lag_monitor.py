"""The lag monitor's failure path (errors reported, secrets masked, lookups reused within the refresh)
and what a source needs to be read."""

from __future__ import annotations

from typing import Any

import pytest

from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.offsets.registry import storage_of
from reliable_kafka.ui.lag import LagMonitor, LagSource


def source() -> LagSource:
    return LagSource(
        group="g",
        topics=("t",),
        offsets_storage="dual",
        client_config={"bootstrap.servers": "b:9092", "sasl.password": "hunter2"},
        zookeeper_connect="zk:2181",
        zookeeper_auth="user:zk-secret",
    )


def test_errors_are_reported_masked_and_lookups_reused() -> None:
    calls: list[str] = []

    def refuse(s: LagSource) -> Any:
        calls.append(s.group)
        raise ConnectionError("no ZooKeeper; config hunter2 auth user:zk-secret")

    cached = LagMonitor([source()], refresh_ms=3_600_000, connect_zookeeper=refuse)
    first = cached.report()
    assert first.rows == ()
    assert first.errors == ("group g: ConnectionError: no ZooKeeper; config *** auth ***",)
    assert cached.report() is first and calls == ["g"]

    fresh = LagMonitor([source()], refresh_ms=0, connect_zookeeper=refuse)
    fresh.report()
    fresh.report()
    assert calls == ["g", "g", "g"]
    fresh.close()
    cached.close()


def test_repr_keeps_secrets_out() -> None:
    text = repr(source())
    assert "hunter2" not in text and "zk-secret" not in text


def test_a_source_without_zookeeper_reads_kafka_through_bootstrap_servers() -> None:
    kafka_only = {"group": "g", "topics": (), "client_config": {"bootstrap.servers": "b:9092"}}
    assert LagSource(**kafka_only, offsets_storage="kafka").bootstrap_servers == "b:9092"
    for storage in ("zookeeper", "dual"):
        with pytest.raises(ValueError, match="need zookeeper_connect"):
            LagSource(**kafka_only, offsets_storage=storage)
    with pytest.raises(ValueError, match=r"bootstrap\.servers"):
        LagSource(group="g", topics=(), client_config={}, offsets_storage="kafka")
    with pytest.raises(ValueError, match="expected one of"):
        LagSource(**kafka_only, offsets_storage="both", zookeeper_connect="zk:2181")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("params", "storage"),
    [
        ({}, "zookeeper"),
        ({"offsets.storage": "kafka"}, "dual"),  # with a ZooKeeper, Kafka 0.8.2 commits to both
        ({"offsets.storage": "kafka", "dual.commit.enabled": "false"}, "kafka"),
    ],
)
def test_offsets_storage_of_kafka_params(params: dict[str, str], storage: str) -> None:
    parsed = parse_kafka_params(
        {"bootstrap.servers": "b:9092", **params}, zookeeper_connect="zk:2181", group_id="g"
    )
    assert storage_of(parsed.group) == storage

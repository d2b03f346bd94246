"""Kafka params: our 0.8 keys are consumed and validated; the rest goes to confluent-kafka."""

from __future__ import annotations

import logging

import pytest

from reliable_kafka.kafka.params import parse_kafka_params, redacted


def test_defaults_and_passthrough() -> None:
    params = parse_kafka_params(
        {"zookeeper.connect": "zk:2181/kafka", "group.id": "g", "fetch.message.max.bytes": 1048576}
    )
    assert params.zookeeper.connect == "zk:2181/kafka"
    assert params.zookeeper.session_timeout_ms == 6000
    assert params.group.auto_offset_reset == "largest"
    assert params.group.rebalance_max_retries == 4
    assert params.group.rebalance_backoff_ms == 2000
    assert params.group.auto_commit_interval_ms == 60000
    assert params.client_config == {"fetch.message.max.bytes": 1048576}
    assert params.bootstrap_servers is None


def test_consumer_config_reads_by_assign_and_never_commits_to_kafka() -> None:
    params = parse_kafka_params(
        {"auto.offset.reset": "smallest", "enable.auto.commit": "true", "client.id": "x"},
        zookeeper_connect="zk:2181",
        group_id="g",
    )
    config = params.consumer_config("b:9092")
    assert config["bootstrap.servers"] == "b:9092"
    assert config["auto.offset.reset"] == "earliest"
    assert config["enable.auto.commit"] is False
    assert config["enable.auto.offset.store"] is False
    assert config["group.id"] == "g"
    assert config["client.id"] == "x"
    assert params.group.auto_commit_set_by_user


def test_a_partition_that_fell_behind_is_fetched_again_soon_unless_the_user_says_otherwise() -> None:
    default = parse_kafka_params({}, zookeeper_connect="zk:2181", group_id="g")
    assert default.consumer_config("b:9092")["fetch.queue.backoff.ms"] == 20
    chosen = parse_kafka_params({"fetch.queue.backoff.ms": "500"}, zookeeper_connect="zk:2181", group_id="g")
    assert chosen.consumer_config("b:9092")["fetch.queue.backoff.ms"] == "500"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("zookeeper.session.timeout.ms", "soon"),
        ("zookeeper.connection.timeout.ms", "-1"),
        ("auto.offset.reset", "middle"),
        ("auto.commit.enable", "yes"),
        ("auto.commit.interval.ms", "0"),
        ("rebalance.max.retries", "0"),
        ("rebalance.backoff.ms", "x"),
        ("zookeeper.connect", "nohostport"),
        ("offsets.storage", "kafka"),
        ("partition.assignment.strategy", "roundrobin"),
        ("group.id", "a/b"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    base = {"zookeeper.connect": "zk:2181", "group.id": "g"}
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        parse_kafka_params({**base, key: value})


def test_required_and_contradicting_keys() -> None:
    with pytest.raises(ValueError, match=r"zookeeper\.connect"):
        parse_kafka_params({"group.id": "g"})
    with pytest.raises(ValueError, match=r"group\.id"):
        parse_kafka_params({"zookeeper.connect": "zk:2181"})
    with pytest.raises(ValueError, match="contradicts"):
        parse_kafka_params({"group.id": "other"}, zookeeper_connect="zk:2181", group_id="g")


def test_zookeeper_auth_is_never_echoed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    params = parse_kafka_params(
        {"zookeeper.connect": "zk:2181", "group.id": "g", "zookeeper.auth": "u:s3cret"}
    )
    assert params.zookeeper.set_acl
    assert "s3cret" not in repr(params)
    with pytest.raises(ValueError, match=r"zookeeper\.auth") as info:
        parse_kafka_params({"zookeeper.connect": "zk:2181", "group.id": "g", "zookeeper.auth": "s3cret"})
    assert "s3cret" not in str(info.value)
    assert "s3cret" not in caplog.text
    assert redacted({"sasl.password": "p", "client.id": "c"}) == {"sasl.password": "***", "client.id": "c"}


def test_08_only_keys_are_dropped_and_metadata_broker_list_maps_to_bootstrap() -> None:
    params = parse_kafka_params(
        {
            "zookeeper.connect": "zk:2181",
            "group.id": "g",
            "zookeeper.sync.time.ms": "200",
            "metadata.broker.list": "b1:9092,b2:9092",
        }
    )
    assert params.client_config == {"bootstrap.servers": "b1:9092,b2:9092"}

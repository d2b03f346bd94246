"""Pure functions of the ZooKeeper layout: registrations, broker endpoints, topic partitions,
and the per-block offset bookkeeping."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from reliable_kafka.kafka.client.offset_range import OffsetRange, block_metadata, ranges_in_metadata
from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition as TP
from reliable_kafka.kafka.client.zk.broker_discovery import (
    BrokerEndpoint,
    NoBrokersError,
    broker_address,
    broker_endpoints,
    discover_bootstrap_servers,
    legacy_protocol_fallback,
    parse_topic_partitions,
    registration_version,
)
from reliable_kafka.kafka.client.zk.paths import consumer_registration_path, offset_path, owner_path
from reliable_kafka.kafka.offsets.group_member import new_consumer_id
from reliable_kafka.kafka.offsets.zk.group_membership import registration_json, subscription_for
from reliable_kafka.kafka.receiver.block_offsets import BlockOffsetTracker, next_offsets
from reliable_kafka.storage import StreamBlockId


def test_paths_are_kafka_08s() -> None:
    assert consumer_registration_path("g", "c1") == "/consumers/g/ids/c1"
    assert owner_path("g", TP("t", 3)) == "/consumers/g/owners/t/3"
    assert offset_path("g", TP("t", 3)) == "/consumers/g/offsets/t/3"


def test_registration_json_and_consumer_ids() -> None:
    info = json.loads(registration_json({"t": 2}))
    assert info["version"] == 1 and info["subscription"] == {"t": 2} and info["pattern"] == "static"
    assert isinstance(info["timestamp"], str) and info["timestamp"].isdigit()
    assert new_consumer_id("g", "fixed") == "g_fixed"
    generated = new_consumer_id("g")
    assert generated.startswith("g_") and generated != new_consumer_id("g")


def test_subscriptions_of_static_and_wildcard_members() -> None:
    static = registration_json({"a": 2, "other": 1})
    assert subscription_for(static, ["a", "b"]) == {"a": 2}
    white = json.dumps({"version": 1, "subscription": {"a|b.*": 3}, "pattern": "white_list"}).encode()
    assert subscription_for(white, ["a", "bee", "c"]) == {"a": 3, "bee": 3}
    black = json.dumps({"version": 1, "subscription": {"a": 1}, "pattern": "black_list"}).encode()
    assert subscription_for(black, ["a", "c"]) == {"c": 1}
    assert subscription_for(b"not json", ["a"]) == {}


def test_broker_registrations_of_08_and_09() -> None:
    v08 = json.dumps({"version": 1, "host": "h1", "port": 9092, "jmx_port": -1}).encode()
    v09 = json.dumps(
        {"version": 2, "host": "h2", "port": 9092, "endpoints": ["SSL://h2:9093", "PLAINTEXT://h2:9092"]}
    ).encode()
    assert broker_address(v08) == "h1:9092"
    assert broker_address(v09) == "h2:9092"
    assert broker_address(v09, "SSL") == "h2:9093"
    assert broker_address(b"{}") is None


# As Kafka 0.9.0.1 and 3.9.2 register themselves (read from LocalCluster's ZooKeeper).
_REGISTRATION_09 = (
    b'{"jmx_port":-1,"timestamp":"1795479058260","endpoints":["PLAINTEXT://127.0.0.1:54287"],'
    b'"host":"127.0.0.1","version":2,"port":54287}'
)
_REGISTRATION_39 = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
    b'"endpoints":["PLAINTEXT://127.0.0.1:35159"],"jmx_port":-1,"port":35159,"host":"127.0.0.1",'
    b'"version":5,"timestamp":"1795479060515"}'
)
_REGISTRATION_0100 = json.dumps(
    {"version": 3, "host": "h", "port": 9092, "endpoints": ["PLAINTEXT://h:9092"], "rack": None}
).encode()


def test_pre_010_brokers_get_a_protocol_fallback_from_their_registration_version() -> None:
    assert registration_version(_REGISTRATION_09) == 2
    assert registration_version(_REGISTRATION_39) == 5
    assert registration_version(b"not json") is None
    assert registration_version(b'{"version": true}') is None
    assert legacy_protocol_fallback({"0": _REGISTRATION_09}) == "0.9.0.1"
    assert legacy_protocol_fallback({"0": json.dumps({"version": 1, "host": "h", "port": 1}).encode()}) == (
        "0.8.2.2"
    )
    # 0.10.0 answers ApiVersionRequest: nothing to fall back to.
    assert legacy_protocol_fallback({"0": _REGISTRATION_0100, "1": _REGISTRATION_39}) is None
    assert legacy_protocol_fallback({}) is None
    # A rolling upgrade: the oldest broker decides.
    assert legacy_protocol_fallback({"0": _REGISTRATION_39, "1": _REGISTRATION_09}) == "0.9.0.1"


def test_topic_partitions_sorted_numerically() -> None:
    data = json.dumps({"version": 1, "partitions": {"10": [0], "2": [0], "0": [0]}}).encode()
    assert parse_topic_partitions(data) == [0, 2, 10]
    assert parse_topic_partitions(None) == []


def test_offset_tracker_snapshots_each_block_and_tells_when_partitions_are_pushed() -> None:
    tracker = BlockOffsetTracker()
    tracker.add(TP("t", 0), 0, 9)
    tracker.add(TP("t", 1), 5, 5)
    tracker.add(TP("t", 0), 10, 19)
    first = StreamBlockId(0, 1)
    tracker.cut(first)
    tracker.add(TP("t", 0), 20, 29)
    second = StreamBlockId(0, 2)
    tracker.cut(second)
    assert tracker.ranges(first) == [OffsetRange("t", 0, 0, 20), OffsetRange("t", 1, 5, 6)]
    assert tracker.ranges(second) == [OffsetRange("t", 0, 20, 30)]
    assert ranges_in_metadata(block_metadata(tracker.ranges(first))) == tracker.ranges(first)
    assert not tracker.wait_until_pushed([TP("t", 0)], 0.05)
    assert tracker.wait_until_pushed([TP("t", 9)], 0.05)
    threading.Timer(0.05, tracker.done, [first]).start()
    threading.Timer(0.1, tracker.done, [second]).start()
    assert tracker.wait_until_pushed([TP("t", 0), TP("t", 1)], 5)


def test_a_partition_read_again_from_an_earlier_offset_gets_a_range_of_its_own() -> None:
    # The partition came back to this receiver while its old records were still buffered.
    tracker = BlockOffsetTracker()
    tracker.add(TP("t", 0), 100, 149)
    tracker.add(TP("t", 0), 120, 129)
    tracker.add(TP("t", 0), 130, 139)
    tracker.add(TP("t", 0), 145, 160)  # a gap (compaction) extends the span
    block = StreamBlockId(0, 1)
    tracker.cut(block)
    ranges = tracker.ranges(block)
    assert ranges == [OffsetRange("t", 0, 100, 150), OffsetRange("t", 0, 120, 161)]
    assert all(r.fromOffset <= r.untilOffset for r in ranges)
    # Blocks are stored in order, so storing this one makes everything below 161 stored.
    assert next_offsets(ranges) == {TP("t", 0): 161}


def _registration_with_two_listeners() -> bytes:
    # What Kafka 3.9 writes for a broker with an internal and an external listener.
    return json.dumps(
        {
            "version": 5,
            "host": None,
            "port": -1,
            "listener_security_protocol_map": {
                "INTERNAL": "PLAINTEXT",
                "EXTERNAL": "PLAINTEXT",
                "TLS": "SSL",
            },
            "endpoints": ["INTERNAL://kafka-1:19092", "EXTERNAL://127.0.0.1:29092", "TLS://kafka-1:9093"],
        }
    ).encode()


def test_listener_names_are_mapped_to_their_security_protocol() -> None:
    endpoints = broker_endpoints(_registration_with_two_listeners())
    assert [(e.listener, e.security_protocol, e.address) for e in endpoints] == [
        ("INTERNAL", "PLAINTEXT", "kafka-1:19092"),
        ("EXTERNAL", "PLAINTEXT", "127.0.0.1:29092"),
        ("TLS", "SSL", "kafka-1:9093"),
    ]
    registration = _registration_with_two_listeners()
    assert broker_address(registration) == "kafka-1:19092"
    assert broker_address(registration, "PLAINTEXT", "external") == "127.0.0.1:29092"
    assert broker_address(registration, "SSL") == "kafka-1:9093"
    assert broker_address(registration, "SSL", "EXTERNAL") is None


class _Brokers:
    """The two kazoo calls discovery makes, over fixed registrations."""

    def __init__(self, registrations: dict[str, bytes]) -> None:
        self._registrations = registrations

    def get_children(self, _path: str) -> list[str]:
        return list(self._registrations)

    def get(self, path: str) -> tuple[bytes, None]:
        return self._registrations[path.rsplit("/", 1)[1]], None


def _only(*reachable: str) -> Callable[[BrokerEndpoint], str | None]:
    return lambda endpoint: None if endpoint.address in reachable else "Connection refused"


def test_discovery_takes_the_first_reachable_fitting_endpoint_of_each_broker() -> None:
    zk = _Brokers({"0": _registration_with_two_listeners()})
    assert discover_bootstrap_servers(zk, probe=_only("127.0.0.1:29092")) == "127.0.0.1:29092"  # type: ignore[arg-type]
    assert (
        discover_bootstrap_servers(
            zk, "PLAINTEXT", "EXTERNAL", probe=_only("127.0.0.1:29092", "kafka-1:19092")
        )  # type: ignore[arg-type]
        == "127.0.0.1:29092"
    )


def test_discovery_fails_clearly_when_no_endpoint_is_reachable() -> None:
    zk = _Brokers({"0": _registration_with_two_listeners()})
    with pytest.raises(NoBrokersError) as failure:
        discover_bootstrap_servers(zk, probe=_only())  # type: ignore[arg-type]
    message = str(failure.value)
    assert "INTERNAL://kafka-1:19092 (PLAINTEXT): Connection refused" in message
    assert "EXTERNAL://127.0.0.1:29092 (PLAINTEXT): Connection refused" in message
    assert "broker.listener.name" in message and "bootstrap.servers" in message
    with pytest.raises(NoBrokersError, match="no broker is registered"):
        discover_bootstrap_servers(_Brokers({}), probe=_only())  # type: ignore[arg-type]


def test_the_listener_name_is_a_receiver_param_not_a_librdkafka_setting() -> None:
    params = parse_kafka_params(
        {"zookeeper.connect": "zk:2181", "group.id": "g", "broker.listener.name": "EXTERNAL"}
    )
    assert params.listener_name == "EXTERNAL"
    assert "broker.listener.name" not in params.client_config
    assert parse_kafka_params({"zookeeper.connect": "zk:2181", "group.id": "g"}).listener_name is None
    with pytest.raises(ValueError, match=r"broker\.listener\.name must not be empty"):
        parse_kafka_params({"zookeeper.connect": "zk:2181", "group.id": "g", "broker.listener.name": " "})

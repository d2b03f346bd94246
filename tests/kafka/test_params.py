"""Kafka params: our 0.8 keys are consumed and validated; the rest goes to confluent-kafka."""

from __future__ import annotations

import importlib.util
import logging

import pytest
from pyspark import SparkContext

from reliable_kafka.context import StreamingContext
from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.offsets.registry import storage_of
from reliable_kafka.kafka.receiver.kafka_input_dstream import KafkaInputDStream
from reliable_kafka.util.secret_keys import is_secret_key, redacted


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
        ("offsets.storage", "broker"),
        ("dual.commit.enabled", "both"),
        ("partition.assignment.strategy", "roundrobin"),
        ("group.id", "a/b"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    base = {"zookeeper.connect": "zk:2181", "group.id": "g"}
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        parse_kafka_params({**base, key: value})


def test_required_and_contradicting_keys() -> None:
    with pytest.raises(ValueError, match=r"neither zookeeper\.connect \(zkQuorum\) nor bootstrap\.servers"):
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


def test_zookeeper_sasl_login_is_ours_is_never_echoed_and_sets_acls(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    base = {"zookeeper.connect": "zk:2181", "group.id": "g"}
    by_keys = parse_kafka_params(
        {**base, "zookeeper.sasl.username": "alice", "zookeeper.sasl.password": "s3cret", "client.id": "c"}
    )
    by_jaas = parse_kafka_params(
        {
            **base,
            "zookeeper.sasl.jaas.config": (
                "org.apache.zookeeper.server.auth.DigestLoginModule required "
                'username="alice" password="s3cret";'
            ),
        }
    )
    for params in (by_keys, by_jaas):
        assert params.zookeeper is not None and params.zookeeper.sasl is not None
        assert params.zookeeper.sasl.kazoo_options() == {
            "mechanism": "DIGEST-MD5",
            "username": "alice",
            "password": "s3cret",
        }
        assert params.zookeeper.set_acl  # a login makes the group's nodes its own, as zookeeper.auth does
        assert "s3cret" not in repr(params)
        assert not any(key.startswith("zookeeper") for key in params.client_config)  # never librdkafka's
    assert not parse_kafka_params(
        {**base, "zookeeper.sasl.username": "a", "zookeeper.sasl.password": "p", "zookeeper.set.acl": "false"}
    ).zookeeper.set_acl
    for bad, named in (
        ({"zookeeper.sasl.username": "alice"}, r"zookeeper\.sasl\.password"),
        ({"zookeeper.sasl.jaas.config": "s3cret"}, r"zookeeper\.sasl\.jaas\.config"),
        (
            {
                "zookeeper.sasl.username": "a",
                "zookeeper.sasl.password": "s3cret",
                "zookeeper.sasl.mechanism": "GSSAPI",
            },
            "DIGEST-MD5",
        ),
        ({"zookeeper.set.acl": "true"}, r"zookeeper\.sasl\.username"),
    ):
        with pytest.raises(ValueError, match=named) as info:
            parse_kafka_params({**base, **bad})
        assert "s3cret" not in str(info.value)
    assert "s3cret" not in caplog.text
    for key in ("zookeeper.sasl.password", "zookeeper.sasl.jaas.config"):
        assert is_secret_key(key)


def test_a_zookeeper_sasl_login_without_pure_sasl_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "puresasl" else real_find_spec(name, *a)
    )
    params = {"zookeeper.connect": "zk:2181", "group.id": "g", "zookeeper.sasl.username": "a"}
    with pytest.raises(ValueError, match=r"reliable-kafka\[zookeeper-sasl\]"):
        parse_kafka_params({**params, "zookeeper.sasl.password": "p"})


def test_offsets_storage_and_dual_commit_follow_kafka_082_defaults() -> None:
    base = {"zookeeper.connect": "zk:2181", "group.id": "g"}

    def choice(**params: str) -> tuple[str, bool]:
        group = parse_kafka_params({**base, **{k.replace("_", "."): v for k, v in params.items()}}).group
        return group.offsets_storage, group.dual_commit_enabled

    assert choice() == ("zookeeper", False)
    assert choice(offsets_storage="kafka") == ("kafka", True)  # 0.8.2: dual commit on by default
    assert choice(offsets_storage="kafka", dual_commit_enabled="false") == ("kafka", False)
    assert choice(offsets_storage="ZooKeeper", dual_commit_enabled="true") == ("zookeeper", False)
    parsed = parse_kafka_params({**base, "offsets.storage": "kafka"})
    assert storage_of(parsed.group) == "dual"
    # Both are the receiver's, never librdkafka's.
    assert "offsets.storage" not in parsed.client_config
    assert "dual.commit.enabled" not in parsed.client_config


def test_offsets_in_zookeeper_without_a_zk_quorum_name_what_is_missing() -> None:
    for params in (
        {"offsets.storage": "zookeeper"},
        {"offsets.storage": "kafka", "dual.commit.enabled": "true"},
    ):
        with pytest.raises(ValueError, match=r"needs ZooKeeper: no zkQuorum \(zookeeper\.connect\)"):
            parse_kafka_params({"group.id": "g", "bootstrap.servers": "b:9092", **params})


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


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "sasl.username",
        "sasl.jaas.config",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.certificate.pem",
        "ssl.keystore.password",
        "SSL_KEYSTORE_PASSWORD",
        "ssl.keystore.location",
        "sasl.kerberos.keytab",
        "zookeeper.auth",
    ],
)
def test_secret_looking_keys_are_masked(key: str) -> None:
    assert is_secret_key(key)
    assert redacted({key: "value", "client.id": "c"}) == {key: "***", "client.id": "c"}


@pytest.mark.parametrize(
    "key", ["bootstrap.servers", "client.id", "security.protocol", "sasl.mechanisms", "ssl.ca.location"]
)
def test_ordinary_keys_are_shown(key: str) -> None:
    assert not is_secret_key(key)


def test_the_stream_logs_its_client_config_without_secrets(
    spark_context: SparkContext, caplog: pytest.LogCaptureFixture
) -> None:
    params = {
        "zookeeper.connect": "zk:2181",
        "group.id": "g",
        "sasl.username": "alice",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----",
        "sasl.oauthbearer.config": "clientSecret=xyz",
        "sasl.password": "hunter2",
    }
    stream = KafkaInputDStream(StreamingContext(spark_context, 1), params, {"t": 1}, "MEMORY_ONLY")
    caplog.set_level(logging.INFO, logger="reliable_kafka.kafka.receiver.kafka_input_dstream")
    stream.get_receiver()
    assert "client config" in caplog.text
    for secret in ("alice", "BEGIN PRIVATE KEY", "xyz", "hunter2"):
        assert secret not in caplog.text


def test_librdkafka_rejections_name_the_key_and_never_echo_a_secret_value() -> None:
    from reliable_kafka.kafka.client.client_config import check_client_config

    with pytest.raises(ValueError, match=r"^kafka param fetch\.wiat\.max\.ms: No such configuration"):
        check_client_config({"fetch.wiat.max.ms": "100"})
    with pytest.raises(ValueError, match=r"^kafka param security\.protocol: Invalid value"):
        check_client_config({"security.protocol": "PLAINTEXTX"})
    with pytest.raises(ValueError, match="got dict"):
        check_client_config({"fetch.wait.max.ms": {"ms": 100}})
    with pytest.raises(ValueError) as raised:
        check_client_config({"sasl.oauthbearer.method": "hunter2-secret"})
    assert "hunter2" not in str(raised.value)
    check_client_config({"fetch.wait.max.ms": 100, "bootstrap.servers": "127.0.0.1:1"})


def test_without_zookeeper_the_group_coordinator_keeps_the_group() -> None:
    params = parse_kafka_params({"group.id": "g", "bootstrap.servers": "b:9092"})
    assert params.zookeeper is None
    assert params.group.assignment_strategy == "range"
    for strategy in ("range", "roundrobin", "cooperative-sticky"):
        chosen = parse_kafka_params(
            {"group.id": "g", "bootstrap.servers": "b:9092", "partition.assignment.strategy": strategy}
        )
        assert chosen.group.assignment_strategy == strategy
        assert "partition.assignment.strategy" not in chosen.client_config
    with pytest.raises(ValueError, match="expected one of range, roundrobin, cooperative-sticky"):
        parse_kafka_params(
            {"group.id": "g", "bootstrap.servers": "b", "partition.assignment.strategy": "sticky"}
        )
    with pytest.raises(ValueError, match="assigns by range only"):
        parse_kafka_params(
            {"group.id": "g", "zookeeper.connect": "zk:2181", "partition.assignment.strategy": "roundrobin"}
        )

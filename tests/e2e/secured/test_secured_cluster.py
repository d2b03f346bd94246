"""The secured local cluster itself: each mechanism logs alice in, mallory is refused, nothing speaks
PLAINTEXT, the broker's ZooKeeper nodes are its own, and no secret shows in a repr or a world-readable
file."""

from __future__ import annotations

import ast
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kazoo.exceptions import NoAuthError

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.cli import secured_snippet
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from tests.cluster_backends import unique_name
from tests.e2e.helpers import produce

pytestmark = pytest.mark.integration


def _consumer(config: dict[str, Any], group: str) -> Consumer:
    return Consumer(
        {**config, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )


def _read_and_commit(config: dict[str, Any], topic: str, group: str, count: int) -> list[bytes]:
    """Read ``count`` records by assign() (no group join: quick) and commit them to ``group``."""
    consumer = _consumer(config, group)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        for _ in range(60):
            for message in consumer.consume(num_messages=count, timeout=0.5):
                if message.error() is not None:
                    raise KafkaException(message.error())
                values.append(message.value())
            if len(values) >= count:
                break
        consumer.commit(offsets=[TopicPartition(topic, 0, len(values))], asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == len(values)
        return values
    finally:
        consumer.close()


@pytest.mark.brokers("3.9", "4", "0.9")
def test_each_mechanism_logs_alice_in_and_mallory_is_refused(secured_cluster: LocalCluster) -> None:
    topic = unique_name("secured")
    secured_cluster.create_topic(topic)
    sent = [f"v{i}".encode() for i in range(3)]
    produce(secured_cluster, topic, [(None, value, 0) for value in sent])
    settings = secured_cluster.secured
    assert settings.mechanisms == (
        ("SSL",) if secured_cluster.kafka == "0.9" else ("SCRAM-SHA-512", "PLAIN", "OAUTHBEARER", "SSL")
    )

    for mechanism in settings.mechanisms:
        read = _read_and_commit(settings.kafka_params(mechanism), topic, unique_name(mechanism), len(sent))
        assert read == sent, mechanism

    if secured_cluster.kafka == "0.9":
        return  # no authorizer on 0.9 here: mallory's certificate is as good as alice's
    for mechanism in settings.mechanisms:
        consumer = _consumer(settings.kafka_params(mechanism, "mallory"), unique_name("mallory"))
        consumer.subscribe([topic])
        try:
            # The refusal is a message error (librdkafka's FindCoordinator), within a second or so.
            errors = []
            for _ in range(30):
                message = consumer.poll(0.5)
                if message is not None:
                    errors.append(message.error())
                    break
            assert errors and errors[0] is not None, mechanism
            assert errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, (mechanism, errors[0])
        finally:
            consumer.close()


@pytest.mark.brokers("3.9", "4", "0.9")
def test_no_plaintext_no_client_without_a_certificate_and_no_secret_in_sight(
    secured_cluster: LocalCluster,
) -> None:
    settings = secured_cluster.secured
    properties = (secured_cluster.work_dir / "kafka" / "server.properties").read_text()
    listeners = next(line for line in properties.splitlines() if line.startswith("listeners="))
    names = {entry.split("://")[0] for entry in listeners.removeprefix("listeners=").split(",")}
    assert names <= {"SASL_SSL", "SSL", "CONTROLLER"}, listeners
    if "CONTROLLER" in names:
        assert "CONTROLLER:SSL" in properties

    # The SSL listener wants a certificate of our CA: without one, or in plain text, no answer.
    certificate_less = {
        k: v
        for k, v in settings.kafka_params("SSL").items()
        if k not in ("ssl.certificate.location", "ssl.key.location")
    }
    plaintext = {"bootstrap.servers": settings.ssl_servers, **settings.protocol_settings}
    for refused in (certificate_less, plaintext):
        consumer = _consumer(refused, unique_name("refused"))
        try:
            with pytest.raises(KafkaException):
                consumer.list_topics(timeout=2)
        finally:
            consumer.close()

    principal = settings.principals["alice"]
    for shown in (repr(settings), repr(principal), repr(secured_cluster.security)):
        assert principal.password not in shown and principal.zookeeper_password not in shown
    holding_secrets = [*(secured_cluster.work_dir / "security").iterdir()]
    holding_secrets.append(secured_cluster.work_dir / "kafka" / "server.properties")
    assert len(holding_secrets) > 10
    for path in holding_secrets:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


@pytest.mark.brokers("3.9", "0.9")
def test_the_brokers_zookeeper_nodes_are_its_own(secured_cluster: LocalCluster) -> None:
    """zookeeper.set.acl=true with the broker logged in by SASL: its nodes are sasl:kafka's, readable
    by all, writable by it alone."""
    owner = secured_cluster.zookeeper_client()
    anonymous = kazoo_client(secured_cluster.zookeeper_connect, timeout=10.0)
    anonymous.start(timeout=15.0)
    try:
        acls, _ = owner.get_acls("/brokers/topics")
        assert {(acl.id.scheme, acl.id.id) for acl in acls if acl.perms & 0b100} == {("sasl", "kafka")}
        anonymous.get_children("/brokers/topics")  # readable by all, as Kafka's own tools expect
        with pytest.raises(NoAuthError):
            anonymous.create(f"/brokers/topics/{unique_name('intruder')}", b"{}")
    finally:
        stop_kazoo(anonymous)
        stop_kazoo(owner)


@pytest.mark.brokers("3.9", "4")
def test_up_secure_prints_each_mechanisms_params_with_the_secrets_in_a_private_file(
    secured_cluster: LocalCluster, tmp_path: Path
) -> None:
    """What ``reliable-kafka-local up --secure`` prints: pasteable Python, each mechanism's
    kafkaParams masked, the full ones in a 0600 file."""
    settings = secured_cluster.secured
    path = tmp_path / "params.json"
    snippet = secured_snippet(settings, path, [("events", 2)])
    ast.parse(snippet)
    alice = settings.principals["alice"]
    assert alice.password not in snippet and alice.zookeeper_password not in snippet
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_text())
    assert set(saved) == set(settings.mechanisms)
    for mechanism in settings.mechanisms:
        assert f"# {mechanism}: " in snippet
        assert saved[mechanism] == {
            **settings.kafka_params(mechanism),
            **(settings.zookeeper_params() if settings.zookeeper_connect else {}),
        }
    assert ("createStream" if settings.zookeeper_connect else "createDirectStream") in snippet

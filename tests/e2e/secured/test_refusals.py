"""Refused access on the secured local cluster (issue 41, "Bad input"): each refusal ends what it
refuses with one error naming the principal, the mechanism or the resource, and what to grant or
set, within 30 s; never a warning for ever.

Receivers run in-process on a tracker of a fake context (no Spark: the refusal is the receiver's
business); ``access.refusal.timeout.ms`` is short here, its default (10 s) and the streak rule are
the unit tests' (tests/kafka/test_access_refusal.py). One secured cluster for the session."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, OffsetRange
from reliable_kafka.cli import main
from reliable_kafka.kafka import KafkaReceiver
from reliable_kafka.kafka.client.access_refusal import AccessRefusedError
from reliable_kafka.local import LocalCluster
from reliable_kafka.local.certificates import CertificateAuthority
from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.storage import StorageLevel
from reliable_kafka.util.librdkafka_log import with_logger
from tests.cluster_backends import unique_name
from tests.e2e.helpers import produce
from tests.support import wait_until
from tests.support.scheduler_fakes import FakeStream, FakeStreamingContext, quick_settings

pytestmark = pytest.mark.integration

QUICK = {"access.refusal.timeout.ms": "2000"}


def _stream_ends(make: Callable[[], KafkaReceiver]) -> str:
    """The error ``awaitTermination`` raises (within 30 s), checked to end the stream for good."""
    ssc = FakeStreamingContext([FakeStream(0, make)], quick_settings())
    tracker = ssc.receiver_tracker()
    tracker.start()
    try:
        wait_until(lambda: ssc.errors, timeout_s=30, what="one error to reach awaitTermination")
        wait_until(tracker.all_receivers_stopped, what="the receiver to stop for good")
    finally:
        tracker.stop(graceful=False)
    (error,) = ssc.errors
    assert isinstance(error, FatalReceiverError)
    assert tracker.launch_count(0) == 1
    return str(error)


def _grant_topic(cluster: LocalCluster, topic: str, user: str) -> None:
    """``user`` may read and describe ``topic`` (the test's own: nothing else changes)."""
    assert cluster.security is not None
    admin = AdminClient(with_logger(cluster.security.admin_config(cluster.secured.ssl_servers)))
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            f"User:{user}",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for operation in (AclOperation.READ, AclOperation.DESCRIBE)
    ]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(timeout=30)


def _receiver(
    cluster: LocalCluster,
    params: dict[str, Any],
    *,
    zookeeper: bool = False,
    grant_topic_to: str | None = None,
) -> Callable[[], KafkaReceiver]:
    topic = unique_name("refused")
    cluster.create_topic(topic)
    if grant_topic_to is not None:
        _grant_topic(cluster, topic, grant_topic_to)
    quorum = cluster.zookeeper_connect if zookeeper else None
    return lambda: KafkaReceiver(
        quorum, unique_name("refused-group"), {topic: 1}, {**params, **QUICK}, StorageLevel.MEMORY_ONLY
    )


def _without(params: dict[str, str], *keys: str) -> dict[str, str]:
    return {key: value for key, value in params.items() if key not in keys}


@pytest.mark.brokers("3.9", "4")
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "scram-password",
            [
                "Kafka refused the credentials of User:alice (SCRAM-SHA-512 over SASL_SSL",
                "invalid credentials with SASL mechanism SCRAM-SHA-512",
                "Set the right sasl.username and sasl.password in kafkaParams",
                "(refused for ",
            ],
        ),
        (
            "plain-password",
            [
                "Kafka refused the credentials of User:alice (PLAIN over SASL_SSL",
                "Invalid username or password",
            ],
        ),
        (
            "mechanism",
            [
                "the brokers do not offer SASL mechanism SCRAM-SHA-256 to User:alice",
                "broker's supported mechanisms: SCRAM-SHA-512,PLAIN,OAUTHBEARER",
                "add SCRAM-SHA-256 to the brokers' sasl.enabled.mechanisms",
            ],
        ),
        (
            "no-certificate",
            [
                "the brokers refused this client's TLS certificate (SSL, brokers",
                "ssl/tls alert bad certificate",
                "set ssl.certificate.location and ssl.key.location (none is set)",
            ],
        ),
        (
            "untrusted-broker",
            ["this client does not trust the brokers' TLS certificate", "certificate verify failed"],
        ),
        # The JDK answers both with "certificate unknown" (alert 46), never "certificate expired":
        # the message names the file and what the brokers take.
        (
            "unknown-ca-client",
            [
                "the brokers refused this client's TLS certificate (SSL, brokers",
                "ssl/tls alert certificate unknown",
                "valid and signed by a CA in the brokers' ssl.truststore",
                "(now ",
                "other-ca/alice.pem)",
            ],
        ),
        (
            "expired-client",
            [
                "the brokers refused this client's TLS certificate (SSL, brokers",
                "ssl/tls alert certificate unknown",
                "alice-expired.pem)",
            ],
        ),
    ],
)
def test_a_refused_login_ends_the_stream_naming_who_and_what_to_set(
    secured_cluster: LocalCluster, tmp_path: Path, case: str, expected: list[str]
) -> None:
    settings = secured_cluster.secured
    scram, ssl = settings.kafka_params("SCRAM-SHA-512"), settings.kafka_params("SSL")
    if case == "unknown-ca-client":  # alice's name, from a CA the brokers never heard of
        other = CertificateAuthority(tmp_path / "other-ca").issue("alice")
        ssl = {**ssl, "ssl.certificate.location": str(other.certificate), "ssl.key.location": str(other.key)}
    elif case == "expired-client":  # alice's name, from the brokers' own CA, expired in 2020
        assert secured_cluster.security is not None
        old = secured_cluster.security.ca.issue_expired("alice")
        ssl = {**ssl, "ssl.certificate.location": str(old.certificate), "ssl.key.location": str(old.key)}
    params = {
        "scram-password": {**scram, "sasl.password": "not-alices-password"},
        "plain-password": {**settings.kafka_params("PLAIN"), "sasl.password": "not-alices-password"},
        "mechanism": {**scram, "sasl.mechanism": "SCRAM-SHA-256"},
        "no-certificate": _without(ssl, "ssl.certificate.location", "ssl.key.location"),
        "untrusted-broker": _without(scram, "ssl.ca.location"),
        "unknown-ca-client": ssl,
        "expired-client": ssl,
    }[case]

    message = _stream_ends(_receiver(secured_cluster, params))

    for fragment in expected:
        assert fragment in message
    assert settings.principals["alice"].password not in message


@pytest.mark.brokers("3.9", "4")
def test_a_group_the_principal_may_not_read_ends_the_stream_naming_the_acl_to_grant(
    secured_cluster: LocalCluster,
) -> None:
    """Kafka's group coordinator keeps the group: librdkafka reports its refusal once. Mallory may
    read this test's topic (granted here), not its group."""
    make = _receiver(
        secured_cluster,
        secured_cluster.secured.kafka_params("SCRAM-SHA-512", "mallory"),
        grant_topic_to="mallory",
    )

    message = _stream_ends(make)

    assert "Kafka refused User:mallory access to consumer group 'refused-group-" in message
    assert "FindCoordinator response error: Group authorization failed." in message
    assert "--add --allow-principal User:mallory --operation Read --group refused-group-" in message


@pytest.mark.brokers("3.9")
def test_a_topic_the_principal_may_not_read_ends_a_zookeeper_groups_stream(
    secured_cluster: LocalCluster,
) -> None:
    """A ZooKeeper group's fetches of a refused topic say nothing; its metadata says why. The
    coordinator's refusal of a group Kafka does not keep is no reason to end anything."""
    make = _receiver(
        secured_cluster, secured_cluster.secured.kafka_params("SCRAM-SHA-512", "mallory"), zookeeper=True
    )

    message = _stream_ends(make)

    assert "Kafka refused User:mallory access to topic 'refused-" in message
    assert "--operation Read --operation Describe --topic refused-" in message


@pytest.mark.brokers("3.9", "4")
def test_create_rdd_raises_the_refusal_at_the_call(
    secured_cluster: LocalCluster, spark_context: SparkContext
) -> None:
    topic = unique_name("refused-rdd")
    secured_cluster.create_topic(topic)
    produce(secured_cluster, topic, [(None, b"x", 0)] * 3)
    settings = secured_cluster.secured
    wrong = {**settings.kafka_params("SCRAM-SHA-512"), "sasl.password": "not-alices-password"}
    mallory = settings.kafka_params("SCRAM-SHA-512", "mallory")

    with pytest.raises(AccessRefusedError, match="Kafka refused the credentials of User:alice"):
        KafkaUtils.createRDD(spark_context, wrong, [OffsetRange(topic, 0, 0, 3)])
    with pytest.raises(AccessRefusedError, match=f"Kafka refused User:mallory access to topic '{topic}'"):
        KafkaUtils.createRDD(spark_context, mallory, [OffsetRange(topic, 0, 0, 3)])


@pytest.mark.brokers("3.9")
def test_the_lag_command_exits_2_naming_the_refusal(secured_cluster: LocalCluster, tmp_path: Path) -> None:
    """Settings from a properties file (``--command-config``), brokers from ZooKeeper on the
    listener of their ``security.protocol``."""
    settings = secured_cluster.secured
    topic, group = unique_name("refused-lag"), unique_name("refused-lag-group")
    secured_cluster.create_topic(topic)

    def lag(params: dict[str, str]) -> tuple[int, str]:
        config = tmp_path / "client.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in _without(params, "bootstrap.servers").items()))
        err = io.StringIO()
        status = main(
            [
                "lag",
                "--zookeeper",
                secured_cluster.zookeeper_connect,
                "--group",
                group,
                "--topic",
                topic,
                "--command-config",
                str(config),
            ],
            out=io.StringIO(),
            err=err,
        )
        return status, err.getvalue()

    status, said = lag({**settings.kafka_params("SCRAM-SHA-512"), "sasl.password": "not-alices-password"})
    assert status == 2
    assert said.startswith("reliable-kafka lag: access refused: Kafka refused the credentials of User:alice")
    status, said = lag(settings.kafka_params("SCRAM-SHA-512", "mallory"))
    assert status == 2
    assert f"Kafka refused User:mallory access to topic '{topic}'" in said


@pytest.mark.brokers("3.9")
def test_zookeeper_refusing_the_groups_sasl_login_ends_the_stream_naming_the_user(
    secured_cluster: LocalCluster,
) -> None:
    """kazoo's ``start()`` reports CONNECTED; the first call of the session fails (AuthFailedError)."""
    settings = secured_cluster.secured
    zookeeper = {**settings.zookeeper_params("alice"), "zookeeper.sasl.password": "not-alices-password"}
    make = _receiver(secured_cluster, {**settings.kafka_params("SCRAM-SHA-512"), **zookeeper}, zookeeper=True)

    message = _stream_ends(make)

    zookeeper_at = f"ZooKeeper at {secured_cluster.zookeeper_connect}"
    assert f"{zookeeper_at} refused the credentials of SASL (DIGEST-MD5) user 'alice'" in message
    assert "zookeeper.sasl.username and zookeeper.sasl.password" in message
    assert "not-alices-password" not in message


@pytest.mark.brokers("3.9")
def test_a_zookeeper_group_committing_to_kafka_without_the_group_acl_ends_its_stream(
    secured_cluster: LocalCluster,
) -> None:
    """The group's offsets in Kafka (``offsets.storage=kafka``): reading them is refused, an
    answer no restart mends. Mallory may read this test's topic (granted here), not its group."""
    params = {**secured_cluster.secured.kafka_params("SCRAM-SHA-512", "mallory"), "offsets.storage": "kafka"}
    make = _receiver(secured_cluster, params, zookeeper=True, grant_topic_to="mallory")

    message = _stream_ends(make)

    assert "Kafka refused User:mallory access to consumer group 'refused-group-" in message
    assert "--allow-principal User:mallory --operation Read --group refused-group-" in message

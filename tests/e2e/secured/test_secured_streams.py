"""createStream, the direct stream's group commit and createRDD on the secured cluster, each on one
mechanism per broker (between them every mechanism), on the session's SparkContext."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.exceptions import NoAuthError
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, OffsetRange
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import offset_path
from reliable_kafka.local import LocalCluster
from reliable_kafka.local.secured import Mechanism
from reliable_kafka.ui.status_ui import StatusUI
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from tests.cluster_backends import unique_name
from tests.e2e.direct_streams import committing_context
from tests.e2e.helpers import committed_offsets, kafka_committed_offsets, produce
from tests.support import wait_until
from tests.ui.lag_table import page_rows

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_PARTITION = 20
# What each test logs in with, per broker: between them, every mechanism each broker offers.
RECEIVER_ZOOKEEPER: dict[str, Mechanism] = {"3.9": "SCRAM-SHA-512", "0.9": "SSL"}
RECEIVER_KAFKA: dict[str, Mechanism] = {"3.9": "PLAIN", "4": "OAUTHBEARER"}
DIRECT_COMMIT: dict[str, Mechanism] = {"3.9": "SSL", "4": "SCRAM-SHA-512"}
CREATE_RDD: dict[str, Mechanism] = {"3.9": "OAUTHBEARER", "4": "PLAIN", "0.9": "SSL"}


def _topic_with_records(cluster: LocalCluster, prefix: str) -> str:
    topic = unique_name(prefix)
    cluster.create_topic(topic, partitions=PARTITIONS)
    produce(
        cluster,
        topic,
        [(None, f"{p}-{i}".encode(), p) for p in range(PARTITIONS) for i in range(PER_PARTITION)],
    )
    return topic


def _count_stream(make_ssc: Any, create: Any) -> tuple[Any, list[int]]:
    ssc = make_ssc(wal=False)
    counted: list[int] = []
    lock = threading.Lock()

    def add(rdd: Any) -> None:
        n = rdd.count()
        with lock:
            counted.append(n)

    create(ssc).foreachRDD(add)
    ssc.start()
    return ssc, counted


def _every_record_then_commits(make_ssc: Any, create: Any, committed: Callable[[], bool], where: str) -> None:
    """Run the stream ``create`` makes until it counted every record and ``committed()`` holds,
    then stop it gracefully."""
    ssc, counted = _count_stream(make_ssc, create)
    try:
        wait_until(
            lambda: sum(counted) >= PARTITIONS * PER_PARTITION, timeout_s=120, what="every record counted"
        )
        wait_until(committed, timeout_s=60, what=f"the offsets committed to {where}")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    assert sum(counted) == PARTITIONS * PER_PARTITION


@pytest.mark.brokers("3.9", "0.9")
def test_create_stream_keeps_its_group_in_a_sasl_zookeeper_in_nodes_of_its_own(
    secured_cluster: LocalCluster, make_ssc: Any
) -> None:
    """Kafka over TLS, ZooKeeper over SASL (zookeeper.sasl.*): the group's offsets are committed, in
    nodes alice alone may change (everyone may read them, as Kafka's zookeeper.set.acl does)."""
    settings = secured_cluster.secured
    topic, group = _topic_with_records(secured_cluster, "sasl-zk"), unique_name("sasl-zk-group")
    params = {
        **settings.kafka_params(RECEIVER_ZOOKEEPER[secured_cluster.kafka]),
        **settings.zookeeper_params(),
        "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": "300",
    }
    everything = {p: PER_PARTITION for p in range(PARTITIONS)}
    _every_record_then_commits(
        make_ssc,
        lambda ssc: KafkaUtils.createStream(ssc, settings.zookeeper_connect, group, {topic: 1}, params),
        lambda: committed_offsets(secured_cluster, group, topic, PARTITIONS) == everything,
        "ZooKeeper",
    )

    node = offset_path(group, TopicAndPartition(topic, 0))
    anonymous = kazoo_client(secured_cluster.zookeeper_connect, timeout=10.0)
    anonymous.start(timeout=15.0)
    try:
        acls, _ = anonymous.get_acls(node)
        writers = {(acl.id.scheme, acl.id.id) for acl in acls if acl.perms & 0b10}
        assert writers == {("sasl", "alice")}
        assert anonymous.get(node)[0] == str(PER_PARTITION).encode()  # readable by all
        with pytest.raises(NoAuthError):
            anonymous.set(node, b"0")
    finally:
        stop_kazoo(anonymous)


@pytest.mark.brokers("3.9")
def test_create_stream_commits_to_a_sasl_zookeeper_and_to_kafka_while_a_group_migrates(
    secured_cluster: LocalCluster, make_ssc: Any
) -> None:
    """Dual commit (``offsets.storage=kafka`` with a zkQuorum): each offset goes to the SASL
    ZooKeeper first, then to the group coordinator over mTLS; both end at the log end."""
    settings = secured_cluster.secured
    topic, group = _topic_with_records(secured_cluster, "dual"), unique_name("dual-group")
    params = {
        **settings.kafka_params("SSL"),
        **settings.zookeeper_params(),
        "offsets.storage": "kafka",
        "dual.commit.enabled": "true",
        "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": "300",
    }
    everything = {p: PER_PARTITION for p in range(PARTITIONS)}
    _every_record_then_commits(
        make_ssc,
        lambda ssc: KafkaUtils.createStream(ssc, settings.zookeeper_connect, group, {topic: 1}, params),
        lambda: (
            committed_offsets(secured_cluster, group, topic, PARTITIONS) == everything
            and kafka_committed_offsets(secured_cluster, group, topic, PARTITIONS) == everything
        ),
        "ZooKeeper and to Kafka",
    )


@pytest.mark.brokers("3.9", "4")
def test_create_stream_keeps_its_group_in_kafka_over_sasl(
    secured_cluster: LocalCluster, make_ssc: Any
) -> None:
    """No ZooKeeper: the group coordinator of the SASL_SSL listener keeps the members and offsets."""
    settings = secured_cluster.secured
    topic, group = _topic_with_records(secured_cluster, "sasl-kafka"), unique_name("sasl-kafka-group")
    params = {
        **settings.kafka_params(RECEIVER_KAFKA[secured_cluster.kafka]),
        "offsets.storage": "kafka",
        "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": "300",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
    }
    everything = {p: PER_PARTITION for p in range(PARTITIONS)}
    _every_record_then_commits(
        make_ssc,
        lambda ssc: KafkaUtils.createStream(ssc, "", group, {topic: 1}, params),
        lambda: kafka_committed_offsets(secured_cluster, group, topic, PARTITIONS) == everything,
        "Kafka",
    )


@pytest.mark.brokers("3.9", "4")
def test_the_direct_streams_group_commit_and_create_rdd(
    secured_cluster: LocalCluster, spark_context: SparkContext
) -> None:
    """The direct stream commits each completed batch for its group (3.9: to the SASL ZooKeeper; 4: to
    Kafka); createRDD reads exact ranges over another mechanism."""
    settings = secured_cluster.secured
    topic, group = _topic_with_records(secured_cluster, "sasl-direct"), unique_name("sasl-direct-group")
    store = (
        {**settings.zookeeper_params(), "offsets.storage": "zookeeper"} if settings.zookeeper_connect else {}
    )
    params = {
        **settings.kafka_params(DIRECT_COMMIT[secured_cluster.kafka]),
        **store,
        "auto.offset.reset": "smallest",
        "group.id": group,
    }
    params["metadata.broker.list"] = params.pop("bootstrap.servers")
    ssc = committing_context(spark_context)
    counted: list[int] = []
    KafkaUtils.createDirectStream(ssc, [topic], params).foreachRDD(lambda rdd: counted.append(rdd.count()))
    ssc.start()
    # The status page reads the group's lag with the stream's own logins (Kafka's and ZooKeeper's).
    ui = StatusUI.for_context(ssc)
    everything = {p: PER_PARTITION for p in range(PARTITIONS)}
    caught_up = {(group, topic, p): {"committed": str(PER_PARTITION), "log-end": str(PER_PARTITION),
                                     "lag": "0", "owner": "none"} for p in range(PARTITIONS)}  # fmt: skip
    try:
        wait_until(
            lambda: sum(counted) >= PARTITIONS * PER_PARTITION, timeout_s=120, what="every record counted"
        )
        wait_until(
            lambda: committed_offsets(secured_cluster, group, topic, PARTITIONS) == everything,
            timeout_s=60,
            what="the completed batches committed for the group",
        )
        wait_until(
            lambda: page_rows(ui.handle("/", {}).body.decode()) == caught_up,
            timeout_s=60,
            what="the status page showing lag 0",
        )
        shown = ui.handle("/", {}).body + ui.handle("/metrics", {}).body
    finally:
        ui.stop()
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    alice = settings.principals["alice"]
    assert alice.password.encode() not in shown and alice.zookeeper_password.encode() not in shown

    rdd_params = settings.kafka_params(CREATE_RDD[secured_cluster.kafka])
    rdd = KafkaUtils.createRDD(spark_context, rdd_params, [OffsetRange(topic, 1, 5, 8)])
    assert rdd.collect() == [(None, f"1-{i}") for i in range(5, 8)]


@pytest.mark.brokers("0.9")
def test_create_rdd_over_ssl_on_09(secured_cluster: LocalCluster, spark_context: SparkContext) -> None:
    settings = secured_cluster.secured
    topic = _topic_with_records(secured_cluster, "ssl-rdd")
    rdd = KafkaUtils.createRDD(spark_context, settings.kafka_params("SSL"), [OffsetRange(topic, 0, 2, 4)])
    assert rdd.collect() == [(None, "0-2"), (None, "0-3")]

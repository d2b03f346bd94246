"""The compose clusters of docker/ (``--docker``): what only they show, on every broker.

The receiver's main paths run here against the containers, by the same test bodies that run
against the local cluster (called with the compose cluster, one offset store each, to keep CI
short): the 30-message test (3.9 and 0.9 in tests/kafka/test_reliable_receiver.py's docker half, 4
in tests/kafka/test_zookeeper_free_receivers.py's), a receiver SIGKILLed mid-stream, the README's
main job against an existing cluster, and a broker container killed (``docker kill``) and started
again mid-stream. Besides: broker discovery facing a broker registered with a listener the host
cannot reach and one that speaks SASL_SSL (createStream finds the latter for a SASL_SSL client and
reads over it), and the machine's network rule (no bridge network, no docker0).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.kafka.client.zk.broker_discovery import broker_endpoints, discover_bootstrap_servers
from reliable_kafka.settings import ReceiverSettings, StreamingSettings
from tests.cluster_backends import DockerComposeCluster, bridge_networks, unique_name
from tests.e2e import wordcount_example as wordcount
from tests.e2e.helpers import committed_offsets, produce
from tests.kafka import test_receiver_failures as zookeeper_group_failures
from tests.kafka import test_zookeeper_free_receivers as kafka_group
from tests.support import wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.docker_half,
    pytest.mark.brokers("3.9", "4", "0.9"),
    pytest.mark.parametrize("kafka_cluster", ["docker"], indirect=True, scope="session"),
]


@pytest.fixture
def admin_zk(kafka_cluster: DockerComposeCluster) -> Iterator[Any]:
    if not kafka_cluster.has_zookeeper:
        yield None
        return
    zk = kafka_cluster.zookeeper_client()
    yield zk
    zk.stop()
    zk.close()


def test_every_container_is_on_the_host_network_and_no_bridge_exists(
    kafka_cluster: DockerComposeCluster,
) -> None:
    """The machines CI runs on allow loopback addresses only: no bridge network, no docker0."""
    assert bridge_networks() == []
    assert not Path("/sys/class/net/docker0").exists()
    kafka_cluster.assert_host_network_only()


def test_broker_discovery_picks_the_listener_the_host_reaches(kafka_cluster: DockerComposeCluster) -> None:
    host_listener = kafka_cluster.bootstrap_servers
    if not kafka_cluster.has_zookeeper:
        # KRaft: the metadata a client gets through a listener names that listener's address: HOST's
        # for a PLAINTEXT client, SECURED's for one logged in with SCRAM-SHA-512 over TLS.
        secured = kafka_cluster.sasl_ssl_servers
        for config, listener in (
            (kafka_cluster.client_config(), host_listener),
            (kafka_cluster.sasl_ssl_config(**{"bootstrap.servers": secured}), secured),
        ):
            brokers = AdminClient(config).list_topics(timeout=10).brokers
            assert [f"{b.host}:{b.port}" for b in brokers.values()] == [listener]
        return
    zk = kafka_cluster.zookeeper_client()
    try:
        registration = zk.get("/brokers/ids/0")[0]
        found = discover_bootstrap_servers(zk)
    finally:
        zk.stop()
        zk.close()
    addresses = [endpoint.address for endpoint in broker_endpoints(registration)]
    if kafka_cluster.kafka == "0.9":
        assert addresses == [host_listener]  # 0.9: one listener per protocol
    else:
        # INTERNAL first, under a name only the containers resolve; discovery must skip it. SECURED
        # last: it speaks SASL_SSL, not the PLAINTEXT asked for.
        assert addresses == ["kafka-internal:19092", host_listener, kafka_cluster.sasl_ssl_servers], (
            json.loads(registration)
        )
    assert found == host_listener


def test_receiver_sigkill_mid_stream_loses_nothing(
    kafka_cluster: DockerComposeCluster, admin_zk: Any, tmp_path: Path
) -> None:
    if kafka_cluster.has_zookeeper:
        zookeeper_group_failures.test_sigkill_mid_stream_then_a_new_receiver_loses_nothing_and_duplicates_at_most_one_block(
            kafka_cluster, admin_zk, tmp_path, "zookeeper"
        )
    else:
        kafka_group.test_receiver_sigkill_mid_stream_then_a_new_member_loses_nothing_and_duplicates_at_most_one_block(
            kafka_cluster, tmp_path
        )


def test_the_readme_main_job_against_the_compose_cluster(kafka_cluster: DockerComposeCluster) -> None:
    """``[--zookeeper] --bootstrap-servers``: the example's existing-cluster path, its group in
    ZooKeeper (0.9, whose brokers it recognises from their registrations, and 3.9) or in Kafka (4).
    What the local half asserts about the console (no warning on a graceful stop) depends on the
    machine's load, not on the cluster."""
    output = wordcount.run_against_existing_cluster(kafka_cluster, unique_name("wordcount-docker"))
    assert "Kafka 3.9" not in output and "Kafka 4" not in output, "it started a LocalCluster of its own"


@pytest.mark.brokers("3.9")
def test_broker_container_killed_and_started_mid_stream_loses_nothing(
    kafka_cluster: DockerComposeCluster, admin_zk: Any, tmp_path: Path
) -> None:
    """The broker's container SIGKILLed (``docker kill``) and started again under a running receiver."""
    zookeeper_group_failures.test_broker_sigkill_and_restart_mid_stream_the_receiver_recovers_by_itself(
        kafka_cluster, admin_zk, tmp_path
    )


@pytest.mark.brokers("3.9")
def test_create_stream_over_sasl_ssl_finds_the_secured_listener_in_zookeeper_and_reads_everything(
    kafka_cluster: DockerComposeCluster, admin_zk: Any, spark_context: SparkContext
) -> None:
    """security.protocol=SASL_SSL and no bootstrap.servers: of the three listeners the broker
    registers (INTERNAL and HOST speaking PLAINTEXT, SECURED speaking SASL_SSL), discovery finds
    SECURED's address, and createStream's consumers log in there with SCRAM-SHA-512 over TLS (the
    CA of docker/artifacts/security), read every record and commit the group's offsets to ZooKeeper.
    Reading anything proves the listener: HOST would fail the TLS handshake, INTERNAL's name does
    not resolve on the host."""
    assert discover_bootstrap_servers(admin_zk, "SASL_SSL") == kafka_cluster.sasl_ssl_servers
    partitions, per_partition = 2, 20
    topic, group = unique_name("sasl-docker"), unique_name("sasl-docker-group")
    kafka_cluster.create_topic(topic, partitions)
    produce(
        kafka_cluster,
        topic,
        [(None, f"{p}-{i}".encode(), p) for p in range(partitions) for i in range(per_partition)],
    )
    params = {
        **kafka_cluster.sasl_ssl_config(),
        "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": "300",
    }
    assert "bootstrap.servers" not in params
    ssc = StreamingContext(
        spark_context, 1.0, StreamingSettings(receiver=ReceiverSettings(block_interval_ms=200))
    )
    counted: list[int] = []
    lock = threading.Lock()

    def add(rdd: Any) -> None:
        n = rdd.count()
        with lock:
            counted.append(n)

    KafkaUtils.createStream(ssc, kafka_cluster.zookeeper_connect, group, {topic: 1}, params).foreachRDD(add)
    everything = {p: per_partition for p in range(partitions)}
    ssc.start()
    try:
        wait_until(
            lambda: sum(counted) >= partitions * per_partition, timeout_s=120, what="every record counted"
        )
        wait_until(
            lambda: committed_offsets(kafka_cluster, group, topic, partitions) == everything,
            timeout_s=60,
            what="the offsets committed to ZooKeeper",
        )
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    assert sum(counted) == partitions * per_partition

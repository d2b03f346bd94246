"""``reliable-kafka lag`` on the secured cluster (issue 41): settings from a properties file
(``--command-config``, ``-X`` winning), the brokers found in ZooKeeper on the listener of their
``security.protocol``, ZooKeeper read with the group's SASL login; a Kafka group's lag from the
coordinator over SASL_SSL. In-process."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from reliable_kafka.cli import main
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import offset_path
from reliable_kafka.local import LocalCluster
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from reliable_kafka.util.librdkafka_log import with_logger
from tests.cluster_backends import unique_name
from tests.e2e.helpers import produce

pytestmark = pytest.mark.integration


@pytest.mark.brokers("3.9")
def test_the_lag_of_a_zookeeper_group_over_sasl_ssl_from_a_properties_file(
    secured_cluster: LocalCluster, tmp_path: Path
) -> None:
    settings = secured_cluster.secured
    topic, group = unique_name("secured-lag"), unique_name("secured-lag-group")
    secured_cluster.create_topic(topic)
    produce(secured_cluster, topic, [(None, b"x", 0)] * 10)
    zookeeper = settings.zookeeper_params("alice")
    alice = kazoo_client(
        secured_cluster.zookeeper_connect,
        timeout=10.0,
        sasl_options={
            "mechanism": "DIGEST-MD5",
            "username": "alice",
            "password": zookeeper["zookeeper.sasl.password"],
        },
    )
    alice.start(timeout=10.0)
    try:
        alice.create(offset_path(group, TopicAndPartition(topic, 0)), b"4", makepath=True)
    finally:
        stop_kazoo(alice)
    kafka = {k: v for k, v in settings.kafka_params("SCRAM-SHA-512").items() if k != "bootstrap.servers"}
    config = tmp_path / "client.properties"
    lines = {
        **kafka,
        "sasl.password": "overridden-by-X",
        **{k: v for k, v in zookeeper.items() if k.startswith("zookeeper.sasl.")},
    }
    config.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    out, err = io.StringIO(), io.StringIO()

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
            "-X",
            f"sasl.password={kafka['sasl.password']}",
            "--json",
        ],
        out=out,
        err=err,
    )

    assert status == 0, err.getvalue()
    (row,) = json.loads(out.getvalue())["partitions"]
    assert (row["committed"], row["log_end"], row["lag"]) == (4, 10, 6)
    assert kafka["sasl.password"] not in out.getvalue() + err.getvalue()


@pytest.mark.brokers("3.9", "4")
def test_the_lag_of_a_kafka_group_over_sasl_ssl(secured_cluster: LocalCluster, tmp_path: Path) -> None:
    """No ZooKeeper: the group coordinator answers on the SASL_SSL listener, logged in as alice
    (OAUTHBEARER on 4, PLAIN on 3.9), with every setting from ``-X``."""
    settings = secured_cluster.secured
    topic, group = unique_name("secured-kafka-lag"), unique_name("secured-kafka-lag-group")
    secured_cluster.create_topic(topic)
    produce(secured_cluster, topic, [(None, b"x", 0)] * 10)
    params = settings.kafka_params("OAUTHBEARER" if secured_cluster.kafka == "4" else "PLAIN")
    committer = Consumer(with_logger({**params, "group.id": group, "enable.auto.commit": False}))
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    finally:
        committer.close()
    out, err = io.StringIO(), io.StringIO()

    status = main(
        [
            *("lag", "--bootstrap-servers", params["bootstrap.servers"], "--group", group),
            *("--topic", topic, "--json"),
            *(
                arg
                for key, value in params.items()
                if key != "bootstrap.servers"
                for arg in ("-X", f"{key}={value}")
            ),
        ],
        out=out,
        err=err,
    )

    assert status == 0, err.getvalue()
    (row,) = json.loads(out.getvalue())["partitions"]
    assert (row["committed"], row["log_end"], row["lag"]) == (7, 10, 3)

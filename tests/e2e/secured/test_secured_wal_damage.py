"""WAL damage healed from Kafka on the secured cluster (issue 41): test_wal_damage's restart over
a damaged receiver WAL, the stream logged in with SCRAM over SASL_SSL and to ZooKeeper over SASL
(3.9), or with PLAIN over SASL_SSL and its group in Kafka (4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark import SparkContext

from reliable_kafka.local import LocalCluster
from tests.e2e.damaged_wal import restart_over_damaged_wal

pytestmark = pytest.mark.integration


@pytest.mark.brokers("3.9", "4")
def test_damaged_blocks_are_read_again_with_the_streams_login(
    secured_cluster: LocalCluster, spark_context: SparkContext, tmp_path: Path
) -> None:
    """The cluster has no PLAINTEXT listener and refuses whom no ACL allows: the re-read of a
    damaged block reaches Kafka only with the stream's own security settings."""
    settings = secured_cluster.secured
    params = (
        {**settings.kafka_params("SCRAM-SHA-512"), **settings.zookeeper_params()}
        if settings.zookeeper_connect
        else settings.kafka_params("PLAIN")
    )
    restart_over_damaged_wal(secured_cluster, spark_context, tmp_path, settings.zookeeper_connect, params)

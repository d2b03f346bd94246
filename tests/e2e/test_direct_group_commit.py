"""A direct stream's group commit (``StreamingSettings.kafka.commit_completed_batches``): lag tools
see its progress. After a graceful stop, Kafka's ``kafka-consumer-groups --describe`` (the group in
Kafka) and ``reliable-kafka lag`` (the group in ZooKeeper) show lag 0; a failed batch stops the
commits where they were."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka import KafkaUtils
from reliable_kafka.local import LocalCluster
from reliable_kafka.ui.status_ui import StatusUI
from tests.cluster_backends import unique_name
from tests.e2e.direct_streams import committing_context, direct_params
from tests.e2e.helpers import produce
from tests.kafka.kafka_tools import describe_group
from tests.support import wait_until
from tests.ui.cli_command import console_script
from tests.ui.lag_table import page_rows

PARTITIONS = 2
PER_PARTITION = 40


def lag_of(cluster: LocalCluster, group: str) -> list[tuple[int, int]]:
    """``reliable-kafka lag --json`` of a ZooKeeper group: (partition, lag) rows."""
    args = ["lag", "--zookeeper", cluster.zookeeper_connect, "--group", group, "--json"]
    result = subprocess.run(
        [*console_script(), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return [(row["partition"], row["lag"]) for row in json.loads(result.stdout)["partitions"]]


@pytest.mark.brokers("3.9", "4")
def test_after_a_graceful_stop_the_groups_lag_is_zero(
    local_cluster: LocalCluster, spark_context: SparkContext, kafka_version: str
) -> None:
    topic, group = unique_name("direct-commit"), unique_name("direct-group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    produce(local_cluster, topic, [(None, b"x", p) for p in range(PARTITIONS) for _ in range(PER_PARTITION)])
    # 3.9: the group in ZooKeeper (0.8's store, read by reliable-kafka lag); 4: in Kafka.
    store = (
        {"zookeeper.connect": local_cluster.zookeeper_connect, "offsets.storage": "zookeeper"}
        if kafka_version == "3.9"
        else {}
    )
    ssc = committing_context(spark_context)
    stream = KafkaUtils.createDirectStream(
        ssc,
        [topic],
        direct_params(local_cluster, **{"auto.offset.reset": "smallest", "group.id": group}, **store),
    )
    counted: list[int] = []
    stream.foreachRDD(lambda rdd: counted.append(rdd.count()))
    ssc.start()
    # The status page's partition table shows the direct stream's group, as a receiver's.
    ui = StatusUI.for_context(ssc)
    caught_up = {(group, topic, p): {"committed": str(PER_PARTITION), "log-end": str(PER_PARTITION),
                                     "lag": "0", "owner": "none"} for p in range(PARTITIONS)}  # fmt: skip
    try:
        wait_until(
            lambda: sum(counted) >= PARTITIONS * PER_PARTITION, timeout_s=120, what="every record counted"
        )
        wait_until(
            lambda: page_rows(ui.handle("/", {}).body.decode()) == caught_up,
            timeout_s=120,
            what="the status page showing lag 0",
        )
    finally:
        ui.stop()
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    assert sum(counted) == PARTITIONS * PER_PARTITION
    if kafka_version == "3.9":
        assert lag_of(local_cluster, group) == [(p, 0) for p in range(PARTITIONS)]
    else:
        described = describe_group(local_cluster, group)
        for p in range(PARTITIONS):
            row = described[(topic, p)]
            assert (row["CURRENT-OFFSET"], row["LAG"]) == (str(PER_PARTITION), "0"), row


@pytest.mark.brokers("4")
def test_a_failed_batch_stops_the_commits_where_they_were(
    local_cluster: LocalCluster, spark_context: SparkContext
) -> None:
    topic, group = unique_name("direct-commit-fail"), unique_name("direct-group")
    local_cluster.create_topic(topic, partitions=1)
    produce(local_cluster, topic, [(None, b"x", 0) for _ in range(10)])
    ssc = committing_context(spark_context)
    stream = KafkaUtils.createDirectStream(
        ssc, [topic], direct_params(local_cluster, **{"auto.offset.reset": "smallest", "group.id": group})
    )
    batches: list[int] = []

    def output(rdd: Any) -> None:
        n = rdd.count()
        batches.append(n)
        if n and len([b for b in batches if b]) == 2:
            raise RuntimeError("the sink is down")

    stream.foreachRDD(output)
    ssc.start()
    try:
        wait_until(lambda: sum(batches) >= 10, timeout_s=120, what="the first 10 records")
        produce(local_cluster, topic, [(None, b"y", 0) for _ in range(5)])  # the batch that fails
        wait_until(lambda: sum(batches) >= 15, timeout_s=120, what="the failing batch")
        produce(local_cluster, topic, [(None, b"z", 0) for _ in range(5)])  # one after it
        wait_until(lambda: sum(batches) >= 20, timeout_s=120, what="a batch after the failed one")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    described = describe_group(local_cluster, group)
    # The first 10 committed; neither the failed batch's 5 nor the 5 after it.
    assert described[(topic, 0)]["CURRENT-OFFSET"] == "10", described


@pytest.mark.brokers("3.9")
def test_the_commit_without_a_group_id_is_refused_naming_it(
    local_cluster: LocalCluster, spark_context: SparkContext
) -> None:
    ssc = committing_context(spark_context)
    with pytest.raises(ValueError, match=r"group\.id"):
        KafkaUtils.createDirectStream(ssc, ["any"], direct_params(local_cluster))

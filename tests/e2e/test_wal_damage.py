"""Damaged receiver write-ahead log records (issue 10, item 3): a block whose record is corrupt
or torn is read again from Kafka for its exact offset ranges, so a driver restarted with
``getOrCreate`` runs the pending batches with every record; only records Kafka no longer has
fail the batch, with an error listing them. Real ZooKeeper, Kafka and Spark."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark import SparkContext

from reliable_kafka.dstream.batch_rdd import BlockRDD
from reliable_kafka.dstream.block_partition import BlockPartition
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.receiver.block_reread import recovery_source
from reliable_kafka.local import LocalCluster
from reliable_kafka.storage.block_recovery import BlockRecoveryError
from tests.cluster_backends import unique_name
from tests.e2e.damaged_wal import restart_over_damaged_wal
from tests.kafka.harness import produce
from wal import RecordHandle

# On 4.x (KRaft) with no ZooKeeper: the group coordinator keeps the group, and a damaged block is
# read again through bootstrap.servers alone.
pytestmark = [pytest.mark.integration, pytest.mark.brokers("3.9", "4")]


def test_damaged_wal_records_are_read_again_from_kafka_and_every_record_reaches_the_sink(
    local_cluster: LocalCluster, spark_context: SparkContext, tmp_path: Path
) -> None:
    restart_over_damaged_wal(
        local_cluster,
        spark_context,
        tmp_path,
        local_cluster.zookeeper_connect if local_cluster.has_zookeeper else None,
        local_cluster.client_config(),
    )


def test_records_kafka_no_longer_has_fail_the_batch_with_the_lost_ranges(
    local_cluster: LocalCluster, spark_context: SparkContext, tmp_path: Path
) -> None:
    topic = unique_name("walgone")
    local_cluster.create_topic(topic, partitions=1)
    produce(local_cluster.client_config(), topic, 1, 3)
    params = {
        **({"zookeeper.connect": local_cluster.zookeeper_connect} if local_cluster.has_zookeeper else {}),
        "group.id": unique_name("walgone"),
        **local_cluster.client_config(),
    }
    missing = RecordHandle(str(tmp_path / "log-1-2"), 0, 10)
    # Offsets 3..9 were never written: as good as removed by retention for this read.
    source = recovery_source(params, [OffsetRange(topic, 0, 0, 3), OffsetRange(topic, 0, 3, 10)])
    rdd = BlockRDD(spark_context, [[BlockPartition("input-0-1", None, missing, recovery=source)]])
    with pytest.raises(Exception, match=rf"{topic}/0 \[3, 10\)"):
        rdd.collect()
    # The same read on the executor side, without Spark: the error type and message.
    with pytest.raises(BlockRecoveryError, match=rf"records lost: {topic}/0 \[3, 10\)"):
        BlockPartition("input-0-1", None, missing, recovery=source).read()

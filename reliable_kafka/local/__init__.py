"""A real local Kafka (3.9 with ZooKeeper, 4 in KRaft mode, or 0.9), HDFS and S3 store on 127.0.0.1 for
the demo and tests."""

from reliable_kafka.local.cluster import KAFKA_09_CLIENT_CONFIG, LocalCluster, NoZooKeeperError
from reliable_kafka.local.distribution import DEFAULT_KAFKA, KAFKA_KINDS
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.hdfs import LocalHdfs
from reliable_kafka.local.s3 import LocalS3

__all__ = [
    "DEFAULT_KAFKA",
    "KAFKA_09_CLIENT_CONFIG",
    "KAFKA_KINDS",
    "ClusterStartError",
    "LocalCluster",
    "LocalHdfs",
    "LocalS3",
    "NoZooKeeperError",
]

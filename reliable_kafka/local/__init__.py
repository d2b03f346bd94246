"""A real local ZooKeeper + Kafka on 127.0.0.1 for the demo and the integration tests."""

from reliable_kafka.local.cluster import KAFKA_09_CLIENT_CONFIG, LocalCluster
from reliable_kafka.local.errors import ClusterStartError

__all__ = ["KAFKA_09_CLIENT_CONFIG", "ClusterStartError", "LocalCluster"]

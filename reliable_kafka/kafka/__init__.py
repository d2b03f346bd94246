"""Kafka input through consumer groups: Kafka 0.8's ZooKeeper protocol, or Kafka's group coordinator.

``ReliableKafkaReceiver`` (no loss: offsets follow stored blocks) and ``KafkaReceiver``
(periodic auto commit), both on ``ConsumerConnector``: group membership (range assignment in
ZooKeeper when a zkQuorum is given, else ``KafkaGroupMembership`` through the coordinator), one
confluent-kafka consumer per owned partition.
"""

import importlib
from typing import Any

from reliable_kafka.kafka.consumer_connector import ConsumerConnector
from reliable_kafka.kafka.group.membership import KafkaGroupMembership
from reliable_kafka.kafka.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.group_member import RebalanceListener
from reliable_kafka.kafka.kafka_receiver import KafkaReceiver
from reliable_kafka.kafka.offset_range import OffsetRange, block_metadata, ranges_in_metadata
from reliable_kafka.kafka.offset_store import CommitResult, OffsetStore
from reliable_kafka.kafka.params import KafkaParams, parse_kafka_params
from reliable_kafka.kafka.partition_consumer import Record
from reliable_kafka.kafka.reliable_receiver import ReliableKafkaReceiver
from reliable_kafka.kafka.topic_partition import TopicAndPartition
from reliable_kafka.kafka.zk.group_membership import ConsumerRebalanceFailedError, ZookeeperConsumerGroup
from reliable_kafka.kafka.zk.offset_store import CorruptOffsetError, ZooKeeperOffsetStore
from reliable_kafka.kafka.zk.range_assignor import range_assign

# The Spark-facing names load pyspark and the streaming engine; receivers alone need neither.
_LAZY_EXPORTS = {
    "KafkaInputDStream": "reliable_kafka.kafka.kafka_input_dstream",
    "KafkaMessageAndMetadata": "reliable_kafka.kafka.kafka_utils",
    "KafkaUtils": "reliable_kafka.kafka.kafka_utils",
    "LostOffsetsError": "reliable_kafka.kafka.block_reread",
    "RecordDecodeError": "reliable_kafka.kafka.decode_errors",
    "utf8_decoder": "reliable_kafka.kafka.kafka_utils",
}


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "CommitResult",
    "ConsumerConnector",
    "ConsumerRebalanceFailedError",
    "CorruptOffsetError",
    "KafkaGroupMembership",
    "KafkaInputDStream",
    "KafkaMessageAndMetadata",
    "KafkaOffsetStore",
    "KafkaParams",
    "KafkaReceiver",
    "KafkaUtils",
    "LostOffsetsError",
    "OffsetRange",
    "OffsetStore",
    "RebalanceListener",
    "Record",
    "RecordDecodeError",
    "ReliableKafkaReceiver",
    "TopicAndPartition",
    "ZooKeeperOffsetStore",
    "ZookeeperConsumerGroup",
    "block_metadata",
    "parse_kafka_params",
    "range_assign",
    "ranges_in_metadata",
    "utf8_decoder",
]

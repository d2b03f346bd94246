"""Kafka input through consumer groups: Kafka 0.8's ZooKeeper protocol, or Kafka's group coordinator.

``ReliableKafkaReceiver`` (no loss: offsets follow stored blocks) and ``KafkaReceiver``
(periodic auto commit), both on ``ConsumerConnector``: group membership (range assignment in
ZooKeeper when a zkQuorum is given, else ``KafkaGroupMembership`` through the coordinator), one
confluent-kafka consumer per owned partition.
"""

import importlib
from typing import Any

# Every name loads on first use: the rooms below (``kafka.client``, ``kafka.offsets``) must import
# without the receivers, and the Spark-facing names (KafkaUtils, KafkaInputDStream) load pyspark
# and the streaming engine, which receivers alone need neither of.
_LAZY_EXPORTS = {
    "Broker": "reliable_kafka.kafka.direct.broker",
    "CommitResult": "reliable_kafka.kafka.offsets.store",
    "ConsumerConnector": "reliable_kafka.kafka.receiver.consumer_connector",
    "ConsumerRebalanceFailedError": "reliable_kafka.kafka.offsets.zk.group_membership",
    "CorruptOffsetError": "reliable_kafka.kafka.offsets.zk.offset_store",
    "KafkaGroupMembership": "reliable_kafka.kafka.offsets.group.membership",
    "KafkaInputDStream": "reliable_kafka.kafka.receiver.kafka_input_dstream",
    "KafkaMessageAndMetadata": "reliable_kafka.kafka.direct.message_and_metadata",
    "KafkaOffsetStore": "reliable_kafka.kafka.offsets.group.offset_store",
    "KafkaParams": "reliable_kafka.kafka.client.params",
    "KafkaReceiver": "reliable_kafka.kafka.receiver.kafka_receiver",
    "KafkaUtils": "reliable_kafka.kafka.kafka_utils",
    "LostOffsetsError": "reliable_kafka.kafka.client.range_reader",
    "OffsetRange": "reliable_kafka.kafka.client.offset_range",
    "OffsetStore": "reliable_kafka.kafka.offsets.store",
    "RebalanceListener": "reliable_kafka.kafka.offsets.group_member",
    "Record": "reliable_kafka.kafka.receiver.partition_consumer",
    "RecordDecodeError": "reliable_kafka.kafka.receiver.decode_errors",
    "ReliableKafkaReceiver": "reliable_kafka.kafka.receiver.reliable_receiver",
    "TopicAndPartition": "reliable_kafka.kafka.client.topic_partition",
    "ZooKeeperOffsetStore": "reliable_kafka.kafka.offsets.zk.offset_store",
    "ZookeeperConsumerGroup": "reliable_kafka.kafka.offsets.zk.group_membership",
    "block_metadata": "reliable_kafka.kafka.client.offset_range",
    "parse_kafka_params": "reliable_kafka.kafka.client.params",
    "range_assign": "reliable_kafka.kafka.offsets.zk.range_assignor",
    "ranges_in_metadata": "reliable_kafka.kafka.client.offset_range",
    "utf8_decoder": "reliable_kafka.kafka.direct.message_and_metadata",
}


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "Broker",
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

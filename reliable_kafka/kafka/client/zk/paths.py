"""ZooKeeper paths of the Kafka 0.8 high-level consumer (kafka.utils.ZKGroupDirs and friends).

Kept byte-for-byte compatible so that Kafka's own tools (ConsumerOffsetChecker, the 0.8
consumer itself) can read and share what this package writes.
"""

from __future__ import annotations

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

CONSUMERS_PATH = "/consumers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"


def group_dir(group: str) -> str:
    return f"{CONSUMERS_PATH}/{group}"


def consumer_registry_dir(group: str) -> str:
    return f"{group_dir(group)}/ids"


def consumer_registration_path(group: str, consumer_id: str) -> str:
    return f"{consumer_registry_dir(group)}/{consumer_id}"


def owners_topic_dir(group: str, topic: str) -> str:
    return f"{group_dir(group)}/owners/{topic}"


def owner_path(group: str, tp: TopicAndPartition) -> str:
    return f"{owners_topic_dir(group, tp.topic)}/{tp.partition}"


def offsets_topic_dir(group: str, topic: str) -> str:
    return f"{group_dir(group)}/offsets/{topic}"


def offset_path(group: str, tp: TopicAndPartition) -> str:
    return f"{offsets_topic_dir(group, tp.topic)}/{tp.partition}"


def broker_path(broker_id: str) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS_PATH}/{topic}"

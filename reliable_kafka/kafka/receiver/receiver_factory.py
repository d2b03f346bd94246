"""Builds the Kafka receivers from plain data: the factory a receiver descriptor names, called on
the driver (driver placement) or on an executor (executor placement) alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reliable_kafka.kafka.receiver.kafka_receiver import KafkaReceiver
from reliable_kafka.kafka.receiver.reliable_receiver import ReliableKafkaReceiver
from reliable_kafka.receiver.descriptor import ReceiverDescriptor
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.storage.storage_level import StorageLevel

FACTORY = f"{__name__}:kafka_receiver"


def kafka_receiver_descriptor(
    *,
    reliable: bool,
    zookeeper_connect: str | None,
    group_id: str,
    topics: Mapping[str, int],
    kafka_params: Mapping[str, Any],
    storage_level: StorageLevel,
    store_max_attempts: int,
) -> ReceiverDescriptor:
    return ReceiverDescriptor(
        FACTORY,
        {
            "reliable": reliable,
            "zookeeper_connect": zookeeper_connect,
            "group_id": group_id,
            "topics": dict(topics),
            "kafka_params": dict(kafka_params),
            "storage_level": storage_level.to_dict(),
            "store_max_attempts": store_max_attempts,
        },
    )


def kafka_receiver(
    *,
    reliable: bool,
    zookeeper_connect: str | None,
    group_id: str,
    topics: Mapping[str, int],
    kafka_params: Mapping[str, Any],
    storage_level: Mapping[str, Any],
    store_max_attempts: int,
) -> Receiver:
    """Spark's choice: the reliable receiver when the receiver write-ahead log is on."""
    level = StorageLevel.from_dict(dict(storage_level))
    if reliable:
        return ReliableKafkaReceiver(
            zookeeper_connect,
            group_id,
            topics,
            kafka_params,
            level,
            store_max_attempts=store_max_attempts,
        )
    return KafkaReceiver(zookeeper_connect, group_id, topics, kafka_params, level)

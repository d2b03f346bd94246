"""Spark Streaming's reliable, receiver-based Kafka input for PySpark."""

import importlib
from typing import Any

__version__ = "0.1.0"

# Loaded on first use: ``import reliable_kafka`` (the local-cluster CLI, the WAL tools) must not
# start importing pyspark.
_LAZY_EXPORTS = {
    # pyspark.streaming.kafka's names (its __all__), so a 2.4 app changes only its imports.
    "Broker": "reliable_kafka.kafka.direct.broker",
    "KafkaMessageAndMetadata": "reliable_kafka.kafka.direct.message_and_metadata",
    "KafkaUtils": "reliable_kafka.kafka.kafka_utils",
    "OffsetRange": "reliable_kafka.kafka.client.offset_range",
    "TopicAndPartition": "reliable_kafka.kafka.client.topic_partition",
    "utf8_decoder": "reliable_kafka.kafka.direct.message_and_metadata",
    "StreamingContext": "reliable_kafka.context",
    # pyspark's StorageLevel with 2.4's names (MEMORY_AND_DISK_SER_2...) that pyspark 3 dropped.
    "StorageLevel": "reliable_kafka.storage.pyspark_levels",
}

__all__ = [
    "Broker",
    "KafkaMessageAndMetadata",
    "KafkaUtils",
    "OffsetRange",
    "StorageLevel",
    "StreamingContext",
    "TopicAndPartition",
    "__version__",
    "utf8_decoder",
]


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

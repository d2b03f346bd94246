"""Spark Streaming's reliable, receiver-based Kafka input for PySpark."""

import importlib
from typing import Any

__version__ = "0.1.0"

# Loaded on first use: ``import reliable_kafka`` (the local-cluster CLI, the WAL tools) must not
# start importing pyspark.
_LAZY_EXPORTS = {
    "KafkaUtils": "reliable_kafka.kafka.kafka_utils",
    "StreamingContext": "reliable_kafka.context",
}

__all__ = ["KafkaUtils", "StreamingContext", "__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

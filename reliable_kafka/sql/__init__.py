"""Structured Streaming: ``spark.readStream.format("reliable-kafka")``, the stage after ``kafka``.

A query that takes over a ``createStream`` app's consumer group: it starts where the group's
committed offsets are (ZooKeeper or Kafka, as the app kept them), commits each batch's end back
to the group once Spark committed the batch, and reads Spark's Kafka schema. Needs pyspark 4.2 or
later (``version_check``); call :func:`register` once per session::

    import reliable_kafka.sql
    reliable_kafka.sql.register(spark)
    spark.readStream.format("reliable-kafka").option("group.id", "my-group")...

Built on the ``kafka`` stage's public surface (the offset stores, the range reader, the lookups);
nothing under ``kafka/`` imports this package.
"""

from __future__ import annotations

from typing import Any

from reliable_kafka.sql.version_check import UnsupportedPysparkError, check_installed_pyspark

__all__ = ["UnsupportedPysparkError", "register"]


def register(spark: Any) -> None:
    """Registers the ``reliable-kafka`` format with ``spark`` (a ``SparkSession``);
    :class:`UnsupportedPysparkError` naming the installed pyspark when it is older than 4.2."""
    check_installed_pyspark()
    from reliable_kafka.sql.source import ReliableKafkaSource  # noqa: PLC0415  (after the version check)

    spark.dataSource.register(ReliableKafkaSource)

"""A topic-partition, the unit every part of the Kafka input deals in, whichever wing keeps the group."""

from __future__ import annotations

from typing import NamedTuple


class TopicAndPartition(NamedTuple):
    """Kafka 0.8's name for a topic-partition; sorts by topic, then partition.

    pyspark 2.4's class of the same name hashed as ``(topic, partition)`` does, as this one does,
    so dicts keyed by either (``fromOffsets``, ``leaders``) behave alike.
    """

    topic: str
    partition: int

    # pyspark 2.4 kept them under these names; code that read them still works.
    @property
    def _topic(self) -> str:
        return self.topic

    @property
    def _partition(self) -> int:
        return self.partition

    def __str__(self) -> str:
        return f"[{self.topic},{self.partition}]"

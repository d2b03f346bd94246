"""A topic-partition, the unit every part of the Kafka input deals in, whichever wing keeps the group."""

from __future__ import annotations

from typing import NamedTuple


class TopicAndPartition(NamedTuple):
    """Kafka 0.8's name for a topic-partition; sorts by topic, then partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"[{self.topic},{self.partition}]"

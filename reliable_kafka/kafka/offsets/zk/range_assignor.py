"""Kafka 0.8's RangeAssignor: contiguous partition ranges per consumer thread, per topic.

Every member computes the same answer from the same ZooKeeper view, which is why the
ordering rules below must match Kafka's exactly: consumer threads sorted by their string
form ``<consumer_id>-<n>`` (ConsumerThreadId.compare), partitions sorted numerically.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.offsets.group_member import consumer_thread_id

logger = logging.getLogger(__name__)


def consumer_threads_per_topic(subscriptions: Mapping[str, Mapping[str, int]]) -> dict[str, list[str]]:
    """``{consumer_id: {topic: thread count}}`` -> ``{topic: sorted consumer thread ids}``."""
    per_topic: dict[str, list[str]] = {}
    for consumer_id, subscription in subscriptions.items():
        for topic, count in subscription.items():
            per_topic.setdefault(topic, []).extend(consumer_thread_id(consumer_id, i) for i in range(count))
    return {topic: sorted(threads) for topic, threads in per_topic.items()}


def range_assign(
    threads_per_topic: Mapping[str, Sequence[str]],
    partitions_per_topic: Mapping[str, Sequence[int]],
    topics: Sequence[str] | None = None,
) -> dict[TopicAndPartition, str]:
    """The whole group's assignment: topic-partition -> owning consumer thread id.

    ``topics`` limits the computation to the caller's topics, as Kafka does with
    ``myTopicThreadIds``; other topics' partitions are left out.
    """
    assignment: dict[TopicAndPartition, str] = {}
    for topic in sorted(topics if topics is not None else threads_per_topic):
        consumers = sorted(threads_per_topic.get(topic, ()))
        partitions = sorted(partitions_per_topic.get(topic, ()))
        if not consumers:
            continue
        per_consumer, with_extra = divmod(len(partitions), len(consumers))
        for position, thread_id in enumerate(consumers):
            start = per_consumer * position + min(position, with_extra)
            count = per_consumer + (1 if position < with_extra else 0)
            if count <= 0:
                # More threads than partitions; a topic without any is not there at all, which the
                # receiver's missing-topic rule reports (once, not at every rebalance).
                if partitions:
                    logger.warning(
                        "No broker partitions consumed by consumer thread %s for topic %s", thread_id, topic
                    )
                continue
            for partition in partitions[start : start + count]:
                assignment[TopicAndPartition(topic, partition)] = thread_id
    return assignment

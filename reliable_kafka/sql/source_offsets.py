"""The source's offsets: Spark's Kafka JSON, and how much of them one batch may take.

An offset of this source is what Spark's Kafka source writes to a query's offset log,
``{"topic": {"0": 23, "1": 7}}``: per partition, the next offset to read (the end of the batch
that ends there, exclusive). Spark keeps it as JSON in the checkpoint, which is how a restarted
query continues from its own checkpoint, not from the group's offsets; the group gets the same
numbers (``OffsetStore`` keeps next offsets too) after Spark committed the batch.
"""

from __future__ import annotations

from collections.abc import Mapping

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

PartitionOffsets = dict[TopicAndPartition, int]


def to_json(offsets: Mapping[TopicAndPartition, int]) -> dict[str, dict[str, int]]:
    """``{"topic": {"partition": offset}}``, topics and partitions in order."""
    found: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        found.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return found


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {
        TopicAndPartition(topic, int(partition)): int(offset)
        for topic, by_partition in offsets.items()
        for partition, offset in by_partition.items()
    }


def admitted(
    start: Mapping[TopicAndPartition, int], latest: Mapping[TopicAndPartition, int], limit: int
) -> PartitionOffsets:
    """The end of a batch of at most ``limit`` offsets from ``start`` towards ``latest``.

    As Spark's ``maxOffsetsPerTrigger``, each partition gets a share in proportion to what it has
    waiting; unlike Spark's (which rounds a share below one up), the shares add up to exactly
    ``limit`` when more than that waits: the floors first, then one more each to the partitions
    whose shares lost most to the rounding (ties in partition order), so the bound holds and
    every batch moves.
    """
    waiting = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(waiting.values())
    if total <= limit:
        return dict(latest)
    share = {tp: limit * n // total for tp, n in waiting.items()}
    left = limit - sum(share.values())
    by_loss = sorted(waiting, key=lambda tp: (-(limit * waiting[tp] % total), tp))
    for tp in by_loss[:left]:
        share[tp] += 1
    return {tp: start[tp] + share[tp] for tp in latest}

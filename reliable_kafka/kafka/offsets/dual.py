"""Kafka 0.8.2's dual commit: offsets go to ZooKeeper and to Kafka while a group migrates.

A group moving from ZooKeeper to Kafka offsets cannot switch all its members at once: the
old ones read and write ZooKeeper only. Committing to both keeps either view current, and
reading both at start and taking the larger means a member resumes after whatever any member
committed, in either store, so nothing is read twice beyond a block per partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.offsets.store import REFUSED, CommitResult, OffsetStore

# ZooKeeper said this partition is not ours (or someone else is writing it): Kafka must not get it.
_OWNERSHIP_REFUSALS = frozenset({CommitResult.NOT_OWNER, CommitResult.CONFLICT})


def larger_offset(first: int | None, second: int | None) -> int | None:
    """The larger of two stores' offsets for a partition, None only if neither has one: where a
    group that commits to both resumes."""
    if first is None:
        return second
    if second is None:
        return first
    return max(first, second)


def _combined(zookeeper: CommitResult, kafka: CommitResult) -> CommitResult:
    """One answer for the partition: a refusal by either store, else whether anything moved."""
    if zookeeper in REFUSED:
        return zookeeper
    if kafka in REFUSED:
        return kafka
    if CommitResult.COMMITTED in (zookeeper, kafka):
        return CommitResult.COMMITTED
    return CommitResult.UNCHANGED


class DualOffsetStore:
    """Commits to ``zookeeper`` then ``kafka``; fetches both and takes the larger."""

    def __init__(self, zookeeper: OffsetStore, kafka: OffsetStore) -> None:
        self._zookeeper = zookeeper
        self._kafka = kafka

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        tps = list(partitions)
        in_zookeeper = self._zookeeper.fetch(tps)
        in_kafka = self._kafka.fetch(tps)
        return {tp: larger_offset(in_zookeeper.get(tp), in_kafka.get(tp)) for tp in tps}

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        """ZooKeeper first: its owner nodes decide ownership, and Kafka only gets what it allowed.

        A store that stays unreachable raises (after ZooKeeper may have committed): the next
        block's commit brings both up to date again.
        """
        in_zookeeper = self._zookeeper.commit(offsets)
        allowed = {
            tp: offset for tp, offset in offsets.items() if in_zookeeper[tp] not in _OWNERSHIP_REFUSALS
        }
        in_kafka = self._kafka.commit(allowed) if allowed else {}
        return {
            tp: _combined(in_zookeeper[tp], in_kafka[tp]) if tp in in_kafka else in_zookeeper[tp]
            for tp in offsets
        }

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        """Repaired in each store that holds ``rejected`` (the larger of two is all a start sees)."""
        holding = [store for store in (self._zookeeper, self._kafka) if store.fetch([tp]).get(tp) == rejected]
        if not holding:
            return CommitResult.CONFLICT
        outcomes = [store.repair(tp, rejected, reset_to) for store in holding]
        refused = [outcome for outcome in outcomes if outcome in REFUSED]
        if refused:
            return refused[0]
        return CommitResult.COMMITTED if CommitResult.COMMITTED in outcomes else CommitResult.UNCHANGED

    def close(self) -> None:
        try:
            self._kafka.close()
        finally:
            self._zookeeper.close()

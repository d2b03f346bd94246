"""The offset store seam: where a receiver's committed offsets live, whatever keeps them.

Every store holds the NEXT offset to read per partition and obeys two rules that protect the
other members of the group: a committed offset never moves backwards, and a partition this
receiver does not own is never committed. A refusal is reported per partition as a
:class:`CommitResult`, not raised: the caller only loses the chance to skip re-reading.
Knows nothing of Spark.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition


class CommitResult(enum.Enum):
    COMMITTED = "committed"
    UNCHANGED = "unchanged"  # already at exactly this offset
    BACKWARDS = "refused: would move the offset backwards"
    NOT_OWNER = "refused: partition not owned by this consumer"
    CONFLICT = "refused: concurrent writer"


REFUSED = frozenset({CommitResult.BACKWARDS, CommitResult.NOT_OWNER, CommitResult.CONFLICT})


class OffsetStore(Protocol):
    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        """The committed next offset to read of each partition; None where the group has none."""
        ...

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        """Commit next offsets to read; what happened to each partition. Raises when the store
        stays unreachable past its retry bound."""
        ...

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        """Replace ``rejected``, a committed offset the broker called out of range, by ``reset_to``
        (even when lower: an offset past the log end is no position anyone reached)."""
        ...

    def close(self) -> None: ...


def log_refusals(
    logger: logging.Logger,
    offsets: Mapping[TopicAndPartition, int],
    results: Mapping[TopicAndPartition, CommitResult],
    *,
    group: str,
) -> None:
    """One WARNING per partition a store refused to commit, whichever store (``group`` names it)."""
    for tp, result in sorted(results.items()):
        if result in REFUSED:
            logger.warning(
                "offset %d for %s of group %s not committed: %s", offsets[tp], tp, group, result.value
            )


def log_repair(
    logger: logging.Logger,
    result: CommitResult,
    tp: TopicAndPartition,
    *,
    group: str,
    rejected: int,
    reset_to: int,
) -> None:
    """The one WARNING of an out-of-range repair, whichever store made it (``group`` names where)."""
    if result is CommitResult.COMMITTED:
        logger.warning(
            "committed offset %d of %s (group %s) is out of range; replaced by the reset offset %d",
            rejected,
            tp,
            group,
            reset_to,
        )
    else:
        logger.warning(
            "out-of-range offset %d of %s (group %s) not replaced by %d: %s",
            rejected,
            tp,
            group,
            reset_to,
            result.value,
        )

"""A group's offsets in ZooKeeper written by a reader that owns no partitions: a direct stream.

A direct stream joins no group and claims no owner node, so :class:`ZooKeeperOffsetStore`'s
rule (only an owner writes) cannot hold. What still holds, in ZooKeeper itself: an offset never
moves backwards, and a concurrent writer makes a write fail instead of being overwritten (each
write is conditional on the node's version as last read).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.security import ACL

from reliable_kafka.kafka.client.zk.client import ensure_connected, zk_retrying
from reliable_kafka.kafka.client.zk.paths import TopicAndPartition, offset_path, offsets_topic_dir
from reliable_kafka.kafka.offsets.store import CommitResult, log_refusals
from reliable_kafka.kafka.offsets.zk.offset_store import parse_offset

logger = logging.getLogger(__name__)

_CONFLICT_RETRIES = 3


class UnownedZooKeeperOffsets:
    """An :class:`~reliable_kafka.kafka.offsets.store.OffsetStore` for one group, without owner
    checks. The client is the caller's (:meth:`close` leaves it open)."""

    def __init__(
        self, zk: KazooClient, group_id: str, *, acl: list[ACL] | None = None, retry_for_s: float = 10.0
    ) -> None:
        self._zk = zk
        self._group = group_id
        self._acl = acl
        self._retry_for_s = retry_for_s
        self._lock = threading.Lock()

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        retrying = zk_retrying(self._retry_for_s)
        return {tp: retrying(self._read, tp)[0] for tp in partitions}

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        retrying = zk_retrying(self._retry_for_s)
        with self._lock:
            results = {tp: retrying(self._commit_one, tp, offset) for tp, offset in sorted(offsets.items())}
        log_refusals(logger, offsets, results, group=self._group)
        return results

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        raise NotImplementedError("a direct stream reads its own ranges: it never repairs a group's offset")

    def close(self) -> None:
        """The client belongs to the caller."""

    def _read(self, tp: TopicAndPartition) -> tuple[int | None, int]:
        ensure_connected(self._zk)
        path = offset_path(self._group, tp)
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return None, -1
        return parse_offset(path, data), stat.version

    def _commit_one(self, tp: TopicAndPartition, offset: int) -> CommitResult:
        if offset < 0:
            raise ValueError(f"cannot commit negative offset {offset} for {tp}")
        for _ in range(_CONFLICT_RETRIES):
            known, version = self._read(tp)
            if known is not None and offset < known:
                return CommitResult.BACKWARDS
            if known == offset:
                return CommitResult.UNCHANGED
            value = str(offset).encode("ascii")
            try:
                if known is None:
                    self._zk.ensure_path(offsets_topic_dir(self._group, tp.topic), acl=self._acl)
                    self._zk.create(offset_path(self._group, tp), value, acl=self._acl)
                else:
                    self._zk.set(offset_path(self._group, tp), value, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another writer came between the read and the write: read again
            return CommitResult.COMMITTED
        return CommitResult.CONFLICT

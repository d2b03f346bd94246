"""Committed offsets at ``/consumers/<group>/offsets/<topic>/<partition>``, as Kafka 0.8 kept them.

The value is the NEXT offset to read, in ASCII decimal. Two rules protect other members of
the group: an offset never moves backwards, and a partition this consumer does not own is
never written. Both are enforced in ZooKeeper itself, by one multi-op per commit that checks
the owner node's version and writes the offset node at the version last read, so a
concurrent writer makes the commit fail instead of being overwritten.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.security import ACL

from reliable_kafka.kafka.client.zk.client import ensure_connected, zk_retrying
from reliable_kafka.kafka.client.zk.paths import TopicAndPartition, offset_path, offsets_topic_dir, owner_path
from reliable_kafka.kafka.offsets.store import REFUSED, CommitResult, log_refusals, log_repair
from reliable_kafka.kafka.offsets.zk.ownership import Claim, OwnershipView, valid_claim
from reliable_kafka.util import instruments

logger = logging.getLogger(__name__)

# A lost race with another writer is retried a few times from fresh reads; more than that
# means someone else is actively writing the partition, which only an owner may do.
_CONFLICT_RETRIES = 3


class CorruptOffsetError(ValueError):
    """An offset node holds something other than an ASCII decimal."""


@dataclass(frozen=True)
class _Known:
    offset: int | None  # None: the node does not exist
    version: int


def parse_offset(path: str, data: bytes) -> int:
    try:
        offset = int(data.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise CorruptOffsetError(f"{path} holds {data[:40]!r}, not an offset") from None
    if offset < 0:
        raise CorruptOffsetError(f"{path} holds a negative offset {offset}")
    return offset


class ZooKeeperOffsetStore:
    """Reads and commits one group's offsets; commits are checked against ``ownership``.

    An :class:`~reliable_kafka.kafka.offsets.store.OffsetStore`.
    """

    def __init__(
        self,
        zk: KazooClient,
        group_id: str,
        ownership: OwnershipView,
        *,
        acl: list[ACL] | None = None,
        retry_for_s: float = 10.0,
        stop_event: threading.Event | None = None,
    ) -> None:
        self._zk = zk
        self._group = group_id
        self._ownership = ownership
        self._acl = acl
        self._retry_for_s = retry_for_s
        self._stop_event = stop_event
        # Offset and node version as this store last saw them. Only an owner writes, so for
        # owned partitions this cache is current; a failed multi-op invalidates it.
        self._known: dict[TopicAndPartition, _Known] = {}
        self._topic_dirs: set[str] = set()
        self._lock = threading.Lock()  # one commit at a time keeps the cache coherent

    # -- reads ------------------------------------------------------------------------------

    def _read_known(self, tp: TopicAndPartition) -> _Known:
        ensure_connected(self._zk)
        path = offset_path(self._group, tp)
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return _Known(None, -1)
        return _Known(parse_offset(path, data), stat.version)

    def read(self, tp: TopicAndPartition) -> int | None:
        """The committed next-offset-to-read of ``tp``, or None if the group never committed one."""
        known = zk_retrying(self._retry_for_s, stop_event=self._stop_event)(self._read_known, tp)
        with self._lock:
            self._known[tp] = known
        return known.offset

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        return {tp: self.read(tp) for tp in partitions}

    # -- commits ----------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        """Commit next offsets to read; returns what happened to each partition.

        Connection loss is retried for ``retry_for_s``; then it raises, and the caller decides
        (a commit that did not happen only costs re-reading data after a failure). No lock is held
        across a ZooKeeper call or the backoff between attempts: the versioned writes, not the
        lock, keep two commits of one partition from passing each other.
        """
        if not offsets:
            return {}
        for tp, offset in offsets.items():
            if offset < 0:
                raise ValueError(f"cannot commit negative offset {offset} for {tp}")
        retrying = zk_retrying(self._retry_for_s, stop_event=self._stop_event)
        started = time.perf_counter()
        try:
            results = retrying(self._commit_attempt, dict(offsets))
        except Exception:
            instruments.OFFSET_COMMIT_FAILURES.inc()
            raise
        finally:
            instruments.OFFSET_COMMIT_SECONDS.observe(time.perf_counter() - started)
        if any(result in REFUSED for result in results.values()):
            instruments.OFFSET_COMMIT_FAILURES.inc()
        return results

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        """Replace a committed offset the broker rejected as out of range by the reset offset.

        The never-backwards rule guards our own commits; an offset past the log end is not a
        position anyone reached, and keeping it would refuse every later commit, so the node is
        rewritten even when ``reset_to`` is lower. Still only by the owner, and only if the
        node still holds ``rejected``.
        """
        retrying = zk_retrying(self._retry_for_s, stop_event=self._stop_event)
        result = retrying(self._repair_once, tp, rejected, reset_to)
        log_repair(logger, result, tp, group=self._group, rejected=rejected, reset_to=reset_to)
        return result

    def _repair_once(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        ensure_connected(self._zk)
        with self._ownership.ownership_lock:
            if self._valid_claim(tp) is None:
                return CommitResult.NOT_OWNER
        known = self._read_known(tp)
        with self._lock:
            self._known[tp] = known
        if known.offset == reset_to:
            return CommitResult.UNCHANGED
        if known.offset != rejected:
            return CommitResult.CONFLICT
        with self._ownership.ownership_lock:
            claim = self._valid_claim(tp)
            if claim is None:
                return CommitResult.NOT_OWNER
            transaction = self._zk.transaction()
            transaction.check(owner_path(self._group, tp), claim.owner_version)
            value = str(reset_to).encode("ascii")
            transaction.set_data(offset_path(self._group, tp), value, version=known.version)
            # Queued on the session while the claim holds: a release's owner-node delete, queued
            # later on the same session, is applied after it. The answer is awaited unlocked.
            sent = transaction.commit_async()
        errors = [item for item in sent.get() if isinstance(item, Exception)]
        if not errors:
            with self._lock:
                self._known[tp] = _Known(reset_to, known.version + 1)
            return CommitResult.COMMITTED
        with self._lock:
            self._known.pop(tp, None)
        real = [e for e in errors if not isinstance(e, RolledBackError)]
        if any(not isinstance(e, BadVersionError | NoNodeError) for e in real):
            raise real[0]
        return self._diagnose(tp)

    def close(self) -> None:
        """Nothing to release: the ZooKeeper client belongs to the group membership."""

    def _ensure_topic_dir(self, topic: str) -> None:
        directory = offsets_topic_dir(self._group, topic)
        if directory not in self._topic_dirs:
            self._zk.ensure_path(directory, acl=self._acl)
            self._topic_dirs.add(directory)

    def _commit_attempt(self, offsets: dict[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        ensure_connected(self._zk)
        results: dict[TopicAndPartition, CommitResult] = {}
        pending = dict(offsets)
        for _ in range(_CONFLICT_RETRIES):
            if not pending:
                break
            outcome = self._try_commit(pending)
            results.update(outcome)
            pending = {tp: offset for tp, offset in pending.items() if outcome[tp] is CommitResult.CONFLICT}
        log_refusals(logger, offsets, results, group=self._group)
        return results

    def _valid_claim(self, tp: TopicAndPartition) -> Claim | None:
        client_id = self._zk.client_id
        return valid_claim(self._ownership, client_id[0] if client_id is not None else None, tp)

    def _read_unknown(self, offsets: Mapping[TopicAndPartition, int]) -> None:
        """Reads (unlocked) the offsets this store has not seen, for :meth:`_plan`."""
        with self._lock:
            unknown = [tp for tp in offsets if tp not in self._known]
        for tp in unknown:
            known = self._read_known(tp)
            with self._lock:
                self._known.setdefault(tp, known)
        for topic in {tp.topic for tp in offsets}:
            self._ensure_topic_dir(topic)

    def _plan(
        self, offsets: dict[TopicAndPartition, int]
    ) -> tuple[dict[TopicAndPartition, CommitResult], dict[TopicAndPartition, tuple[Claim, _Known, int]]]:
        """Refusals decided locally, and the writes that remain (no ZooKeeper call: both locks held)."""
        results: dict[TopicAndPartition, CommitResult] = {}
        writes: dict[TopicAndPartition, tuple[Claim, _Known, int]] = {}
        for tp, offset in offsets.items():
            claim = self._valid_claim(tp)
            if claim is None:
                results[tp] = CommitResult.NOT_OWNER
                continue
            known = self._known.get(tp)
            if known is None:  # dropped by a concurrent failed write since it was read: read again
                results[tp] = CommitResult.CONFLICT
            elif known.offset is not None and offset < known.offset:
                results[tp] = CommitResult.BACKWARDS
            elif known.offset == offset:
                results[tp] = CommitResult.UNCHANGED
            else:
                writes[tp] = (claim, known, offset)
        return results, writes

    def _try_commit(self, offsets: dict[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        """One multi-op for every partition that still needs writing."""
        self._read_unknown(offsets)
        with self._lock, self._ownership.ownership_lock:
            results, writes = self._plan(offsets)
            if not writes:
                return results
            transaction = self._zk.transaction()
            for tp, (claim, known, offset) in writes.items():
                transaction.check(owner_path(self._group, tp), claim.owner_version)
                value = str(offset).encode("ascii")
                if known.offset is None:
                    transaction.create(offset_path(self._group, tp), value, acl=self._acl)
                else:
                    transaction.set_data(offset_path(self._group, tp), value, version=known.version)
            # Queued on the session while the claims hold: a release's owner-node delete, queued
            # later on the same session, is applied after it (ZooKeeper keeps a session's order).
            # The answer is awaited with no lock held.
            sent = transaction.commit_async()
        outcome = sent.get()
        errors = [item for item in outcome if isinstance(item, Exception)]
        if not errors:
            with self._lock:
                for tp, (_, known, offset) in writes.items():
                    self._known[tp] = _Known(offset, known.version + 1 if known.offset is not None else 0)
                    results[tp] = CommitResult.COMMITTED
            return results
        real = [e for e in errors if not isinstance(e, RolledBackError)]
        if any(not isinstance(e, BadVersionError | NoNodeError | NodeExistsError) for e in real):
            raise real[0]
        # The multi-op is all or nothing; learn afresh which partition broke it, so that a
        # good one is retried rather than held back.
        with self._lock:
            for tp in writes:
                self._known.pop(tp, None)
        for tp in writes:
            results[tp] = self._diagnose(tp)
        return results

    def _diagnose(self, tp: TopicAndPartition) -> CommitResult:
        """After a failed multi-op: not the owner any more, or just a stale cache (retry)."""
        claim = self._valid_claim(tp)
        if claim is None:
            return CommitResult.NOT_OWNER
        try:
            owner_data, owner_stat = self._zk.get(owner_path(self._group, tp))
        except NoNodeError:
            return CommitResult.NOT_OWNER
        if (
            owner_data.decode("utf-8", "replace") != claim.thread_id
            or owner_stat.ephemeralOwner != claim.session_id
            or owner_stat.version != claim.owner_version
        ):
            return CommitResult.NOT_OWNER
        return CommitResult.CONFLICT

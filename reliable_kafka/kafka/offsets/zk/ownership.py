"""What this consumer owns right now, as the offset store needs to see it.

A claim is only good for the ZooKeeper session that created its ephemeral owner node and
for the ownership generation it was made in; the group bumps the generation the moment
it learns the session is gone, before anything else can run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from reliable_kafka.kafka.client.zk.paths import TopicAndPartition
from reliable_kafka.kafka.offsets.store import CommitResult, OffsetStore


@dataclass(frozen=True)
class Claim:
    thread_id: str
    owner_version: int
    session_id: int
    generation: int


class OwnershipView(Protocol):
    """Read side of partition ownership, with the lock that releases wait on."""

    @property
    def ownership_lock(self) -> AbstractContextManager[bool]: ...

    @property
    def generation(self) -> int: ...

    def claim_of(self, tp: TopicAndPartition) -> Claim | None: ...


def valid_claim(view: OwnershipView, session_id: int | None, tp: TopicAndPartition) -> Claim | None:
    """``tp``'s claim if it still holds: made in this session (``session_id``) and generation."""
    claim = view.claim_of(tp)
    if claim is None or session_id is None:
        return None
    # A claim from an earlier session or generation is void: its owner node died with it.
    if claim.session_id != session_id or claim.generation != view.generation:
        return None
    return claim


class OwnershipGuardedStore:
    """Runs another offset store's writes under the ownership lock, as ZooKeeper's own store does.

    A store that cannot check ownership inside its write (Kafka's, which asks a predicate first)
    would otherwise let a commit land after the partition was released; holding the lock makes
    a release wait for a commit in flight, so none passes after it.
    """

    def __init__(self, store: OffsetStore, view: OwnershipView) -> None:
        self._store = store
        self._view = view

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        return self._store.fetch(partitions)

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        with self._view.ownership_lock:
            return self._store.commit(offsets)

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        with self._view.ownership_lock:
            return self._store.repair(tp, rejected, reset_to)

    def close(self) -> None:
        self._store.close()

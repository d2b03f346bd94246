"""What this consumer owns right now, as the offset store needs to see it.

A claim is only good for the ZooKeeper session that created its ephemeral owner node and
for the ownership generation it was made in; the group bumps the generation the moment
it learns the session is gone, before anything else can run.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
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


# How long a release waits for the commits already out for its partitions: one attempt of a
# store's request (a standalone Kafka commit gives up an attempt after 10 s), never its retries.
DEFAULT_RELEASE_WAIT_S = 15.0


class CommitsInFlight:
    """The commits out to a store, per partition, and a bounded wait for them to end.

    A release withdraws its claims at once (under the ownership lock, for a moment) and then waits
    here for the commits already out for those partitions, at most ``bound_s``. Nothing is held
    while a commit is out: it may be a ZooKeeper write and a Kafka commit, each retried with
    backoff, and the stores ask for ownership again before each attempt, so once the claims are
    withdrawn what is left to wait for is the attempt in progress.
    """

    def __init__(
        self, lock: threading.RLock | threading.Lock, bound_s: float = DEFAULT_RELEASE_WAIT_S
    ) -> None:
        self._changed = threading.Condition(lock)
        self._out: collections.Counter[TopicAndPartition] = collections.Counter()
        self.bound_s = bound_s

    @contextmanager
    def out(self, partitions: Iterable[TopicAndPartition]) -> Iterator[None]:
        """Counts a commit of ``partitions`` as out while the block runs."""
        tps = list(partitions)
        with self._changed:
            self._out.update(tps)
        try:
            yield
        finally:
            with self._changed:
                self._out.subtract(tps)
                self._out = +self._out  # drops the partitions with nothing out
                self._changed.notify_all()

    def wait_for(self, partitions: Iterable[TopicAndPartition]) -> bool:
        """True once no commit of ``partitions`` is out; False when ``bound_s`` passed first."""
        tps = set(partitions)
        with self._changed:
            return self._changed.wait_for(lambda: not any(self._out[tp] for tp in tps), self.bound_s)


class ReleaseFence(Protocol):
    """What a store wrapped for a group needs of it: where to count its commits as out."""

    @property
    def commits_in_flight(self) -> CommitsInFlight: ...


class OwnershipGuardedStore:
    """Counts another offset store's writes as in flight, so that a release waits for them.

    A store that cannot check ownership inside its write (Kafka's, which asks a predicate before
    each attempt) could otherwise land a commit after the partition was released. The release
    waits for the commits out (:class:`CommitsInFlight`, bounded by one attempt) instead of the
    commit holding the ownership lock across its ZooKeeper write and Kafka commit, which made a
    release or a revoke wait out every retry and backoff of both.
    """

    def __init__(self, store: OffsetStore, fence: ReleaseFence) -> None:
        self._store = store
        self._fence = fence

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        return self._store.fetch(partitions)

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        with self._fence.commits_in_flight.out(offsets):
            return self._store.commit(offsets)

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        with self._fence.commits_in_flight.out([tp]):
            return self._store.repair(tp, rejected, reset_to)

    def close(self) -> None:
        self._store.close()

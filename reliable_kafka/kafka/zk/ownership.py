"""What this consumer owns right now, as the offset store needs to see it.

A claim is only good for the ZooKeeper session that created its ephemeral owner node and
for the ownership generation it was made in; the group bumps the generation the moment
it learns the session is gone, before anything else can run.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from reliable_kafka.kafka.zk.paths import TopicAndPartition


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

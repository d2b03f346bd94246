"""A consumer group an input stream reads for, as lag tools watch it: the status page asks each
input stream for one (:class:`WatchesGroup`) instead of testing for the stream classes it knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reliable_kafka.kafka.client.params import KafkaParams
from reliable_kafka.kafka.offsets.registry import OffsetsStorage, storage_of


@dataclass(frozen=True)
class WatchedGroup:
    params: KafkaParams  # the group, its ZooKeeper (None: the coordinator keeps it all)
    topics: tuple[str, ...]
    # How to reach the brokers; may hold secrets, so kept out of repr.
    client_config: Mapping[str, Any] = field(repr=False)
    # The input streams whose receivers own the group's partitions (none for a direct stream).
    receiver_stream_ids: tuple[int, ...] = ()

    @property
    def storage(self) -> OffsetsStorage:
        return storage_of(self.params.group)


@runtime_checkable
class WatchesGroup(Protocol):
    def watched_group(self) -> WatchedGroup | None:
        """The group this stream reads for, if it keeps offsets in one; None otherwise."""
        ...

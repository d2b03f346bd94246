"""What a member of a consumer group is, whichever wing keeps the group (ZooKeeper or the group
coordinator): its id, its consumer threads' ids, and the listener told of its partitions."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Mapping
from typing import Protocol

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition


class RebalanceListener(Protocol):
    """Told about ownership changes, on the group's rebalance thread."""

    def on_partitions_revoked(self, partitions: list[TopicAndPartition]) -> None:
        """Stop consuming these and return once stopped; they are still owned meanwhile,
        except after a session loss, when their claims are already void."""

    def on_partitions_assigned(self, partitions: Mapping[TopicAndPartition, str]) -> None:
        """Start consuming these (value: the consumer thread id that owns each)."""

    def on_rebalance_failed(self, error: BaseException) -> None:
        """Every attempt failed; this member now owns nothing until the next change."""

    def on_session_suspended(self) -> None:
        """The connection to ZooKeeper dropped: ownership is uncertain and no commit can pass
        until it is back, so stop taking in records. On kazoo's connection thread: must not block."""

    def on_session_resumed(self) -> None:
        """Connected again in the same session: every claim still holds, resume what was paused.
        Not called when the session was lost meanwhile: those partitions are revoked instead."""


def new_consumer_id(group_id: str, consumer_id: str | None = None) -> str:
    """``<group>_<host>-<millis>-<uuid8>`` as 0.8 builds it, or ``<group>_<consumer.id>``."""
    if consumer_id:
        return f"{group_id}_{consumer_id}"
    return f"{group_id}_{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"


def consumer_thread_id(consumer_id: str, thread: int) -> str:
    return f"{consumer_id}-{thread}"

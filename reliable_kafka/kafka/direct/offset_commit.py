"""Beyond pyspark 2.4: a direct stream's completed batches committed to its group's offsets.

A direct stream keeps its position in the checkpoint, not in a consumer group, so lag tools
(``kafka-consumer-groups``, Burrow, ``reliable-kafka lag``, the status page) see nothing of it
(SPARK-27549). With ``StreamingSettings.kafka.commit_completed_batches`` and a ``group.id`` in
``kafkaParams``, every batch whose output operations all succeeded has its ranges' ends committed
to the group's store, as the offsets registry picks it: Kafka's group coordinator, ZooKeeper
(``offsets.storage=zookeeper``, which needs ``zookeeper.connect``), or both
(``dual.commit.enabled``). This is for watching only: the stream never reads these offsets
back (a restart continues from the checkpoint).

The rules: a batch's commit comes only after it completed; an offset never moves backwards;
after a failed batch nothing more is committed by this run (a later batch's offsets would skip
the failed one's records as far as the group shows). Commits run on a thread of their own, the
latest offsets replacing older ones not yet written, so a slow store never holds up a batch; the
stream's stop writes what is left, within a bound.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.params import KafkaParams, parse_kafka_params
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.client import close_zookeeper, connect_zookeeper, zookeeper_acl
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.registry import in_zookeeper, open_store, storage_of
from reliable_kafka.kafka.offsets.store import OffsetStore
from reliable_kafka.kafka.offsets.zk.unowned_offsets import UnownedZooKeeperOffsets

logger = logging.getLogger(__name__)

# What the stop tries when the store fails it, before it leaves the offsets where they were.
_RETRIES_AT_STOP = 3
_RETRY_PAUSE_S = 0.5


class DirectOffsetCommitter:
    """Commits the ends of completed batches' ranges to ``store``, in order, never backwards."""

    def __init__(
        self,
        stream_name: str,
        group_id: str,
        store: OffsetStore,
        *,
        close: Any = None,
        params: KafkaParams | None = None,
        client_config: Mapping[str, Any] | None = None,
    ) -> None:
        self._name = stream_name
        # Where the group lives, for the status page's lag (None in tests of the committer alone).
        self.params = params
        self.client_config = dict(client_config or {})
        self._group = group_id
        self._store = store
        self._close = close  # releases the store's clients, after the store's own close
        self._pending: dict[TopicAndPartition, int] = {}
        self._halted = False
        self._stopping = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"{stream_name}-group-commit", daemon=True)
        self._thread.start()

    def batch_completed(self, time_ms: int, ranges: Sequence[OffsetRange], failure: str | None) -> None:
        """Called in order of completion, before the job generator learns of it."""
        with self._changed:
            if self._halted or self._stopping:
                return
            if failure is not None:
                self._halted = True
                logger.warning(
                    "%s: batch %d ms failed, so group %s keeps the offsets of the batches before it; "
                    "this run commits nothing more (%s)",
                    self._name,
                    time_ms,
                    self._group,
                    failure.splitlines()[0][:300] if failure else "",
                )
                return
            for r in ranges:
                tp = TopicAndPartition(r.topic, r.partition)
                self._pending[tp] = max(r.untilOffset, self._pending.get(tp, r.untilOffset))
            self._changed.notify()

    def stop(self, timeout_s: float) -> None:
        """Write what is pending (within ``timeout_s``), then release the store."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            logger.warning(
                "%s: the last commit to group %s did not finish within %.0f s",
                self._name,
                self._group,
                timeout_s,
            )
            return
        self._store.close()
        if self._close is not None:
            self._close()

    def _run(self) -> None:
        retries_left = _RETRIES_AT_STOP
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._stopping)
                offsets, self._pending = self._pending, {}
                stopping = self._stopping
            failed = bool(offsets) and not self._commit(offsets)
            if stopping and (not failed or not retries_left):
                return
            if failed:
                retries_left -= stopping
                with self._changed:  # a pause before the next attempt (a batch or the stop ends it)
                    self._changed.wait(_RETRY_PAUSE_S)

    def _commit(self, offsets: Mapping[TopicAndPartition, int]) -> bool:
        try:
            self._store.commit(offsets)
        except Exception as exc:
            # The next batch's offsets (or the stop's retry) carry these partitions on.
            logger.warning("%s: committing to group %s failed: %r", self._name, self._group, exc)
            with self._changed:
                for tp, offset in offsets.items():
                    self._pending[tp] = max(offset, self._pending.get(tp, offset))
            return False
        return True


def committer_for(stream_name: str, kafka_params: Mapping[str, Any]) -> DirectOffsetCommitter:
    """The committer of the group ``kafka_params`` name (a direct stream's params, ``group.id``
    required), in the store :func:`open_group_store` opens."""
    group = open_group_store(kafka_params)
    return DirectOffsetCommitter(
        stream_name,
        group.params.group.group_id,
        group.store,
        close=group.release,
        params=group.params,
        client_config=group.client_config,
    )


@dataclass(frozen=True)
class GroupStore:
    """A group's offset store opened for a reader outside the group (it owns no partition in the
    group's sense), its parsed params and the client config that reaches its brokers; ``release``
    closes the clients the store was built on (after the store's own close: :meth:`close` does
    both). ``client_config`` may hold secrets: never logged."""

    store: OffsetStore
    params: KafkaParams
    client_config: dict[str, Any] = field(repr=False)
    release: Callable[[], None] = field(repr=False)

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            self.release()


def open_group_store(kafka_params: Mapping[str, Any]) -> GroupStore:
    """The store of the group ``kafka_params`` name (``group.id`` required), as the offsets
    registry picks it and ``createStream``'s group would use it: ``offsets.storage`` (``kafka``
    here unless ``zookeeper.connect`` is given, 0.8's default store then), ZooKeeper as well with
    ``dual.commit.enabled``. A direct stream's committer and the Structured Streaming source
    (``reliable_kafka.sql``) commit through it."""
    params = dict(kafka_params)
    if "offsets.storage" not in params and "zookeeper.connect" not in params:
        params["offsets.storage"] = "kafka"  # a reader outside the group needs no ZooKeeper
    parsed = parse_kafka_params(params)
    group = parsed.group
    storage = storage_of(group)
    if in_zookeeper(storage) and parsed.zookeeper is None:
        raise ValueError(
            f"group {group.group_id}: offsets.storage={group.offsets_storage} "
            f"(dual.commit.enabled={str(group.dual_commit_enabled).lower()}) needs zookeeper.connect"
        )
    servers = str(params.get("bootstrap.servers") or params["metadata.broker.list"])
    client_config = {**parsed.consumer_config(servers), "bootstrap.servers": servers}
    backends = _UnownedBackends(parsed, client_config)
    try:
        store = open_store(storage, backends)
    except BaseException:
        backends.close()
        raise
    return GroupStore(store, parsed, client_config, backends.close)


class _UnownedBackends:
    """A direct stream's stores: it owns no partition in the group's sense (no member, no owner
    node), so it commits as a committer outside the group; ZooKeeper's client is made here and
    closed with the committer."""

    def __init__(self, params: KafkaParams, client_config: Mapping[str, Any]) -> None:
        self._params = params
        self._client_config = client_config
        self._zk: KazooClient | None = None

    def zookeeper(self) -> OffsetStore:
        assert self._params.zookeeper is not None  # checked by committer_for
        self._zk = connect_zookeeper(self._params.zookeeper)
        return UnownedZooKeeperOffsets(
            self._zk, self._params.group.group_id, acl=zookeeper_acl(self._params.zookeeper)
        )

    def kafka(self) -> OffsetStore:
        return KafkaOffsetStore.standalone(
            self._client_config, self._params.group.group_id, owns=lambda _tp: True
        )

    def close(self) -> None:
        if self._zk is not None:
            close_zookeeper(self._zk)
            self._zk = None

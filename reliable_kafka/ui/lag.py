"""Consumer lag per partition, as Kafka's ``ConsumerOffsetChecker`` reported it for a 0.8 group.

Committed offsets and owners come from ZooKeeper (``/consumers/<group>/offsets|owners/<topic>/<p>``),
partitions from ``/brokers/topics/<topic>``, log end offsets (high watermarks) from the brokers.
Lag is log end minus committed, the records the group has yet to read; with nothing committed it
is unknown (the group starts at ``auto.offset.reset``). These are network calls: callers run them
on a request thread or the CLI, never on the data path or the listener bus.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from reliable_kafka.kafka.zk.broker_discovery import (
    discover_bootstrap_servers,
    legacy_protocol_config,
    topic_partitions,
)
from reliable_kafka.kafka.zk.paths import TopicAndPartition, group_dir, offset_path, owner_path
from reliable_kafka.settings import is_secret_key
from reliable_kafka.util.clock import wall_clock_ms
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from reliable_kafka.util.librdkafka_log import with_logger

logger = logging.getLogger(__name__)

WATERMARK_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int | None  # the next offset the group reads; None if never committed
    log_end: int | None  # the broker's high watermark; None if it could not be read
    owner: str | None  # the consumer thread owning the partition, None if unowned
    last_commit_ms: int | None  # when the offset node was last written (ZooKeeper mtime)

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        # A log truncated below the committed offset (unclean election) has no negative backlog.
        return max(0, self.log_end - self.committed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "topic": self.topic,
            "partition": self.partition,
            "committed": self.committed,
            "log_end": self.log_end,
            "lag": self.lag,
            "owner": self.owner,
            "last_commit_ms": self.last_commit_ms,
        }


class WatermarkReader:
    """High watermarks through one confluent-kafka consumer that never joins a group or commits."""

    def __init__(self, client_config: Mapping[str, Any]) -> None:
        config = {
            key: value
            for key, value in client_config.items()
            # Only connection and security settings matter for a watermark query.
            if key not in {"group.id", "auto.offset.reset", "enable.auto.commit"}
        }
        config.update({"group.id": "reliable-kafka-lag", "enable.auto.commit": False})
        self._consumer = Consumer(with_logger(config))

    def log_end_offsets(self, tps: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        result: dict[TopicAndPartition, int | None] = {}
        for tp in tps:
            try:
                _low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), timeout=WATERMARK_TIMEOUT_S, cached=False
                )
            except KafkaException as exc:
                logger.warning("could not read the log end offset of %s: %s", tp, exc)
                result[tp] = None
                continue
            result[tp] = high
        return result

    def close(self) -> None:
        self._consumer.close()


def group_topics(zk: KazooClient, group: str) -> list[str]:
    """Topics the group has committed offsets for."""
    try:
        return sorted(zk.get_children(f"{group_dir(group)}/offsets"))
    except NoNodeError:
        return []


def read_group_lag(
    zk: KazooClient, watermarks: WatermarkReader, group: str, topics: Sequence[str] | None = None
) -> list[PartitionLag]:
    """Every partition of ``topics`` (default: those the group committed for), sorted."""
    wanted = sorted(topics) if topics else group_topics(zk, group)
    partitions = topic_partitions(zk, wanted)
    tps = [TopicAndPartition(topic, p) for topic in wanted for p in partitions.get(topic, [])]
    log_ends = watermarks.log_end_offsets(tps)
    rows = []
    for tp in tps:
        committed, mtime = _read_committed(zk, group, tp)
        rows.append(
            PartitionLag(
                group=group,
                topic=tp.topic,
                partition=tp.partition,
                committed=committed,
                log_end=log_ends.get(tp),
                owner=_read_owner(zk, group, tp),
                last_commit_ms=mtime,
            )
        )
    return rows


def _read_committed(zk: KazooClient, group: str, tp: TopicAndPartition) -> tuple[int | None, int | None]:
    try:
        data, stat = zk.get(offset_path(group, tp))
    except NoNodeError:
        return None, None
    try:
        return int(data.decode("ascii").strip()), stat.mtime
    except (UnicodeDecodeError, ValueError):
        logger.warning("offset node of %s in group %s holds %r, not an offset", tp, group, data[:40])
        return None, stat.mtime


def _read_owner(zk: KazooClient, group: str, tp: TopicAndPartition) -> str | None:
    try:
        data, _ = zk.get(owner_path(group, tp))
    except NoNodeError:
        return None
    return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class LagSource:
    """One consumer group to watch: where its ZooKeeper is and how to reach its brokers."""

    zookeeper_connect: str
    group: str
    topics: tuple[str, ...]
    # May hold secrets (SASL/SSL): kept out of repr, and masked in the errors shown.
    client_config: Mapping[str, Any] = field(repr=False)
    receiver_stream_id: int | None = None
    zookeeper_auth: str | None = field(default=None, repr=False)  # digest user:password

    def masked(self, text: str) -> str:
        """``text`` with every secret value of this source replaced by ``***``."""
        secrets = [str(v) for k, v in self.client_config.items() if is_secret_key(str(k)) and v]
        if self.zookeeper_auth:
            secrets.append(self.zookeeper_auth)
        for secret in secrets:
            text = text.replace(secret, "***")
        return text


@dataclass(frozen=True, slots=True)
class LagReport:
    rows: tuple[PartitionLag, ...]
    read_at_ms: int
    errors: tuple[str, ...]


class LagMonitor:
    """The lag of every watched group, read on the caller's thread at most once per ``refresh_ms``.

    Clients connect on first use and are kept; a failed lookup is reported in ``errors`` (and
    its clients reset) rather than raised, so that the page still renders.
    """

    def __init__(
        self,
        sources: Sequence[LagSource],
        refresh_ms: int = 2000,
        *,
        connect_zookeeper: Callable[[LagSource], KazooClient] | None = None,
    ) -> None:
        self.sources = tuple(sources)
        self._refresh_ms = refresh_ms
        self._connect = connect_zookeeper or _connect_zookeeper
        self._lock = threading.Lock()
        self._clients: dict[int, tuple[KazooClient, WatermarkReader]] = {}
        self._last: LagReport | None = None
        self._closed = False

    def report(self) -> LagReport:
        with self._lock:
            now_ms = wall_clock_ms()
            last = self._last
            if last is not None and now_ms - last.read_at_ms < self._refresh_ms:
                return last
            rows: list[PartitionLag] = []
            errors: list[str] = []
            for index, source in enumerate(self.sources):
                try:
                    zk, watermarks = self._clients_of(index, source)
                    rows.extend(read_group_lag(zk, watermarks, source.group, source.topics))
                except Exception as exc:
                    error = source.masked(f"{type(exc).__name__}: {exc}")
                    logger.warning("could not read the lag of group %s: %s", source.group, error)
                    errors.append(f"group {source.group}: {error}")
                    self._reset(index)
            self._last = LagReport(tuple(rows), wall_clock_ms(), tuple(errors))
            return self._last

    def _clients_of(self, index: int, source: LagSource) -> tuple[KazooClient, WatermarkReader]:
        if self._closed:
            raise RuntimeError("the lag monitor is closed")
        clients = self._clients.get(index)
        if clients is None:
            zk = self._connect(source)
            try:
                config = dict(source.client_config)
                if not config.get("bootstrap.servers"):
                    config["bootstrap.servers"] = discover_bootstrap_servers(zk)
                config.update(legacy_protocol_config(zk, config))
                clients = (zk, WatermarkReader(config))
            except BaseException:
                _close_zookeeper(zk)
                raise
            self._clients[index] = clients
        return clients

    def _reset(self, index: int) -> None:
        clients = self._clients.pop(index, None)
        if clients is not None:
            _close_clients(clients)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for clients in self._clients.values():
                _close_clients(clients)
            self._clients.clear()


def _connect_zookeeper(source: LagSource) -> KazooClient:
    zk = kazoo_client(
        source.zookeeper_connect,
        timeout=10.0,
        auth_data=[("digest", source.zookeeper_auth)] if source.zookeeper_auth else None,
    )
    zk.start(timeout=10.0)
    return zk


def _close_zookeeper(zk: KazooClient) -> None:
    stop_kazoo(zk)


def _close_clients(clients: tuple[KazooClient, WatermarkReader]) -> None:
    zk, watermarks = clients
    try:
        watermarks.close()
    except Exception:
        logger.debug("closing the watermark consumer failed", exc_info=True)
    try:
        _close_zookeeper(zk)
    except Exception:
        logger.debug("closing the ZooKeeper client failed", exc_info=True)

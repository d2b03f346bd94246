"""Consumer lag per partition, as Kafka's ``ConsumerOffsetChecker`` reported it for a 0.8 group.

Committed offsets, partitions and owners come from where the group keeps them (a
:class:`~reliable_kafka.ui.group_view.GroupView`: ZooKeeper, Kafka or both), log end offsets
(high watermarks) from the brokers. Lag is log end minus committed, the records the group has yet
to read; with nothing committed it is unknown (the group starts at ``auto.offset.reset``). These
are network calls: callers run them on a request thread or the CLI, never on the data path or the
listener bus. Brokers not named in the client config are found in ZooKeeper, on the listener that
speaks its ``security.protocol`` (``broker.listener.name`` picks one of several); Kafka refusing the
clients (credentials, certificate, ACL) ends a lookup with the refusal, naming what to grant or set.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kazoo.client import KazooClient

from reliable_kafka.kafka.client.access_refusal import (
    ACCESS_REFUSAL_TIMEOUT_PARAM,
    AccessRefusals,
    AccessRefusedError,
    refusal_error,
)
from reliable_kafka.kafka.client.error_log import ClientErrorLog
from reliable_kafka.kafka.client.params import ZooKeeperSasl
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.broker_discovery import (
    LISTENER_NAME_PARAM,
    discover_bootstrap_servers,
    legacy_protocol_config,
)
from reliable_kafka.kafka.offsets.registry import OffsetsStorage, checked_storage, in_zookeeper
from reliable_kafka.ui.group_view import GroupView
from reliable_kafka.util.clock import wall_clock_ms
from reliable_kafka.util.kafka_errors import kafka_error_of
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from reliable_kafka.util.librdkafka_log import with_logger
from reliable_kafka.util.secret_keys import is_secret_key

logger = logging.getLogger(__name__)

WATERMARK_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int | None  # the next offset the group reads; None if never committed
    log_end: int | None  # the broker's high watermark; None if it could not be read
    owner: str | None  # a ZooKeeper consumer thread id or a Kafka member (client.id/host); None: unowned
    last_commit_ms: int | None  # ZooKeeper's mtime of the offset node; None for offsets in Kafka

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

    def __init__(self, client_config: Mapping[str, Any], refusals: AccessRefusals | None = None) -> None:
        self.refusals = refusals
        config = {
            key: value
            for key, value in client_config.items()
            # Only connection and security settings matter for a watermark query.
            if key not in {"group.id", "auto.offset.reset", "enable.auto.commit"}
        }
        config.update({"group.id": "reliable-kafka-lag", "enable.auto.commit": False})
        self.brokers = str(config.get("bootstrap.servers", ""))  # what it asks, for errors and tests
        self._consumer = Consumer(with_logger(config))

    def log_end_offsets(self, tps: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        result: dict[TopicAndPartition, int | None] = {}
        for tp in tps:
            try:
                _low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), timeout=WATERMARK_TIMEOUT_S, cached=False
                )
            except KafkaException as exc:
                refused = self._refused(exc, tp.topic)
                if refused is not None:
                    raise refused from exc  # every other partition would wait as long, for the same
                logger.warning("could not read the log end offset of %s: %s", tp, exc)
                result[tp] = None
                continue
            result[tp] = high
        return result

    def _refused(self, exc: KafkaException, topic: str) -> AccessRefusedError | None:
        """Why a watermark could not be read, when Kafka refused it: the login (heard by the error
        callbacks, which the request does not run: :meth:`serve_callbacks`), or the topic's ACL
        (which makes the partition unknown: its metadata says why)."""
        if self.refusals is None:
            return None
        identity = self.refusals.identity
        refused = refusal_error(kafka_error_of(exc), identity) or self.serve_callbacks()
        if refused is not None:
            return refused
        try:
            metadata = self._consumer.list_topics(topic, timeout=WATERMARK_TIMEOUT_S).topics.get(topic)
        except KafkaException:
            return None
        error = metadata.error if metadata is not None else None
        if error is None or error.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
            return None
        return refusal_error(KafkaError(error.code(), f"{topic}: {error.str()}"), identity)

    def serve_callbacks(self) -> AccessRefusedError | None:
        """Run the client's pending error callbacks (it is never assigned: a poll reads nothing);
        the refusal they heard, if any."""
        try:
            self._consumer.poll(0)
        except (KafkaException, RuntimeError) as exc:
            logger.debug("serving the watermark client's callbacks: %r", exc)
        return self.refusals.error() if self.refusals is not None else None

    def close(self) -> None:
        self._consumer.close()


def read_group_lag(
    view: GroupView, watermarks: WatermarkReader, topics: Sequence[str] | None = None
) -> list[PartitionLag]:
    """Every partition of ``topics`` (default: those the group committed for), sorted."""
    wanted = sorted(topics) if topics else view.topics()
    partitions = view.partitions(wanted)
    tps = [TopicAndPartition(topic, p) for topic in wanted for p in partitions.get(topic, [])]
    log_ends = watermarks.log_end_offsets(tps)
    committed = view.committed(tps)
    owners = view.owners(tps)
    return [
        PartitionLag(
            group=view.group,
            topic=tp.topic,
            partition=tp.partition,
            committed=committed[tp].offset,
            log_end=log_ends.get(tp),
            owner=owners.get(tp),
            last_commit_ms=committed[tp].last_commit_ms,
        )
        for tp in tps
    ]


@dataclass(frozen=True, kw_only=True)
class LagSource:
    """One consumer group to watch: where it keeps its offsets and how to reach them.

    ``zookeeper_connect`` None: the group has no ZooKeeper (its members and offsets are Kafka's),
    so ``client_config`` must name ``bootstrap.servers``; with a ZooKeeper, brokers not named
    there are discovered from it.
    """

    group: str
    topics: tuple[str, ...]
    offsets_storage: OffsetsStorage
    # May hold secrets (SASL/SSL): kept out of repr, and masked in the errors shown.
    client_config: Mapping[str, Any] = field(repr=False)
    zookeeper_connect: str | None = None
    # The input streams of this group (several createStreams may share one group and store).
    receiver_stream_ids: tuple[int, ...] = ()
    zookeeper_auth: str | None = field(default=None, repr=False)  # digest user:password
    zookeeper_sasl: ZooKeeperSasl | None = None  # its password is kept out of its repr

    def __post_init__(self) -> None:
        checked_storage(self.offsets_storage)
        if self.zookeeper_connect is None:
            if in_zookeeper(self.offsets_storage):
                raise ValueError(f"group {self.group}: {self.offsets_storage} offsets need zookeeper_connect")
            if not self.bootstrap_servers:
                raise ValueError(f"group {self.group}: without ZooKeeper, bootstrap.servers is needed")

    @property
    def bootstrap_servers(self) -> str | None:
        servers = self.client_config.get("bootstrap.servers")
        return str(servers) if servers else None

    def refusals(self) -> AccessRefusals:
        """A judge of the refusals of this source's Kafka clients (``access.refusal.timeout.ms``
        from its config, default 10 s)."""
        return AccessRefusals.of(self.client_config, group=self.group, topics=self.topics)

    def explained(self, exc: BaseException, refusals: AccessRefusals | None = None) -> BaseException:
        """``exc``, or the refusal it is (or that ``refusals`` met meanwhile): what to grant or set."""
        if isinstance(exc, AccessRefusedError):
            return exc
        identity = refusals.identity if refusals is not None else self.refusals().identity
        refused = refusal_error(kafka_error_of(exc), identity)
        if refused is None and refusals is not None:
            refused = refusals.error()
        return refused if refused is not None else exc

    def masked(self, text: str, *, naming_the_principal: bool = False) -> str:
        """``text`` with every secret value of this source replaced by ``***``; the user name
        kept with ``naming_the_principal`` (a refusal says whom Kafka refused: the operator's own)."""
        kept = {"sasl.username"} if naming_the_principal else set()
        secrets = [
            str(v) for k, v in self.client_config.items() if is_secret_key(str(k)) and v and k not in kept
        ]
        if self.zookeeper_auth:
            secrets.append(self.zookeeper_auth)
        if self.zookeeper_sasl is not None:
            secrets.append(self.zookeeper_sasl.password)
        for secret in secrets:
            text = text.replace(secret, "***")
        return text


@dataclass(frozen=True, slots=True)
class LagReport:
    rows: tuple[PartitionLag, ...]
    read_at_ms: int
    errors: tuple[str, ...]


# Keys of ours a lag source's config may hold (as the application's kafkaParams do): not librdkafka's.
_OWN_KEYS = (LISTENER_NAME_PARAM, ACCESS_REFUSAL_TIMEOUT_PARAM)


def open_group_view(
    source: LagSource,
    connect_zookeeper: Callable[[LagSource], KazooClient] | None = None,
    refusals: AccessRefusals | None = None,
) -> tuple[GroupView, WatermarkReader]:
    """The group's view and a watermark reader for its brokers; the caller closes both. Their
    Kafka clients report refusals to ``refusals`` (default: :meth:`LagSource.refusals`)."""
    refusals = refusals or source.refusals()
    zk = None
    if source.zookeeper_connect is not None:
        zk = (connect_zookeeper or connect_zookeeper_of)(source)
    try:
        config = {key: value for key, value in source.client_config.items() if key not in _OWN_KEYS}
        if not config.get("bootstrap.servers"):
            assert zk is not None  # LagSource requires bootstrap.servers without ZooKeeper
            protocol = str(config.get("security.protocol", "PLAINTEXT"))
            listener = source.client_config.get(LISTENER_NAME_PARAM)
            config["bootstrap.servers"] = discover_bootstrap_servers(
                zk, protocol, str(listener) if listener else None
            )
            refusals.brokers_found(config["bootstrap.servers"])
        if zk is not None:
            config.update(legacy_protocol_config(zk, config))
        config["error_cb"] = ClientErrorLog(f"lag of group {source.group}", refusals)
        view = GroupView(source.group, source.offsets_storage, zk=zk, client_config=config)
    except BaseException:
        if zk is not None:
            _close_zookeeper(zk)
        raise
    try:
        return view, WatermarkReader(config, refusals)
    except BaseException:
        view.close()
        raise


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
        self._connect = connect_zookeeper or connect_zookeeper_of
        self._lock = threading.Lock()
        self._clients: dict[int, tuple[GroupView, WatermarkReader]] = {}
        # Per source, kept across its clients' resets: a refusal's streak outlives them.
        self._refusals = [source.refusals() for source in self.sources]
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
                    view, watermarks = self._clients_of(index, source)
                    rows.extend(read_group_lag(view, watermarks, source.topics))
                except Exception as exc:
                    clients = self._clients.get(index)
                    if clients is not None:
                        clients[1].serve_callbacks()  # the refusals a request did not hear
                    shown = source.explained(exc, self._refusals[index])
                    error = source.masked(f"{type(shown).__name__}: {shown}")
                    logger.warning("could not read the lag of group %s: %s", source.group, error)
                    errors.append(f"group {source.group}: {error}")
                    self._reset(index)
            self._last = LagReport(tuple(rows), wall_clock_ms(), tuple(errors))
            return self._last

    def _clients_of(self, index: int, source: LagSource) -> tuple[GroupView, WatermarkReader]:
        if self._closed:
            raise RuntimeError("the lag monitor is closed")
        clients = self._clients.get(index)
        if clients is None:
            clients = open_group_view(source, self._connect, self._refusals[index])
            self._clients[index] = clients
        return clients

    def _reset(self, index: int) -> None:
        clients = self._clients.pop(index, None)
        if clients is not None:
            close_clients(clients)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for clients in self._clients.values():
                close_clients(clients)
            self._clients.clear()


def connect_zookeeper_of(source: LagSource) -> KazooClient:
    assert source.zookeeper_connect is not None
    zk = kazoo_client(
        source.zookeeper_connect,
        timeout=10.0,
        auth_data=[("digest", source.zookeeper_auth)] if source.zookeeper_auth else None,
        sasl_options=source.zookeeper_sasl.kazoo_options() if source.zookeeper_sasl else None,
    )
    zk.start(timeout=10.0)
    return zk


def _close_zookeeper(zk: KazooClient) -> None:
    stop_kazoo(zk)


def close_clients(clients: tuple[GroupView, WatermarkReader]) -> None:
    view, watermarks = clients
    try:
        watermarks.close()
    except Exception:
        logger.debug("closing the watermark consumer failed", exc_info=True)
    try:
        view.close()
    except Exception:
        logger.debug("closing the group's clients failed", exc_info=True)

"""Kafka 0.8's ZookeeperConsumerConnector for one receiver: group membership plus one partition
consumer per owned partition, started and stopped as ownership changes.

Membership is the 0.8 protocol in ZooKeeper when a ``zookeeper.connect`` is given, else Kafka's
group coordinator (``bootstrap.servers``); either tells this connector about ownership through
the same RebalanceListener calls, so the partition consumers behave alike on both.

Offsets go where ``offsets.storage`` / ``dual.commit.enabled`` say: ZooKeeper, Kafka's group
coordinator, or both; the membership's ownership decides what may be committed in every case.
Without ZooKeeper they go to the coordinator through the group member itself, so the
coordinator accepts them (generation, member id) while the group is active."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException
from kazoo.client import KazooClient

from reliable_kafka.kafka.client.access_refusal import (
    AccessRefusals,
    AccessRefusedError,
    Refusal,
    refusal_error,
)
from reliable_kafka.kafka.client.consumer import create_consumer
from reliable_kafka.kafka.client.fetch_stall import FetchStallMonitor
from reliable_kafka.kafka.client.missing_topics import MissingTopicWatch
from reliable_kafka.kafka.client.params import KafkaParams
from reliable_kafka.kafka.client.shared_client import SharedFetchClient
from reliable_kafka.kafka.client.topic_lookup import TopicLookup
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.broker_discovery import discover_bootstrap_servers, legacy_protocol_config
from reliable_kafka.kafka.client.zk.client import (
    ZooKeeperUnreachableError,
    close_zookeeper,
    connect_zookeeper,
    zookeeper_acl,
    zookeeper_identity,
)
from reliable_kafka.kafka.client.zk.refusal import zookeeper_refusal
from reliable_kafka.kafka.offsets.group.membership import KafkaGroupMembership
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.registry import in_kafka, open_store, storage_of, where
from reliable_kafka.kafka.offsets.store import OffsetStore
from reliable_kafka.kafka.offsets.zk.group_membership import ZookeeperConsumerGroup
from reliable_kafka.kafka.offsets.zk.offset_store import ZooKeeperOffsetStore
from reliable_kafka.kafka.offsets.zk.ownership import OwnershipGuardedStore, valid_claim
from reliable_kafka.kafka.receiver.partition_consumer import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_POLL_TIMEOUT_S,
    FailureHandler,
    PartitionConsumer,
    RecordSink,
)
from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.util.kafka_errors import kafka_error_of

logger = logging.getLogger(__name__)

# How long a stop waits for the partition threads, all of them together (each polls with a
# short timeout, so only a sink stuck in back-pressure takes long).
CONSUMER_JOIN_TIMEOUT_S = 30.0
# How long a shutdown waits in all: for the partition threads, then for leaving the group (the
# group's own bound still applies within it). One deadline, so the two bounds do not add up.
SHUTDOWN_TIMEOUT_S = 120.0

_METADATA_TIMEOUT_S = 5.0
# A failure's chain of causes is short (a retry's last error, wrapped once or twice).
_MAX_ERROR_CHAIN = 10

# Revoked partitions -> next offset each consumer would have read (None: it read nothing).
RevokeHook = Callable[[dict[TopicAndPartition, int | None]], None]
# A partition -> the offset after the last record this receiver stored of it (None: nothing).
StoredOffsets = Callable[[TopicAndPartition], int | None]


class ConsumerConnector:
    """Connects, joins the group, and runs a :class:`PartitionConsumer` per owned partition.

    ``before_release`` runs after the consumers of revoked partitions have stopped and while
    the partitions are still owned (the place to flush or commit their last records).

    ``stored_offsets`` tells how far the receiver has stored each partition. A partition that
    comes back (typically after a ZooKeeper session loss, when the commits of blocks stored
    meanwhile were refused) is read, and committed, from that offset when it is past the
    committed one, instead of storing those records a second time.

    ``first_contact``: the stream has never reached ZooKeeper; a quorum that does not answer
    within ``zookeeper.connection.timeout.ms`` is then a :class:`FatalReceiverError` (the stream
    ends), else a failed start like any other (:attr:`zookeeper_reached` tells which it was).
    """

    def __init__(
        self,
        params: KafkaParams,
        topics: Mapping[str, int],
        *,
        sink: RecordSink,
        on_failure: FailureHandler,
        before_release: RevokeHook | None = None,
        stored_offsets: StoredOffsets | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
        stall_monitor: FetchStallMonitor | None = None,
        first_contact: bool = False,
    ) -> None:
        self._stall_monitor = stall_monitor
        self._first_contact = first_contact
        self.zookeeper_reached = False
        self._params = params
        self._topics = dict(topics)
        self._sink = sink
        self._on_failure = on_failure
        self._before_release = before_release
        self._stored_offsets = stored_offsets
        self._batch_size = batch_size
        self._poll_timeout_s = poll_timeout_s
        self._consumers: dict[TopicAndPartition, PartitionConsumer] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._zk: KazooClient | None = None
        self._group: ZookeeperConsumerGroup | KafkaGroupMembership | None = None
        self._offsets: OffsetStore | None = None
        self._consumer_config: dict[str, Any] = {}
        self._client: SharedFetchClient | None = None
        self._topic_watch: MissingTopicWatch | None = None
        # Every Kafka client of this receiver reports its refusals here (one streak, one error).
        self._refusals: AccessRefusals | None = None

    @property
    def offsets(self) -> OffsetStore:
        if self._offsets is None:
            raise RuntimeError("the consumer connector is not started")
        return self._offsets

    @property
    def group(self) -> ZookeeperConsumerGroup | KafkaGroupMembership:
        if self._group is None:
            raise RuntimeError("the consumer connector is not started")
        return self._group

    def start(self) -> None:
        """Join the group (in ZooKeeper, else through the group coordinator); returns after the
        first rebalance. A topic Kafka does not have then ends the receiver's stream after
        ``missing.topic.timeout.ms`` (see :mod:`~reliable_kafka.kafka.client.missing_topics`)."""
        if self._params.zookeeper is None:
            self._join_through_coordinator()
        else:
            self._join_in_zookeeper()

    def _watch_missing_topics(self) -> None:
        """Before the group is joined: librdkafka postpones the join of a subscription whose
        topics are all missing, and the bound must run meanwhile."""
        lookup = TopicLookup(
            self._consumer_config, f"receiver {self._params.group.group_id} topics", self._refusals
        )
        bound_ms = self._params.missing_topic_timeout_ms
        watch = MissingTopicWatch(self._topics, lookup, bound_ms, self._topics_missing)
        with self._lock:
            if self._closing.is_set():
                lookup.close()
                return
            self._topic_watch = watch
        watch.start()

    def _topics_missing(self, message: str, error: BaseException) -> None:
        group = self._group
        if isinstance(group, KafkaGroupMembership) and group.abort_start(error):
            return  # the receiver's start fails with the error
        self._consumer_failed(message, error)

    def _watch_refusals(self) -> None:
        """Once the clients' config is known, before any client exists: Kafka refusing them
        (credentials, certificate, ACLs) for ``access.refusal.timeout.ms`` ends the stream. A
        group that Kafka neither keeps nor holds offsets of needs no group ACL: the fetch client
        (which has a ``group.id``) looks for its coordinator, and a refusal there costs nothing."""
        kafka_keeps_group = self._params.zookeeper is None or in_kafka(storage_of(self._params.group))
        self._refusals = AccessRefusals.of(
            self._consumer_config,
            group=self._params.group.group_id,
            topics=self._topics,
            timeout_ms=self._params.access_refusal_timeout_ms,
            on_refused=self._refused,
            ignored=() if kafka_keeps_group else (Refusal.GROUP_ACL,),
        )

    def _refused(self, error: AccessRefusedError) -> None:
        self._topics_missing("Kafka refused access", error)

    def _join_through_coordinator(self) -> None:
        bootstrap = self._params.bootstrap_servers
        if bootstrap is None:
            raise ValueError("a consumer group without ZooKeeper needs bootstrap.servers")
        self._consumer_config = self._params.consumer_config(bootstrap)
        self._watch_refusals()
        member = KafkaGroupMembership(
            self._consumer_config,
            self._params.group.group_id,
            self._topics,
            self,
            assignment_strategy=self._params.group.assignment_strategy,
            consumer_id=self._params.group.consumer_id,
            refusals=self._refusals,
        )
        self._group = member
        self._offsets = open_store(storage_of(self._params.group), _CoordinatorBackends(member, self._params))
        self._watch_missing_topics()
        member.start()

    def _join_in_zookeeper(self) -> None:
        zk_params = self._params.zookeeper
        assert zk_params is not None
        try:
            self._zk = connect_zookeeper(zk_params)
        except ZooKeeperUnreachableError as exc:
            if not self._first_contact:
                raise  # an outage: the receiver restarts, as after any failed start
            # Never reached by the stream (Kafka 0.8's ZkTimeoutException): a wrong address, a
            # firewall. A restart would wait as long again, and again, for ever.
            raise FatalReceiverError(str(exc)) from exc
        self.zookeeper_reached = True
        try:
            self._join_group_in_zookeeper(self._zk)
        except Exception as exc:
            # Refused credentials or ACLs: the group's retries took them for an outage, and so
            # would every restart.
            refused = zookeeper_refusal(
                exc, zk_params.connect, zookeeper_identity(zk_params), self._params.group.group_id
            )
            if refused is not None:
                raise FatalReceiverError(refused) from exc
            kafka_refused = self._kafka_refusal(exc)
            if kafka_refused is not None:
                raise kafka_refused from exc
            raise

    def _join_group_in_zookeeper(self, zk: KazooClient) -> None:
        zk_params = self._params.zookeeper
        assert zk_params is not None
        acl = zookeeper_acl(zk_params)
        bootstrap = self._params.bootstrap_servers
        if bootstrap is None:
            protocol = str(self._params.client_config.get("security.protocol", "PLAINTEXT"))
            bootstrap = discover_bootstrap_servers(zk, protocol, self._params.listener_name)
            logger.info("brokers from ZooKeeper: %s", bootstrap)
        legacy = legacy_protocol_config(zk, self._params.client_config)
        self._consumer_config = {**self._params.consumer_config(bootstrap), **legacy}
        self._watch_refusals()
        self._group = ZookeeperConsumerGroup(
            zk,
            self._params.group,
            self._topics,
            self,
            acl=acl,
            session_timeout_ms=zk_params.session_timeout_ms,
        )
        self._offsets = self._offset_store(zk, self._group, acl, zk_params.session_timeout_ms)
        self._watch_missing_topics()
        self._group.start()

    def _offset_store(
        self, zk: KazooClient, group: ZookeeperConsumerGroup, acl: Any, session_timeout_ms: int
    ) -> OffsetStore:
        params = self._params.group
        storage = storage_of(params)
        backends = _ZooKeeperGroupBackends(
            zk,
            group,
            params.group_id,
            acl=acl,
            session_timeout_ms=session_timeout_ms,
            consumer_config=self._consumer_config,
        )
        store = open_store(storage, backends)
        logger.info("group %s commits offsets to %s", params.group_id, where(storage))
        # Kafka's store cannot check ZooKeeper's ownership inside its write: a release waits for
        # the commits out instead (see OwnershipGuardedStore).
        return OwnershipGuardedStore(store, group) if in_kafka(storage) else store

    def positions(self) -> dict[TopicAndPartition, int]:
        """Next offset to read of every running consumer that has read something."""
        with self._lock:
            consumers = list(self._consumers.values())
        return {c.tp: c.next_offset for c in consumers if c.next_offset is not None}

    def owned_partitions(self) -> list[TopicAndPartition]:
        with self._lock:
            return sorted(self._consumers)

    def stop_consumers(self, timeout_s: float = CONSUMER_JOIN_TIMEOUT_S) -> None:
        """Stop and join every partition consumer (at most ``timeout_s`` in all); partitions
        stay owned, none start any more."""
        self._closing.set()
        with self._lock:
            consumers = list(self._consumers.values())
            watch, self._topic_watch = self._topic_watch, None
        if watch is not None:
            watch.stop()
        self._stop_and_join(consumers, timeout_s)

    def shutdown(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        """Stop consumers, leave the group, close ZooKeeper; the waits for the consumers and for
        leaving the group share one deadline, ``timeout_s`` from now. Idempotent."""
        deadline = time.monotonic() + timeout_s
        self.stop_consumers(min(CONSUMER_JOIN_TIMEOUT_S, timeout_s))
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
        if self._group is not None:
            self._group.stop(max(0.0, deadline - time.monotonic()))
        if self._offsets is not None:
            self._offsets.close()
        if self._zk is not None:
            close_zookeeper(self._zk)
            self._zk = None

    @staticmethod
    def _stop_and_join(
        consumers: list[PartitionConsumer], timeout_s: float = CONSUMER_JOIN_TIMEOUT_S
    ) -> None:
        for consumer in consumers:
            consumer.stop()
        deadline = time.monotonic() + timeout_s
        for consumer in consumers:
            if not consumer.join(max(0.0, deadline - time.monotonic())):
                logger.warning("consumer of %s did not stop within %s s", consumer.tp, timeout_s)

    def _shared_client(self, partitions: Mapping[TopicAndPartition, str]) -> SharedFetchClient:
        """The receiver's one fetch client, made at the first assignment and sized for every
        partition of its topics (any of them may come to this receiver)."""
        with self._lock:
            if self._client is not None:
                return self._client
        count = max(len(partitions), self._partitions_of_topics())
        client = SharedFetchClient.create(
            self._consumer_config,
            f"receiver {self._params.group.group_id}",
            prefetch_bytes=self._params.prefetch_bytes,
            partitions=count,
            refusals=self._refusals,
        )
        logger.info(
            "one Kafka client for up to %d partition(s) of %s, prefetch within %d bytes",
            count,
            ", ".join(sorted(self._topics)),
            self._params.prefetch_bytes,
        )
        with self._lock:
            self._client = client
        return client

    def _partitions_of_topics(self) -> int:
        """How many partitions the topics have (0 when no metadata comes): asked once, at the
        first assignment, by a client that lives only for the question."""
        probe = create_consumer(
            self._consumer_config, f"receiver {self._params.group.group_id} metadata", self._refusals
        )
        try:
            metadata = probe.list_topics(timeout=_METADATA_TIMEOUT_S)
        except KafkaException as exc:
            logger.info("partition counts unknown (%r): the prefetch is sized for the partitions owned", exc)
            return 0
        finally:
            probe.close()
        return sum(len(metadata.topics[t].partitions) for t in self._topics if t in metadata.topics)

    # -- RebalanceListener -------------------------------------------------------------------

    def on_partitions_assigned(self, partitions: Mapping[TopicAndPartition, str]) -> None:
        if self._closing.is_set():
            return
        committed = self._start_offsets(self.offsets.fetch(partitions))
        client = self._shared_client(partitions)
        client.ensure_metadata({tp.topic for tp in partitions})
        started: list[PartitionConsumer] = []
        for tp in sorted(partitions):
            consumer = PartitionConsumer(
                tp,
                partitions[tp],
                client,
                start_offset=committed[tp],
                offset_reset=self._params.group.auto_offset_reset,
                sink=self._sink,
                on_failure=self._consumer_failed,
                batch_size=self._batch_size,
                poll_timeout_s=self._poll_timeout_s,
                on_out_of_range=self._repair_offset,
                stall_monitor=self._stall_monitor,
                refusals=self._refusals,
            )
            with self._lock:
                self._consumers[tp] = consumer
            if self.group.suspended:
                consumer.pause()
            started.append(consumer)
            logger.info(
                "%s: consuming %s from %s",
                partitions[tp],
                tp,
                committed[tp] if committed[tp] is not None else self._params.group.auto_offset_reset,
            )
        client.assign({consumer.tp: consumer.prepare() for consumer in started})
        for consumer in started:
            consumer.start()

    def _start_offsets(
        self, committed: dict[TopicAndPartition, int | None]
    ) -> dict[TopicAndPartition, int | None]:
        """The committed offsets, moved up to what this receiver already stored, and committed so."""
        if self._stored_offsets is None:
            return committed
        ahead: dict[TopicAndPartition, int] = {}
        for tp, offset in committed.items():
            stored = self._stored_offsets(tp)
            if stored is not None and (offset is None or stored > offset):
                ahead[tp] = stored
        if ahead:
            logger.info(
                "resuming %s where this receiver stored them, past the committed offsets",
                ", ".join(f"{tp} at {offset}" for tp, offset in sorted(ahead.items())),
            )
            try:
                self.offsets.commit(ahead)
            except Exception as exc:
                # The next stored block commits past them anyway.
                logger.warning("committing the stored offsets %s failed: %r", ahead, exc)
        return {**committed, **ahead}

    def _repair_offset(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> None:
        try:
            self.offsets.repair(tp, rejected, reset_to)
        except Exception as exc:
            # Reading goes on from the reset offset; the next start repairs the node again.
            logger.warning("replacing the out-of-range offset %d of %s failed: %r", rejected, tp, exc)

    def on_partitions_revoked(self, partitions: list[TopicAndPartition]) -> None:
        with self._lock:
            consumers = [self._consumers.pop(tp) for tp in partitions if tp in self._consumers]
            client = self._client
        self._stop_and_join(consumers)
        if client is not None and consumers:
            client.unassign(c.tp for c in consumers)
        if self._before_release is not None and consumers:
            self._before_release({c.tp: c.next_offset for c in consumers})

    def on_session_suspended(self) -> None:
        with self._lock:
            for consumer in self._consumers.values():
                consumer.pause()

    def on_session_resumed(self) -> None:
        with self._lock:
            for consumer in self._consumers.values():
                consumer.resume()

    def on_rebalance_failed(self, error: BaseException) -> None:
        if not self._closing.is_set():
            self._on_failure("consumer group rebalance failed", self._kafka_refusal(error) or error)

    def _consumer_failed(self, message: str, error: BaseException) -> None:
        if not self._closing.is_set():
            self._on_failure(message, self._kafka_refusal(error) or error)

    def _kafka_refusal(self, error: BaseException) -> AccessRefusedError | None:
        """The refusal a failed request of this receiver met (a commit or an offset fetch answered
        ``GROUP_AUTHORIZATION_FAILED``...), found in ``error``'s chain: Kafka's answer, which
        no restart mends."""
        refusals = self._refusals
        seen: BaseException | None = error
        for _ in range(_MAX_ERROR_CHAIN):
            if seen is None or refusals is None:
                return None
            if isinstance(seen, AccessRefusedError):
                return seen
            refused = refusal_error(kafka_error_of(seen), refusals.identity)
            if refused is not None:
                return refused
            seen = seen.__cause__ or seen.__context__
        return None


class _ZooKeeperGroupBackends:
    """A ZooKeeper group's stores: ZooKeeper's checks its owner nodes in every write; Kafka's is
    a committer outside the group's generations (the coordinator accepts it while the group has
    no Kafka members: membership stays in ZooKeeper), asking the ZooKeeper claims before each
    attempt."""

    def __init__(
        self,
        zk: KazooClient,
        group: ZookeeperConsumerGroup,
        group_id: str,
        *,
        acl: Any,
        session_timeout_ms: int,
        consumer_config: Mapping[str, Any],
    ) -> None:
        self._zk = zk
        self._group = group
        self._group_id = group_id
        self._acl = acl
        self._retry_for_s = max(10.0, session_timeout_ms / 1000.0)
        self._consumer_config = consumer_config

    def zookeeper(self) -> OffsetStore:
        return ZooKeeperOffsetStore(
            self._zk, self._group_id, self._group, acl=self._acl, retry_for_s=self._retry_for_s
        )

    def kafka(self) -> OffsetStore:
        zk, group = self._zk, self._group

        def owns(tp: TopicAndPartition) -> bool:
            client_id = zk.client_id
            return valid_claim(group, client_id[0] if client_id is not None else None, tp) is not None

        return KafkaOffsetStore.standalone(self._consumer_config, self._group_id, owns=owns)


class _CoordinatorBackends:
    """A group kept by Kafka's coordinator: its offsets go through the member itself, so the
    coordinator accepts them (generation, member id) while the group is active."""

    def __init__(self, member: KafkaGroupMembership, params: KafkaParams) -> None:
        self._member = member
        self._group_id = params.group.group_id

    def zookeeper(self) -> OffsetStore:
        raise ValueError(f"group {self._group_id} has no ZooKeeper (zookeeper.connect) to keep offsets in")

    def kafka(self) -> OffsetStore:
        member = self._member
        return KafkaOffsetStore(member.consumer, self._group_id, owns=member.owns, run=member.call)

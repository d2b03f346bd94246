"""One consumer group as the lag tools see it: its committed offsets, partitions and owners, read
wherever the group keeps them.

- Committed offsets, where the offsets registry says the group keeps them: ZooKeeper
  (``/consumers/<group>/offsets/<topic>/<p>``, its mtime the last commit), Kafka (the group
  coordinator's OffsetFetch, through a :class:`KafkaOffsetStore` that owns no partition, so it can
  never commit), or both while a group migrates ("dual": the larger, which is where a starting
  receiver resumes).
- Partitions: ``/brokers/topics`` when there is a ZooKeeper, else the brokers' metadata.
- Owners: ZooKeeper's owner nodes for a ZooKeeper group, else the members the coordinator lists.

Every call is a network round trip: run on a request thread or the CLI, never on the data path.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.broker_discovery import topic_partitions
from reliable_kafka.kafka.client.zk.paths import CONSUMERS_PATH, group_dir, offset_path, owner_path
from reliable_kafka.kafka.offsets.dual import larger_offset
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.registry import OffsetsStorage, checked_storage, in_kafka, in_zookeeper
from reliable_kafka.util.kafka_errors import kafka_error_of
from reliable_kafka.util.librdkafka_log import with_logger

logger = logging.getLogger(__name__)

ADMIN_TIMEOUT_S = 10.0
# Consumer settings an admin client has no use for (librdkafka warns about each one it is given).
_CONSUMER_ONLY_KEYS = frozenset(
    {"group.id", "auto.offset.reset", "enable.auto.commit", "enable.auto.offset.store"}
)


@dataclass(frozen=True, slots=True)
class Committed:
    offset: int | None  # the next offset the group reads; None if never committed
    # When it was written: ZooKeeper's mtime. Kafka's OffsetFetch carries no commit time.
    last_commit_ms: int | None = None


def _owns_nothing(_tp: TopicAndPartition) -> bool:
    return False


def _larger(zookeeper: Committed, kafka: int | None) -> Committed:
    """The larger offset, as ``DualOffsetStore.fetch`` takes it (ZooKeeper's mtime only with its value)."""
    offset = larger_offset(zookeeper.offset, kafka)
    return zookeeper if offset == zookeeper.offset else Committed(offset)


# librdkafka's ways of saying that no broker answered a request within its timeout.
_NO_ANSWER = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
# The wait for a future outlasts the request's own timeout, so that librdkafka, which knows what
# it waited for, answers first; both say the same to the user.
_FUTURE_GRACE_S = 5.0


def _answer(future: Future[Any], what: str) -> Any:
    """The admin request's result; a request the brokers never answered says which one it was."""
    no_answer = f"{what}: no answer from the brokers within {ADMIN_TIMEOUT_S:g} s"
    try:
        return future.result(timeout=ADMIN_TIMEOUT_S + _FUTURE_GRACE_S)
    except TimeoutError:  # concurrent.futures.TimeoutError is this one since 3.11
        raise TimeoutError(no_answer) from None
    except KafkaException as exc:
        error = kafka_error_of(exc)
        if error is not None and error.code() in _NO_ANSWER:
            raise TimeoutError(f"{no_answer} ({error.str()})") from None
        raise


def _admin_config(client_config: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in client_config.items() if key not in _CONSUMER_ONLY_KEYS}


class GroupView:
    """Reads one group; closes the ZooKeeper client it is given and the Kafka clients it makes.

    ``zk`` is the group's ZooKeeper (None: the group has none, Kafka keeps everything);
    ``client_config`` reaches the brokers (``bootstrap.servers`` required unless the group's
    offsets and partitions all come from ZooKeeper).
    """

    def __init__(
        self,
        group: str,
        offsets_storage: OffsetsStorage,
        *,
        zk: KazooClient | None,
        client_config: Mapping[str, Any],
    ) -> None:
        offsets_storage = checked_storage(offsets_storage)
        if zk is None and in_zookeeper(offsets_storage):
            raise ValueError(f"offsets storage {offsets_storage} needs the group's ZooKeeper")
        self.group = group
        self._storage = offsets_storage
        self._zk = zk
        self._admin: AdminClient | None = None
        self._kafka: KafkaOffsetStore | None = None
        if zk is None or in_kafka(offsets_storage):
            if not client_config.get("bootstrap.servers"):
                raise ValueError(f"offsets storage {offsets_storage} needs bootstrap.servers")
            self._admin = AdminClient(with_logger(_admin_config(client_config)))
        if in_kafka(offsets_storage):
            self._kafka = KafkaOffsetStore.standalone(
                client_config, group, owns=_owns_nothing, retry_for_s=ADMIN_TIMEOUT_S
            )

    @property
    def _in_zookeeper(self) -> bool:
        return in_zookeeper(self._storage)

    # -- topics and partitions --------------------------------------------------------------

    def topics(self) -> list[str]:
        """Topics the group has committed offsets for, in either of its stores."""
        topics: set[str] = set()
        if self._in_zookeeper:
            topics.update(self._zookeeper_topics())
        if self._kafka is not None:
            topics.update(self._kafka_topics())
        return sorted(topics)

    def _zookeeper_topics(self) -> list[str]:
        assert self._zk is not None
        try:
            return list(self._zk.get_children(f"{group_dir(self.group)}/offsets"))
        except NoNodeError:
            return []

    def _kafka_topics(self) -> set[str]:
        assert self._admin is not None
        request = [ConsumerGroupTopicPartitions(self.group)]
        futures = self._admin.list_consumer_group_offsets(request, request_timeout=ADMIN_TIMEOUT_S)
        answer = _answer(futures[self.group], f"committed offsets of group {self.group}")
        return {tp.topic for tp in answer.topic_partitions or [] if tp.offset >= 0}

    def groups(self) -> list[str]:
        """Every group the stores read here know of (ZooKeeper's ``/consumers``, the brokers'
        coordinators), to say what is there when the group asked for is not."""
        groups: set[str] = set()
        if self._in_zookeeper:
            assert self._zk is not None
            with contextlib.suppress(NoNodeError):  # a ZooKeeper no consumer ever used
                groups.update(self._zk.get_children(CONSUMERS_PATH))
        if in_kafka(self._storage):
            assert self._admin is not None
            future = self._admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S)
            listed = _answer(future, "the list of consumer groups")
            groups.update(group.group_id for group in listed.valid)
        return sorted(groups)

    def partitions(self, topics: Sequence[str]) -> dict[str, list[int]]:
        """``{topic: sorted partitions}``; a topic that does not exist has none."""
        if self._zk is not None:
            return topic_partitions(self._zk, topics)
        assert self._admin is not None
        metadata = self._admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        result: dict[str, list[int]] = {}
        for topic in topics:
            found = metadata.get(topic)
            result[topic] = sorted(found.partitions) if found is not None and found.error is None else []
        return result

    # -- offsets and owners -----------------------------------------------------------------

    def committed(self, tps: Sequence[TopicAndPartition]) -> dict[TopicAndPartition, Committed]:
        in_zookeeper = {tp: self._zookeeper_committed(tp) for tp in tps} if self._in_zookeeper else {}
        if self._kafka is None:
            return in_zookeeper
        in_kafka = self._kafka.fetch(tps)
        if not self._in_zookeeper:
            return {tp: Committed(in_kafka.get(tp)) for tp in tps}
        return {tp: _larger(in_zookeeper[tp], in_kafka.get(tp)) for tp in tps}

    def _zookeeper_committed(self, tp: TopicAndPartition) -> Committed:
        assert self._zk is not None
        try:
            data, stat = self._zk.get(offset_path(self.group, tp))
        except NoNodeError:
            return Committed(None)
        try:
            return Committed(int(data.decode("ascii").strip()), stat.mtime)
        except (UnicodeDecodeError, ValueError):
            logger.warning("offset node of %s in group %s holds %r, not an offset", tp, self.group, data[:40])
            return Committed(None, stat.mtime)

    def owners(self, tps: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, str | None]:
        """The consumer owning each partition: a ZooKeeper group's owner nodes, else the
        coordinator's member (``client.id/host``) whose assignment holds it."""
        wanted = list(tps)
        if self._zk is not None:
            return {tp: self._zookeeper_owner(tp) for tp in wanted}
        assigned = self._kafka_members()
        return {tp: assigned.get(tp) for tp in wanted}

    def _zookeeper_owner(self, tp: TopicAndPartition) -> str | None:
        assert self._zk is not None
        try:
            data, _ = self._zk.get(owner_path(self.group, tp))
        except NoNodeError:
            return None
        return data.decode("utf-8", "replace")

    def _kafka_members(self) -> dict[TopicAndPartition, str]:
        assert self._admin is not None
        futures = self._admin.describe_consumer_groups([self.group], request_timeout=ADMIN_TIMEOUT_S)
        try:
            description = _answer(futures[self.group], f"members of group {self.group}")
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if error is not None and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return {}  # no member has joined (yet): nobody owns anything
            raise
        owners: dict[TopicAndPartition, str] = {}
        for member in description.members or []:
            name = f"{member.client_id}/{(member.host or '').lstrip('/')}"
            assignment = member.assignment.topic_partitions if member.assignment is not None else []
            for tp in assignment or []:
                owners[TopicAndPartition(tp.topic, tp.partition)] = name
        return owners

    def close(self) -> None:
        # An AdminClient has no close: dropped here, librdkafka destroys it (and its connections).
        self._admin = None
        try:
            if self._kafka is not None:
                self._kafka.close()
        finally:
            if self._zk is not None:
                try:
                    self._zk.stop()
                finally:
                    self._zk.close()

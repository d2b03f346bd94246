"""KafkaGroupMembership against a real broker's group coordinator, with no ZooKeeper in the path:
members split the partitions, a leaving member's partitions move to the other after its revoke
callback ran, and the member itself never reads a record."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

import pytest

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition as TP
from reliable_kafka.kafka.offsets.group.membership import KafkaGroupMembership
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.store import CommitResult
from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.kafka.harness import produce
from tests.support import wait_until

PARTITIONS = 4


class RecordingListener:
    """Keeps what it owns, and checks the member still owned each partition while revoking it."""

    def __init__(self) -> None:
        self.member: KafkaGroupMembership | None = None
        self.owned: dict[TP, str] = {}
        self.revoked: list[list[TP]] = []
        self.owned_while_revoking: list[bool] = []
        self.failures: list[BaseException] = []
        self.lock = threading.Lock()

    def on_partitions_assigned(self, partitions: Mapping[TP, str]) -> None:
        with self.lock:
            self.owned.update(partitions)

    def on_partitions_revoked(self, partitions: list[TP]) -> None:
        assert self.member is not None
        with self.lock:
            self.owned_while_revoking += [self.member.owns(tp) for tp in partitions]
            self.revoked.append(partitions)
            for tp in partitions:
                self.owned.pop(tp, None)

    def on_rebalance_failed(self, error: BaseException) -> None:
        self.failures.append(error)


@pytest.fixture
def topic(local_cluster: LocalCluster) -> str:
    name = unique_name("members")
    local_cluster.create_topic(name, partitions=PARTITIONS)
    return name


def join(
    cluster: LocalCluster, group: str, topic: str, strategy: str, listener: RecordingListener | None = None
) -> tuple[KafkaGroupMembership, RecordingListener]:
    listener = listener or RecordingListener()
    member = KafkaGroupMembership(
        cluster.client_config(**{"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}),
        group,
        {topic: 1},
        listener,
        assignment_strategy=strategy,
    )
    listener.member = member
    member.start(timeout_s=60)
    return member, listener


@pytest.fixture
def members() -> Iterator[list[KafkaGroupMembership]]:
    started: list[KafkaGroupMembership] = []
    yield started
    for member in started:
        member.stop()


@pytest.mark.brokers("3.9", "4")
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_members_split_partitions_and_the_survivor_takes_all(
    local_cluster: LocalCluster, topic: str, strategy: str, members: list[KafkaGroupMembership]
) -> None:
    group = unique_name("group")
    produce(local_cluster.client_config(), topic, PARTITIONS, per_partition=5)
    a, a_listener = join(local_cluster, group, topic, strategy)
    members.append(a)
    wait_until(
        lambda: len(a_listener.owned) == PARTITIONS,
        timeout_s=60,
        what="the first member to own every partition",
    )
    b, b_listener = join(local_cluster, group, topic, strategy)
    members.append(b)

    def split() -> bool:
        with a_listener.lock, b_listener.lock:
            mine, theirs = set(a_listener.owned), set(b_listener.owned)
        return len(mine) == len(theirs) == PARTITIONS // 2 and not mine & theirs

    wait_until(split, timeout_s=60, what="the two members to split the partitions")
    assert set(a.owned_partitions()) == set(a_listener.owned)
    assert set(b.owned_partitions()) == set(b_listener.owned)

    b.stop()
    assert not b.owned_partitions()
    assert sorted(tp for revoked in b_listener.revoked for tp in revoked) == sorted(
        TP(topic, p) for p in range(PARTITIONS) if TP(topic, p) not in a_listener.owned
    )
    wait_until(
        lambda: len(a_listener.owned) == PARTITIONS, timeout_s=60, what="the survivor to own every partition"
    )
    # Every revoke ran while the partitions were still owned (their last blocks commit then).
    assert all(a_listener.owned_while_revoking + b_listener.owned_while_revoking)
    assert not a_listener.failures and not b_listener.failures
    given_up = sum(len(revoked) for revoked in a_listener.revoked)
    if strategy == "cooperative-sticky":
        # Incremental: the survivor gave up only what moved to the newcomer, and kept the rest.
        assert given_up == PARTITIONS // 2
    else:
        # Eager: everything on the join (4), then its half again on the leave (2).
        assert given_up == PARTITIONS + PARTITIONS // 2
    # Paused at once: the member itself never fetched what the partitions hold.
    assert all(position.offset < 0 for position in a.consumer.position(a.consumer.assignment())), (
        "the group member fetched records"
    )


class CommittingListener(RecordingListener):
    """Commits each revoked partition's offset through the member from another thread and waits
    for it, as a receiver's revoke flush waits for the push thread that commits its last block."""

    def __init__(self) -> None:
        super().__init__()
        self.commit_results: list[dict[TP, CommitResult]] = []

    def on_partitions_revoked(self, partitions: list[TP]) -> None:
        member = self.member
        assert member is not None
        if self.revoked:  # the first revoke only: the last one runs inside the member's close
            super().on_partitions_revoked(partitions)
            return
        # As a receiver's: through the member, on its poll thread.
        store = KafkaOffsetStore(member.consumer, member.group_id, owns=member.owns, run=member.call)
        pusher = threading.Thread(
            target=lambda: self.commit_results.append(store.commit({tp: 7 for tp in partitions}))
        )
        pusher.start()
        pusher.join(30)
        assert not pusher.is_alive(), "a commit from another thread did not finish within the revoke"
        super().on_partitions_revoked(partitions)


@pytest.mark.brokers("3.9", "4")
def test_a_commit_from_another_thread_completes_within_the_revoke(
    local_cluster: LocalCluster, topic: str, members: list[KafkaGroupMembership]
) -> None:
    """A second member joins (eager: the first revokes everything): the first member's revoke
    waits for commits of its partitions made on another thread, and they land while it still
    owns them. Before, such a commit waited until the callback returned (librdkafka holds a
    synchronous commit from another thread while the poll thread runs a rebalance callback), so
    a receiver's revoke flush timed out and its last blocks were read again by the next owner."""
    group = unique_name("group")
    a, listener = join(local_cluster, group, topic, "range", CommittingListener())
    members.append(a)
    wait_until(
        lambda: len(listener.owned) == PARTITIONS,
        timeout_s=60,
        what="the first member to own every partition",
    )
    b, _ = join(local_cluster, group, topic, "range")
    members.append(b)
    wait_until(lambda: bool(listener.revoked), timeout_s=60, what="the first member's revoke")
    assert isinstance(listener, CommittingListener)
    assert listener.commit_results[0] == {TP(topic, p): CommitResult.COMMITTED for p in range(PARTITIONS)}
    reader = KafkaOffsetStore.standalone(local_cluster.client_config(), group, owns=lambda _: False)
    try:
        committed = reader.fetch(TP(topic, p) for p in range(PARTITIONS))
        assert committed == {TP(topic, p): 7 for p in range(PARTITIONS)}
    finally:
        reader.close()

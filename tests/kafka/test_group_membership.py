"""The ZooKeeper group protocol against the real local ZooKeeper (no Kafka traffic needed)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.loggingsupport import BLATHER

from reliable_kafka.kafka.client.params import ConsumerGroupParams, ZooKeeperParams
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition as TP
from reliable_kafka.kafka.client.zk.client import close_zookeeper, connect_zookeeper
from reliable_kafka.kafka.offsets.store import CommitResult
from reliable_kafka.kafka.offsets.zk.group_membership import ZookeeperConsumerGroup
from reliable_kafka.kafka.offsets.zk.offset_store import ZooKeeperOffsetStore
from reliable_kafka.kafka.offsets.zk.ownership import CommitsInFlight, OwnershipGuardedStore
from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.kafka.harness import expire_session
from tests.support import wait_for_event, wait_until

pytestmark = pytest.mark.integration


class RecordingListener:
    def __init__(self) -> None:
        self.owned: dict[TP, str] = {}
        self.revoked: list[list[TP]] = []
        self.failures: list[BaseException] = []
        self.suspensions = 0
        self.resumptions = 0
        self.lock = threading.Lock()

    def on_partitions_revoked(self, partitions: list[TP]) -> None:
        with self.lock:
            self.revoked.append(partitions)
            for tp in partitions:
                self.owned.pop(tp, None)

    def on_partitions_assigned(self, partitions: Mapping[TP, str]) -> None:
        with self.lock:
            self.owned.update(partitions)

    def on_rebalance_failed(self, error: BaseException) -> None:
        self.failures.append(error)

    def on_session_suspended(self) -> None:
        self.suspensions += 1

    def on_session_resumed(self) -> None:
        self.resumptions += 1


def fake_topic(zk: KazooClient, topic: str, partitions: int) -> None:
    """Register a topic the way the controller does; the group protocol needs nothing more."""
    layout = {"version": 1, "partitions": {str(p): [0] for p in range(partitions)}}
    zk.ensure_path("/brokers/topics")
    if zk.exists(f"/brokers/topics/{topic}"):
        zk.set(f"/brokers/topics/{topic}", json.dumps(layout).encode())
    else:
        zk.create(f"/brokers/topics/{topic}", json.dumps(layout).encode())


@pytest.fixture
def zk_params(local_cluster: LocalCluster) -> ZooKeeperParams:
    return ZooKeeperParams(connect=local_cluster.zookeeper_connect, session_timeout_ms=6000)


@pytest.fixture
def admin(local_cluster: LocalCluster) -> Iterator[KazooClient]:
    zk = local_cluster.zookeeper_client()
    yield zk
    close_zookeeper(zk)


class Member:
    def __init__(self, zk_params: ZooKeeperParams, group: str, topics: dict[str, int]) -> None:
        self.zk = connect_zookeeper(zk_params)
        self.listener = RecordingListener()
        params = ConsumerGroupParams(group_id=group, rebalance_backoff_ms=200, rebalance_max_retries=20)
        self.group = ZookeeperConsumerGroup(self.zk, params, topics, self.listener)
        self.offsets = ZooKeeperOffsetStore(self.zk, group, self.group)

    def start(self) -> Member:
        self.group.start()
        return self

    def close(self) -> None:
        self.group.stop()
        close_zookeeper(self.zk)


def partitions_of(member: Member) -> list[int]:
    return sorted(tp.partition for tp in member.listener.owned)


def test_members_register_split_by_range_and_the_survivor_takes_everything(zk_params, admin) -> None:
    group, topic = unique_name("g"), unique_name("t")
    fake_topic(admin, topic, 5)
    first = Member(zk_params, group, {topic: 1}).start()
    second = None
    try:
        assert partitions_of(first) == [0, 1, 2, 3, 4]
        registration = json.loads(admin.get(f"/consumers/{group}/ids/{first.group.consumer_id}")[0])
        assert registration["version"] == 1
        assert registration["subscription"] == {topic: 1}
        assert registration["pattern"] == "static"
        assert int(registration["timestamp"]) > 0
        owner, stat = admin.get(f"/consumers/{group}/owners/{topic}/0")
        assert owner.decode() == f"{first.group.consumer_id}-0"
        assert stat.ephemeralOwner == first.zk.client_id[0]

        second = Member(zk_params, group, {topic: 1}).start()
        ordered = sorted([first, second], key=lambda m: m.group.consumer_id)
        wait_until(lambda: partitions_of(ordered[0]) == [0, 1, 2] and partitions_of(ordered[1]) == [3, 4])
        for p in range(5):
            holder = ordered[0] if p < 3 else ordered[1]
            value = admin.get(f"/consumers/{group}/owners/{topic}/{p}")[0].decode()
            assert value == f"{holder.group.consumer_id}-0"

        # Only the owner may commit.
        assert ordered[0].offsets.commit({TP(topic, 0): 10})[TP(topic, 0)] is CommitResult.COMMITTED
        assert ordered[1].offsets.commit({TP(topic, 0): 20})[TP(topic, 0)] is CommitResult.NOT_OWNER
        assert admin.get(f"/consumers/{group}/offsets/{topic}/0")[0] == b"10"

        ordered[1].close()
        wait_until(lambda: partitions_of(ordered[0]) == [0, 1, 2, 3, 4], what="the survivor to own all")
        assert not ordered[0].listener.failures
        # Partitions the survivor kept were never revoked: no needless re-reads.
        assert all(tp.partition >= 3 for revoked in ordered[0].listener.revoked for tp in revoked)
        assert admin.get_children(f"/consumers/{group}/ids") == [ordered[0].group.consumer_id]
    finally:
        first.close()
        if second is not None:
            second.close()
    assert admin.get_children(f"/consumers/{group}/ids") == []
    assert admin.get_children(f"/consumers/{group}/owners/{topic}") == []


def test_new_partitions_of_a_topic_are_picked_up(zk_params, admin) -> None:
    group, topic = unique_name("g"), unique_name("t")
    fake_topic(admin, topic, 2)
    member = Member(zk_params, group, {topic: 2}).start()
    try:
        assert member.listener.owned == {
            TP(topic, 0): f"{member.group.consumer_id}-0",
            TP(topic, 1): f"{member.group.consumer_id}-1",
        }
        fake_topic(admin, topic, 4)
        wait_until(lambda: partitions_of(member) == [0, 1, 2, 3], what="partitions 2 and 3")
    finally:
        member.close()


def test_a_partition_still_held_by_another_member_is_waited_for(zk_params, admin, caplog) -> None:
    group, topic = unique_name("g"), unique_name("t")
    fake_topic(admin, topic, 1)
    # A foreign owner node: a departed member that has not yet released (its session lingers).
    admin.create(f"/consumers/{group}/owners/{topic}/0", b"ghost-0", makepath=True)
    caplog.set_level(logging.INFO, logger="reliable_kafka.kafka.offsets.zk.group_membership")
    member = Member(zk_params, group, {topic: 1})
    starter = threading.Thread(target=member.start)
    starter.start()

    def attempts_that_found_it_held() -> int:
        return sum("still owned by ghost-0" in record.getMessage() for record in caplog.records)

    try:
        # Two attempts found it held, and it was not taken in between.
        wait_until(lambda: attempts_that_found_it_held() >= 2, what="two claims finding the partition held")
        assert member.listener.owned == {}
        admin.delete(f"/consumers/{group}/owners/{topic}/0")
        starter.join(20)
        assert partitions_of(member) == [0]
    finally:
        starter.join(20)
        member.close()


@pytest.mark.slow
def test_zookeeper_restart_keeps_or_restores_membership_and_ownership(
    zk_params, local_cluster, admin
) -> None:
    group, topic = unique_name("g"), unique_name("t")
    fake_topic(admin, topic, 2)
    member = Member(zk_params, group, {topic: 1}).start()
    try:
        assert member.offsets.commit({TP(topic, 0): 5})[TP(topic, 0)] is CommitResult.COMMITTED
        local_cluster.restart_zookeeper()
        wait_until(lambda: member.zk.connected, timeout_s=30, what="the member to reconnect")

        def registered_and_owning() -> bool:
            try:
                return (
                    member.zk.exists(f"/consumers/{group}/ids/{member.group.consumer_id}") is not None
                    and partitions_of(member) == [0, 1]
                    and member.zk.exists(f"/consumers/{group}/owners/{topic}/1") is not None
                )
            except Exception:
                return False

        wait_until(registered_and_owning, timeout_s=30, what="registration and ownership after the restart")
        # The outage paused the consumers; they resumed if the session survived it, else (a
        # slow restart) its partitions were revoked and claimed afresh.
        assert member.listener.suspensions >= 1
        assert (member.listener.resumptions >= 1) != (member.group.generation > 0)
        wait_until(
            lambda: member.offsets.commit({TP(topic, 0): 7})[TP(topic, 0)] is CommitResult.COMMITTED,
            timeout_s=30,
            what="a commit after the restart",
        )
        assert member.offsets.read(TP(topic, 0)) == 7
    finally:
        member.close()


def test_session_expiry_voids_claims_then_reregisters_and_reclaims(zk_params, admin) -> None:
    group, topic = unique_name("g"), unique_name("t")
    fake_topic(admin, topic, 2)
    member = Member(zk_params, group, {topic: 1}).start()
    try:
        old_session = member.zk.client_id[0]
        generation = member.group.generation
        expire_session(zk_params.connect, member.zk)
        wait_until(
            lambda: member.group.generation > generation, timeout_s=20, what="the session loss to be seen"
        )
        # Claims of the dead session can no longer commit, whatever the timing of the rebalance.
        wait_until(
            lambda: bool(member.listener.revoked),
            timeout_s=20,
            what="consumers of the lost session to be stopped",
        )

        def owning_again() -> bool:
            client_id = member.zk.client_id
            if client_id is None or client_id[0] == old_session or partitions_of(member) != [0, 1]:
                return False
            _, stat = admin.get(f"/consumers/{group}/owners/{topic}/0")
            registered = admin.exists(f"/consumers/{group}/ids/{member.group.consumer_id}")
            return stat.ephemeralOwner == client_id[0] and registered is not None

        wait_until(owning_again, timeout_s=30, what="re-registration and re-claim in the new session")
        # A lost session's partitions are revoked and claimed afresh, never resumed.
        assert member.listener.resumptions == 0
        assert member.offsets.commit({TP(topic, 1): 3})[TP(topic, 1)] is CommitResult.COMMITTED
    finally:
        member.close()


def test_digest_auth_and_acls_protect_ownership_and_offsets_and_the_secret_is_never_logged(
    local_cluster: LocalCluster, admin: KazooClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # tests/conftest.py keeps kazoo.client at WARNING; open it down to BLATHER (below DEBUG),
    # where kazoo logs the session password. Last, as it also sets the capture handler's level.
    caplog.set_level(BLATHER, logger="kazoo.client")
    group, topic = unique_name("g"), unique_name("t")
    fake_topic(admin, topic, 1)
    secure = ZooKeeperParams(connect=local_cluster.zookeeper_connect, auth="rk-user:s3cret-pw", set_acl=True)
    member = Member(secure, group, {topic: 1}).start()
    try:
        assert member.offsets.commit({TP(topic, 0): 42})[TP(topic, 0)] is CommitResult.COMMITTED
        offset = f"/consumers/{group}/offsets/{topic}/0"
        # World-readable, as Kafka's secure ACLs are, so offset tools keep working...
        assert admin.get(offset)[0] == b"42"
        acls, _ = admin.get_acls(offset)
        assert {(acl.id.scheme, acl.perms) for acl in acls} == {("digest", 31), ("world", 1)}
        # ...but only the group's user may change offsets or ownership.
        with pytest.raises(NoAuthError):
            admin.set(offset, b"0")
        with pytest.raises(NoAuthError):
            admin.delete(f"/consumers/{group}/owners/{topic}/0")
    finally:
        member.close()
    # kazoo did log the auth request and the session: the test would see a leak.
    assert "Auth(auth_type=0, scheme='digest', auth='***')" in caplog.text
    assert "session_passwd: '***'" in caplog.text
    assert "s3cret-pw" not in caplog.text


def test_a_stop_while_waiting_out_a_stale_registration_ends_at_once(zk_params, admin) -> None:
    """_register waited out another session's node of our consumer.id in time.sleep steps: a
    stop waited for its join bound (16 s here) and then released claims beside a live rebalance."""
    group, topic = unique_name("stale"), unique_name("t")
    fake_topic(admin, topic, 2)
    params = ConsumerGroupParams(group_id=group, consumer_id="fixed", rebalance_backoff_ms=200)
    zk = connect_zookeeper(zk_params)
    held_by = connect_zookeeper(zk_params)
    try:
        # Our registration, held by another live session (as a stale one is until it expires).
        held_by.create(f"/consumers/{group}/ids/{group}_fixed", b"{}", ephemeral=True, makepath=True)
        member = ZookeeperConsumerGroup(zk, params, {topic: 1}, RecordingListener())
        starting, failures = _start_in_a_thread(member)
        wait_until(
            lambda: member._thread is not None and member._thread.is_alive(), what="its rebalance thread"
        )
        member.stop()
        assert not member._thread.is_alive()
        starting.join()
        assert len(failures) == 1 and "stopped while starting" in str(failures[0])
        assert member.owned_partitions() == {}
    finally:
        close_zookeeper(held_by)
        close_zookeeper(zk)


def test_a_stop_with_a_deadline_waits_for_a_stuck_rebalance_thread_at_most_that_long(
    zk_params, admin
) -> None:
    """A caller's deadline (the consumer connector's shutdown) shortens the join of a rebalance
    thread stuck in the listener; the claims are then left to end with the session."""
    group, topic = unique_name("deadline"), unique_name("t")
    fake_topic(admin, topic, 1)
    entered, release = threading.Event(), threading.Event()

    class StuckListener(RecordingListener):
        def on_partitions_assigned(self, partitions: Mapping[TP, str]) -> None:
            entered.set()
            assert release.wait(60)
            super().on_partitions_assigned(partitions)

    zk = connect_zookeeper(zk_params)
    params = ConsumerGroupParams(group_id=group, rebalance_backoff_ms=200)
    member = ZookeeperConsumerGroup(zk, params, {topic: 1}, StuckListener(), session_timeout_ms=6000)
    starting, failures = _start_in_a_thread(member)
    try:
        assert entered.wait(20)
        started = time.monotonic()
        member.stop(timeout_s=0.5)
        # Its own bound is the session timeout + backoff + 10 s (16.2 s here).
        assert time.monotonic() - started < 10.0
        assert member._thread is not None and member._thread.is_alive()
        starting.join(20)
        assert len(failures) == 1 and "stopped while starting" in str(failures[0])
    finally:
        release.set()
        starting.join(20)
        if member._thread is not None:
            member._thread.join(20)
        close_zookeeper(zk)


def _start_in_a_thread(member: ZookeeperConsumerGroup) -> tuple[threading.Thread, list[BaseException]]:
    """``member.start()`` on a thread of its own, started; what it raised lands in the list."""
    failures: list[BaseException] = []

    def start() -> None:
        try:
            member.start()
        except BaseException as exc:
            failures.append(exc)

    starting = threading.Thread(target=start, name="test-start")
    starting.start()
    return starting, failures


class RecordingCommitsInFlight(CommitsInFlight):
    """The group's own fence, recording each wait a release asked for and what it came to."""

    def __init__(self, lock: threading.RLock, bound_s: float) -> None:
        super().__init__(lock, bound_s)
        self.waits: list[tuple[float, bool]] = []

    def wait_for(self, partitions: Iterable[TP]) -> bool:
        ended = super().wait_for(partitions)
        self.waits.append((self.bound_s, ended))
        return ended


class SlowStore:
    """An offset store whose commit is out until the test lets it finish (a Kafka commit retrying
    against a coordinator that does not answer)."""

    def __init__(self) -> None:
        self.entered, self.finish = threading.Event(), threading.Event()

    def fetch(self, partitions: Iterable[TP]) -> dict[TP, int | None]:
        return dict.fromkeys(partitions)

    def commit(self, offsets: Mapping[TP, int]) -> dict[TP, CommitResult]:
        self.entered.set()
        assert self.finish.wait(60)
        return dict.fromkeys(offsets, CommitResult.COMMITTED)

    def repair(self, tp: TP, rejected: int, reset_to: int) -> CommitResult:
        return CommitResult.UNCHANGED

    def close(self) -> None:
        pass


def test_a_revoke_during_a_slow_commit_returns_within_its_bound(zk_params, admin) -> None:
    """The commit path held the ownership lock across the ZooKeeper write and the Kafka commit (with
    their retries): a release waited that long. Now the release withdraws the claims at once, waits
    for the commit already out at most its bound, and the owner node goes."""
    group, topic = unique_name("slowcommit"), unique_name("t")
    fake_topic(admin, topic, 1)
    member = Member(zk_params, group, {topic: 1}).start()
    fence = RecordingCommitsInFlight(member.group._ownership_lock, bound_s=0.2)
    member.group.commits_in_flight = fence
    slow = SlowStore()
    store = OwnershipGuardedStore(slow, member.group)
    tp = TP(topic, 0)
    committing = threading.Thread(target=store.commit, args=({tp: 5},), daemon=True)
    stopped = threading.Event()
    stopping = threading.Thread(target=lambda: (member.group.stop(), stopped.set()), daemon=True)
    try:
        assert member.listener.owned == {tp: member.group.claim_of(tp).thread_id}  # type: ignore[union-attr]
        committing.start()
        wait_for_event(slow.entered, what="the commit to be out")
        stopping.start()
        # The revoke ends while the commit is still out: it waited once, for its bound, in vain.
        wait_for_event(stopped, what="the revoke to return")
        assert committing.is_alive() and not slow.finish.is_set()
        assert fence.waits == [(0.2, False)]
        assert member.group.claim_of(tp) is None
        assert not admin.exists(f"/consumers/{group}/owners/{topic}/0")
    finally:
        slow.finish.set()
        committing.join(20)
        stopping.join(20)
        close_zookeeper(member.zk)


def test_a_release_waits_for_a_commit_out_only_until_it_ends() -> None:
    """The fence without ZooKeeper: a release's wait ends as the commit out ends, not at its bound."""
    fence = CommitsInFlight(threading.RLock(), bound_s=60.0)
    tp = TP("t", 0)
    out, finish = threading.Event(), threading.Event()

    def commit() -> None:
        with fence.out([tp]):
            out.set()
            assert finish.wait(60)

    committing = threading.Thread(target=commit, daemon=True)
    committing.start()
    wait_for_event(out, what="the commit to be out")
    assert fence.wait_for([TP("t", 1)])  # another partition's release does not wait at all
    released = threading.Event()
    releasing = threading.Thread(target=lambda: released.set() if fence.wait_for([tp]) else None, daemon=True)
    releasing.start()
    assert not released.is_set()
    finish.set()
    wait_for_event(released, what="the release once the commit ended")
    committing.join(20)
    releasing.join(20)

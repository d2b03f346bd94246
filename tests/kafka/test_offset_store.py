"""Offset store rules: next offset in ASCII, never backwards, never for a partition not owned."""

from __future__ import annotations

import pytest

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import offset_path, owner_path
from reliable_kafka.kafka.offsets.store import CommitResult
from reliable_kafka.kafka.offsets.zk.offset_store import CorruptOffsetError, ZooKeeperOffsetStore
from reliable_kafka.kafka.offsets.zk.ownership import Claim
from tests.kafka.fake_zookeeper import FakeZooKeeper, StaticOwnership

GROUP = "g"
TP0 = TopicAndPartition("t", 0)
TP1 = TopicAndPartition("t", 1)


@pytest.fixture
def zk() -> FakeZooKeeper:
    return FakeZooKeeper(session_id=7)


@pytest.fixture
def ownership() -> StaticOwnership:
    return StaticOwnership()


def own(zk: FakeZooKeeper, ownership: StaticOwnership, tp: TopicAndPartition, thread: str = "c-0") -> None:
    zk.put(owner_path(GROUP, tp), thread.encode(), owner=zk.session_id)
    ownership.claims[tp] = Claim(thread, 0, zk.session_id, ownership.generation)


def store(zk: FakeZooKeeper, ownership: StaticOwnership) -> ZooKeeperOffsetStore:
    return ZooKeeperOffsetStore(zk, GROUP, ownership, retry_for_s=0.5)  # type: ignore[arg-type]


def value(zk: FakeZooKeeper, tp: TopicAndPartition) -> bytes:
    return zk.get(offset_path(GROUP, tp))[0]


def test_commit_writes_the_next_offset_in_ascii_and_reads_it_back(zk, ownership) -> None:
    own(zk, ownership, TP0)
    offsets = store(zk, ownership)
    assert offsets.read(TP0) is None
    assert offsets.commit({TP0: 30}) == {TP0: CommitResult.COMMITTED}
    assert value(zk, TP0) == b"30"
    assert store(zk, ownership).read(TP0) == 30


def test_offset_never_moves_backwards(zk, ownership) -> None:
    own(zk, ownership, TP0)
    offsets = store(zk, ownership)
    assert offsets.commit({TP0: 50})[TP0] is CommitResult.COMMITTED
    assert offsets.commit({TP0: 40})[TP0] is CommitResult.BACKWARDS
    assert offsets.commit({TP0: 50})[TP0] is CommitResult.UNCHANGED
    assert value(zk, TP0) == b"50"


def test_a_larger_offset_written_behind_our_back_is_not_overwritten_by_a_smaller_one(zk, ownership) -> None:
    own(zk, ownership, TP0)
    offsets = store(zk, ownership)
    offsets.commit({TP0: 10})
    zk.bump(offset_path(GROUP, TP0), b"100")  # the cache says 10; ZooKeeper says 100
    assert offsets.commit({TP0: 20})[TP0] is CommitResult.BACKWARDS
    assert value(zk, TP0) == b"100"
    assert offsets.commit({TP0: 120})[TP0] is CommitResult.COMMITTED
    assert value(zk, TP0) == b"120"


def test_no_commit_without_a_local_claim(zk, ownership) -> None:
    zk.put(owner_path(GROUP, TP0), b"c-0", owner=zk.session_id)  # node there, claim not
    assert store(zk, ownership).commit({TP0: 5})[TP0] is CommitResult.NOT_OWNER
    assert offset_path(GROUP, TP0) not in zk.nodes


def test_no_commit_when_another_consumer_holds_the_owner_node(zk, ownership) -> None:
    own(zk, ownership, TP0)
    offsets = store(zk, ownership)
    offsets.commit({TP0: 5})
    # Our node went and another member's took its place (version moved on).
    zk.put(owner_path(GROUP, TP0), b"other-0", owner=99)
    zk.bump(owner_path(GROUP, TP0), b"other-0")
    assert offsets.commit({TP0: 9})[TP0] is CommitResult.NOT_OWNER
    assert value(zk, TP0) == b"5"


def test_claims_of_an_earlier_session_or_generation_are_void(zk, ownership) -> None:
    own(zk, ownership, TP0)
    own(zk, ownership, TP1)
    offsets = store(zk, ownership)
    ownership.generation += 1  # the group saw its session die: TP0 and TP1 claims are void
    assert offsets.commit({TP0: 3, TP1: 3}) == {TP0: CommitResult.NOT_OWNER, TP1: CommitResult.NOT_OWNER}
    own(zk, ownership, TP0)
    zk.session_id = 8  # a new session: the claim of session 7 is void as well
    assert offsets.commit({TP0: 3})[TP0] is CommitResult.NOT_OWNER
    assert offset_path(GROUP, TP0) not in zk.nodes


def test_one_multi_op_commits_many_partitions_and_one_refusal_does_not_block_the_rest(zk, ownership) -> None:
    own(zk, ownership, TP0)
    own(zk, ownership, TP1)
    offsets = store(zk, ownership)
    assert offsets.commit({TP0: 1, TP1: 2}) == {TP0: CommitResult.COMMITTED, TP1: CommitResult.COMMITTED}
    assert zk.multi_ops == 1
    zk.put(owner_path(GROUP, TP1), b"other-0", owner=99)
    zk.bump(owner_path(GROUP, TP1), b"other-0")
    assert offsets.commit({TP0: 4, TP1: 4}) == {TP0: CommitResult.COMMITTED, TP1: CommitResult.NOT_OWNER}
    assert (value(zk, TP0), value(zk, TP1)) == (b"4", b"2")


def test_a_corrupt_offset_is_an_error_naming_the_path(zk, ownership) -> None:
    zk.put(offset_path(GROUP, TP0), b"banana")
    with pytest.raises(CorruptOffsetError, match="/consumers/g/offsets/t/0"):
        store(zk, ownership).read(TP0)


def test_connection_loss_is_retried_then_raised(zk, ownership) -> None:
    from kazoo.exceptions import ConnectionLoss

    own(zk, ownership, TP0)
    zk.connected = False
    with pytest.raises(ConnectionLoss):
        store(zk, ownership).commit({TP0: 1})

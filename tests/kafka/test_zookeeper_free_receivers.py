"""Receivers with no ZooKeeper at all: Kafka's group coordinator splits the partitions among them
and keeps their offsets, committed through each receiver's own group member. Kafka 3.9 and 4.x
(KRaft: the cluster has no ZooKeeper to fall back on)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import Consumer, TopicPartition

from reliable_kafka.kafka import ReliableKafkaReceiver, ranges_in_metadata
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.store import CommitResult
from reliable_kafka.kafka.receiver import consumer_connector
from reliable_kafka.local import LocalCluster
from reliable_kafka.receiver import ReceivedBlockInfo
from reliable_kafka.storage import StorageLevel
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.kafka.harness import (
    RecordingTracker,
    RunningReceiver,
    assert_exactly_once,
    assert_resumed_within_one_block,
    produce,
    start_receiver_child,
    wal_blocks,
)
from tests.kafka.kafka_tools import describe_group
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.brokers("3.9", "4")]


GROUP_PARAMS = {
    "auto.offset.reset": "smallest",
    # A member that leaves without a word is noticed this soon; the broker's minimum is 6 s.
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "500",
}


def kafka_committed(
    cluster: LocalCluster, group: str, tps: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """The group's offsets in the coordinator, as any other client reads them (-1: none)."""
    reader = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        answers = reader.committed([TopicPartition(t, p) for t, p in tps], timeout=10)
    finally:
        reader.close()
    return {(a.topic, a.partition): a.offset if a.offset >= 0 else -1 for a in answers}


def zookeeper_free_receiver(
    cluster: LocalCluster, group: str, topics: Mapping[str, int]
) -> ReliableKafkaReceiver:
    return ReliableKafkaReceiver(
        None, group, topics, {**cluster.client_config(), **GROUP_PARAMS}, StorageLevel.MEMORY_AND_DISK_SER
    )


def test_no_zookeeper_process_on_kraft(local_cluster: LocalCluster) -> None:
    """The 4.x runs of this module prove they need no ZooKeeper: there is none to reach."""
    if local_cluster.kafka == "4":
        assert not local_cluster.has_zookeeper


@pytest.mark.docker_half
def test_thirty_messages_with_the_wal_on_through_the_group_coordinator(
    kafka_cluster: ClusterUnderTest, tmp_path: Path
) -> None:
    topic, group = unique_name("thirty"), unique_name("g")
    kafka_cluster.create_topic(topic, 1)
    sent = produce(kafka_cluster.client_config(), topic, 1, 30)
    offsets_when_stored: list[tuple[int, int]] = []

    def before_report(info: ReceivedBlockInfo) -> None:
        # Stored in the block manager and the WAL; its offsets must not be committed yet.
        (block_range,) = ranges_in_metadata(info.metadata)
        committed = kafka_committed(kafka_cluster, group, [(topic, 0)])[(topic, 0)]
        offsets_when_stored.append((committed, block_range.fromOffset))

    receiver = zookeeper_free_receiver(kafka_cluster, group, {topic: 1})
    assert receiver.params.zookeeper is None
    running = RunningReceiver(receiver, tmp_path, tracker=RecordingTracker(before_report))
    try:
        wait_until(
            lambda: kafka_committed(kafka_cluster, group, [(topic, 0)]) == {(topic, 0): 30},
            timeout_s=60,
            what="offset 30 in the group coordinator",
        )
    finally:
        running.stop()
    assert kafka_committed(kafka_cluster, group, [(topic, 0)]) == {(topic, 0): 30}
    assert offsets_when_stored[0][0] == -1, "an offset was committed before the first block was stored"
    for committed, from_offset in offsets_when_stored:
        assert committed <= from_offset, f"offset {committed} committed before the block from {from_offset}"
    assert_exactly_once(running.records(), {(topic, 0): sent[0]})


@dataclass(frozen=True)
class CommitCall:
    store: int  # id() of the receiver's offset store
    tp: TopicAndPartition
    offset: int
    owned_before: bool  # by the committing receiver's group member, when the call began
    result: CommitResult
    at: float


class AuditedKafkaOffsetStore(KafkaOffsetStore):
    """KafkaOffsetStore recording every commit call, and whether its receiver owned each partition."""

    calls: ClassVar[list[CommitCall]] = []
    lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self, consumer: Consumer, group_id: str, *, owns: Callable[[TopicAndPartition], bool], **options: Any
    ) -> None:
        super().__init__(consumer, group_id, owns=owns, **options)
        self.member_owns = owns

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        owned = {tp: self.member_owns(tp) for tp in offsets}
        results = super().commit(offsets)
        at = time.monotonic()
        with self.lock:
            self.calls += [
                CommitCall(id(self), tp, offset, owned[tp], results[tp], at) for tp, offset in offsets.items()
            ]
        return results


@pytest.fixture
def audited_commits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[CommitCall]]:
    AuditedKafkaOffsetStore.calls = []
    monkeypatch.setattr(consumer_connector, "KafkaOffsetStore", AuditedKafkaOffsetStore)
    yield AuditedKafkaOffsetStore.calls


def test_two_receivers_split_the_partitions_and_the_survivor_takes_them_all(
    local_cluster: LocalCluster, tmp_path: Path, audited_commits: list[CommitCall]
) -> None:
    topic, group, partitions = unique_name("split"), unique_name("g"), 4
    local_cluster.create_topic(topic, partitions)
    sent: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def more(count: int) -> None:
        start = len(sent[0])
        for p, values in produce(
            local_cluster.client_config(), topic, partitions, count, start=start
        ).items():
            sent[p] += values

    more(300)
    a = RunningReceiver(
        zookeeper_free_receiver(local_cluster, group, {topic: 1}), tmp_path / "a", stream_id=0
    )
    b: RunningReceiver | None = None
    b_left = False
    try:
        owned = a.receiver.connector.owned_partitions  # type: ignore[attr-defined]
        wait_until(
            lambda: len(owned()) == partitions, timeout_s=60, what="the first receiver to own every partition"
        )
        b = RunningReceiver(
            zookeeper_free_receiver(local_cluster, group, {topic: 1}), tmp_path / "b", stream_id=1
        )
        b_owned = b.receiver.connector.owned_partitions  # type: ignore[attr-defined]

        def split() -> bool:
            mine, theirs = set(owned()), set(b_owned())
            return len(mine) == len(theirs) == partitions // 2 and not mine & theirs

        wait_until(split, timeout_s=60, what="the two receivers to split the partitions")
        b_store = id(b.receiver.connector.offsets)  # type: ignore[attr-defined]
        more(300)
        b_partitions = set(b_owned())
        wait_until(
            lambda: any(c.store == b_store and c.result is CommitResult.COMMITTED for c in audited_commits),
            timeout_s=60,
            what="the second receiver to commit",
        )
        b.stop()
        b_left, b_gone_at = True, time.monotonic()
        wait_until(
            lambda: len(owned()) == partitions, timeout_s=60, what="the survivor to own every partition"
        )
        more(300)
        ends = {(topic, p): len(values) for p, values in sent.items()}
        wait_until(
            lambda: kafka_committed(local_cluster, group, list(ends)) == ends,
            timeout_s=90,
            what="every partition committed to its log end by the survivor",
        )
    finally:
        if b is not None and not b_left:
            b.stop()
        a.stop()

    # Nothing lost; what the survivor read again fits in what the leaver stored without committing.
    records = a.records() + (b.records() if b is not None else [])
    seen = Counter((r[2], r[3], r[4]) for r in records)
    for p, values in sent.items():
        assert all(seen[(topic, p, o)] >= 1 for o in range(len(values))), f"partition {p}: records lost"
    assert kafka_committed(local_cluster, group, list(ends)) == ends

    # A partition is committed only by the receiver that owns it, and never by the leaver after it left.
    assert audited_commits, "no commit went through the audited store"
    for call in audited_commits:
        if call.result is CommitResult.COMMITTED:
            assert call.owned_before, f"{call.tp} committed at {call.offset} by a receiver not owning it"
        if call.store == b_store:
            assert call.at <= b_gone_at, f"the receiver that left committed {call.tp} after leaving"
            assert call.tp in b_partitions or call.result is not CommitResult.COMMITTED
    survivors = {c.tp for c in audited_commits if c.store != b_store and c.result is CommitResult.COMMITTED}
    assert survivors == {TopicAndPartition(topic, p) for p in range(partitions)}


def test_kafka_consumer_groups_describes_the_group_with_lag_zero_after_a_graceful_stop(
    local_cluster: LocalCluster,
) -> None:
    topic, group = unique_name("tooling"), unique_name("g")
    local_cluster.create_topic(topic, 3)
    sent = produce(local_cluster.client_config(), topic, 3, 500)
    ends = {(topic, p): len(values) for p, values in sent.items()}
    running = RunningReceiver(zookeeper_free_receiver(local_cluster, group, {topic: 1}), None)
    try:
        wait_until(
            lambda: kafka_committed(local_cluster, group, list(ends)) == ends,
            timeout_s=60,
            what="every partition committed to its log end",
        )
    finally:
        running.stop()

    described = describe_group(local_cluster, group)
    assert sorted(described) == sorted(ends)
    for key, end in ends.items():
        row = described[key]
        assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == (str(end), str(end), "0"), row


def start_child(
    cluster: LocalCluster, group: str, topic: str, checkpoint: Path, max_rate: int, report_delay_ms: int = 0
) -> subprocess.Popen[str]:
    """tests.kafka.receiver_child with no zkQuorum."""
    params = {**cluster.client_config(), **GROUP_PARAMS}
    return start_receiver_child("", group, topic, checkpoint, max_rate, report_delay_ms, params)


@pytest.mark.slow
def test_receiver_sigkill_mid_stream_then_a_new_member_loses_nothing_and_duplicates_at_most_one_block(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic, group = unique_name("kill"), unique_name("g")
    local_cluster.create_topic(topic, 2)
    sent = produce(local_cluster.client_config(), topic, 2, 15_000)
    total = sum(len(v) for v in sent.values())
    tps = [(topic, p) for p in sent]

    # Blocks wait 150 ms between storing and committing: the kill most likely lands in that window.
    first = start_child(local_cluster, group, topic, tmp_path / "run1", max_rate=6000, report_delay_ms=150)
    try:

        def some_committed() -> bool:
            offsets = kafka_committed(local_cluster, group, tps)
            return all(o > 0 for o in offsets.values()) and sum(offsets.values()) >= total // 4

        wait_until(some_committed, timeout_s=30, what="the first receiver to commit a quarter of the data")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    at_kill = kafka_committed(local_cluster, group, tps)
    assert sum(at_kill.values()) < total, "killed too late to be mid-stream"

    # The killed member never left: the coordinator hands its partitions over once its session
    # (GROUP_PARAMS: 6 s) expires.
    second = start_child(local_cluster, group, topic, tmp_path / "run2", max_rate=0)
    ends = {(topic, p): len(values) for p, values in sent.items()}
    try:
        wait_until(
            lambda: kafka_committed(local_cluster, group, tps) == ends,
            timeout_s=90,
            what="the log end, committed",
        )
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
    assert kafka_committed(local_cluster, group, tps) == ends, "a graceful stop left offsets short"

    # The new member started exactly at the offset committed through the killed one.
    assert_resumed_within_one_block(
        wal_blocks(tmp_path / "run1"),
        wal_blocks(tmp_path / "run2"),
        topic,
        sent,
        {p: at_kill[(topic, p)] for p in sent},
    )

"""Failures the reliable receiver must survive without losing data: its own process killed,
a group member leaving, and the broker killed and restarted under it."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import traceback
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kazoo.exceptions import NoNodeError

from reliable_kafka.kafka import ReliableKafkaReceiver, range_assign
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import owner_path
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.zk.range_assignor import consumer_threads_per_topic
from reliable_kafka.local import LocalCluster
from reliable_kafka.receiver import ReceivedBlockInfo
from reliable_kafka.storage import StorageLevel, decode_block
from tests.cluster_backends import unique_name
from tests.kafka.harness import (
    FAST_GROUP_PARAMS,
    OFFSET_STORES,
    STORE_PARAMS,
    CommittedOffsets,
    RecordingTracker,
    RunningReceiver,
    assert_exactly_once,
    assert_resumed_within_one_block,
    committed_offset,
    expire_session,
    offsets_reach,
    produce,
    start_receiver_child,
    streaming_settings,
    wal_blocks,
)
from tests.small_disk import resize, small_tmpfs
from tests.support import wait_until

pytestmark = pytest.mark.integration


def reliable_receiver(
    cluster: LocalCluster, group: str, topic: str, extra: Mapping[str, Any] | None = None, **kwargs: Any
) -> ReliableKafkaReceiver:
    """One consumer thread on ``topic``, FAST_GROUP_PARAMS under ``extra``, serialised storage."""
    return ReliableKafkaReceiver(
        cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**cluster.client_config(), **FAST_GROUP_PARAMS, **(extra or {})},
        StorageLevel.MEMORY_AND_DISK_SER,
        **kwargs,
    )


def start_child(
    cluster: LocalCluster,
    group: str,
    topic: str,
    checkpoint: Path,
    max_rate: int,
    report_delay_ms: int = 0,
    extra: Mapping[str, Any] | None = None,
) -> subprocess.Popen[str]:
    params = {**cluster.client_config(), **FAST_GROUP_PARAMS, **(extra or {})}
    return start_receiver_child(
        cluster.zookeeper_connect, group, topic, checkpoint, max_rate, report_delay_ms, params
    )


@pytest.mark.slow
@pytest.mark.parametrize("store", OFFSET_STORES)
def test_sigkill_mid_stream_then_a_new_receiver_loses_nothing_and_duplicates_at_most_one_block(
    local_cluster: LocalCluster, admin_zk: Any, tmp_path: Path, store: str
) -> None:
    topic, group = unique_name("kill"), unique_name("g")
    local_cluster.create_topic(topic, 2)
    sent = produce(local_cluster.client_config(), topic, 2, 15_000)
    total = sum(len(v) for v in sent.values())
    committed = CommittedOffsets(store, admin_zk, local_cluster.client_config(), group)
    store_params = STORE_PARAMS[store]

    # Blocks wait 150 ms between storing and committing: the kill most likely lands in that
    # window, leaving the one stored-but-uncommitted block the bound allows.
    first = start_child(
        local_cluster, group, topic, tmp_path / "run1", max_rate=6000, report_delay_ms=150, extra=store_params
    )
    try:

        def some_committed() -> bool:
            offsets = [committed.highest(topic, p) or 0 for p in (0, 1)]
            return all(o > 0 for o in offsets) and sum(offsets) >= total // 4

        wait_until(some_committed, timeout_s=30, what="the first receiver to commit a quarter of the data")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    at_kill = [committed.highest(topic, p) for p in (0, 1)]
    assert sum(o or 0 for o in at_kill) < total, "killed too late to be mid-stream"

    second = start_child(local_cluster, group, topic, tmp_path / "run2", max_rate=0, extra=store_params)
    ends = {(topic, p): len(values) for p, values in sent.items()}
    try:
        wait_until(committed.reach(ends), timeout_s=60, what="the second receiver to reach the log end")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
    try:
        assert committed.reach(ends)(), "a graceful stop left offsets short of the log end"
        committed.assert_nothing_outside_the_store(topic, sent)
    finally:
        committed.close()

    # Re-read only what was stored but not yet committed; the second receiver started exactly at
    # the committed offset.
    assert_resumed_within_one_block(
        wal_blocks(tmp_path / "run1"),
        wal_blocks(tmp_path / "run2"),
        topic,
        sent,
        {p: at_kill[p] or 0 for p in sent},
    )


def record_kafka_commits(
    monkeypatch: pytest.MonkeyPatch, zk: Any, group: str
) -> list[tuple[int, TopicAndPartition, str | None]]:
    """Every OffsetCommit a KafkaOffsetStore sends: (store, partition, owner thread in ZooKeeper then)."""
    sent: list[tuple[int, TopicAndPartition, str | None]] = []
    send = KafkaOffsetStore._send

    def recording(store: KafkaOffsetStore, pending: dict[TopicAndPartition, int]) -> Any:
        for tp in pending:
            try:
                owner: str | None = zk.get(owner_path(group, tp))[0].decode()
            except NoNodeError:
                owner = None
            sent.append((id(store), tp, owner))
        return send(store, pending)

    monkeypatch.setattr(KafkaOffsetStore, "_send", recording)
    return sent


@pytest.mark.parametrize("store", OFFSET_STORES)
def test_two_receivers_split_by_range_and_the_survivor_takes_over_without_loss(
    local_cluster: LocalCluster, admin_zk: Any, tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, group = unique_name("pair"), unique_name("g")
    local_cluster.create_topic(topic, 4)
    committed = CommittedOffsets(store, admin_zk, local_cluster.client_config(), group)
    kafka_commits = record_kafka_commits(monkeypatch, admin_zk, group)

    def receiver() -> ReliableKafkaReceiver:
        return reliable_receiver(local_cluster, group, topic, STORE_PARAMS[store])

    a = RunningReceiver(receiver(), tmp_path / "a", stream_id=0)
    b = RunningReceiver(receiver(), tmp_path / "b", stream_id=1)
    try:
        ids = {run: run.receiver.connector.group.consumer_id for run in (a, b)}  # type: ignore[attr-defined]
        want = range_assign(
            consumer_threads_per_topic({ids[a]: {topic: 1}, ids[b]: {topic: 1}}), {topic: [0, 1, 2, 3]}
        )

        def split() -> bool:
            return all(
                run.receiver.connector.owned_partitions()  # type: ignore[attr-defined]
                == sorted(tp for tp, thread in want.items() if thread == f"{ids[run]}-0")
                for run in (a, b)
            )

        wait_until(split, timeout_s=30, what="the range split")
        assert sorted(len(run.receiver.connector.owned_partitions()) for run in (a, b)) == [2, 2]  # type: ignore[attr-defined]
        for tp, thread in want.items():
            assert admin_zk.get(f"/consumers/{group}/owners/{topic}/{tp.partition}")[0].decode() == thread

        sent = produce(local_cluster.client_config(), topic, 4, 1000)
        wait_until(
            committed.reach({(topic, p): 1000 for p in range(4)}), timeout_s=30, what="first half committed"
        )
        b.stop()
        wait_until(
            lambda: len(a.receiver.connector.owned_partitions()) == 4,
            timeout_s=30,
            what="the survivor to own all four",
        )  # type: ignore[attr-defined]
        more = produce(local_cluster.client_config(), topic, 4, 1000, start=1000)
        wait_until(
            committed.reach({(topic, p): 2000 for p in range(4)}), timeout_s=30, what="second half committed"
        )
    finally:
        a.stop()
        b.stop()
        committed.close()
    # Every commit that reached Kafka was for a partition owned, right then, by the committing
    # store's own receiver: one owner thread per store, and never a released partition.
    owners_per_store: dict[int, set[str | None]] = {}
    for store_id, _, owner in kafka_commits:
        owners_per_store.setdefault(store_id, set()).add(owner)
    assert all(len(owners) == 1 and None not in owners for owners in owners_per_store.values()), (
        owners_per_store
    )
    assert len(owners_per_store) == (0 if store == "zookeeper" else 2)
    expected = {(topic, p): sent[p] + more[p] for p in range(4)}
    # A clean hand-over re-reads nothing: each record exactly once across both receivers.
    records = sorted(a.records() + b.records(), key=lambda r: (r[3], r[4]))
    assert_exactly_once(records, expected)
    assert {r[3] for r in b.records()} == {tp.partition for tp, t in want.items() if t == f"{ids[b]}-0"}


def test_losing_a_partition_in_a_rebalance_stops_its_consumer_thread(local_cluster: LocalCluster) -> None:
    topic, group = unique_name("lose"), unique_name("g")
    local_cluster.create_topic(topic, 4)

    def receiver() -> ReliableKafkaReceiver:
        return reliable_receiver(local_cluster, group, topic)

    def owned(run: RunningReceiver) -> set[int]:
        return {tp.partition for tp in run.receiver.connector.owned_partitions()}  # type: ignore[attr-defined]

    a = RunningReceiver(receiver(), None, stream_id=0)
    try:
        wait_until(lambda: owned(a) == {0, 1, 2, 3}, timeout_s=30, what="the first receiver to own all four")
        # One consumer thread per owned partition, named after it.
        threads = {t.name: t for t in threading.enumerate() if t.name.startswith(f"kafka-{topic}-")}
        assert sorted(threads) == [f"kafka-{topic}-{p}" for p in range(4)]
        b = RunningReceiver(receiver(), None, stream_id=1)
        try:
            # b claims a partition only once a released it, i.e. once a's consumer was joined.
            wait_until(
                lambda: len(owned(a)) == 2 and len(owned(b)) == 2, timeout_s=30, what="the range split"
            )
            for p in range(4):
                thread = threads[f"kafka-{topic}-{p}"]
                if p in owned(a):
                    assert thread.is_alive(), f"the consumer of kept partition {p} stopped"
                else:
                    assert not thread.is_alive(), f"the consumer of lost partition {p} still runs"
        finally:
            b.stop()
    finally:
        a.stop()
    assert not any(t.is_alive() for t in threads.values())


@pytest.mark.slow
def test_broker_sigkill_and_restart_mid_stream_the_receiver_recovers_by_itself(
    local_cluster: LocalCluster, admin_zk: Any, tmp_path: Path
) -> None:
    topic, group = unique_name("broker"), unique_name("g")
    local_cluster.create_topic(topic, 2)
    sent = produce(local_cluster.client_config(), topic, 2, 10_000)
    receiver = reliable_receiver(
        local_cluster,
        group,
        topic,
        # A small prefetch queue keeps the consumers fetching from the broker throughout.
        {"queued.max.messages.kbytes": 64},
        # Small batches, so that the rate limit paces the stream instead of one big batch.
        consume_batch_size=200,
    )
    running = RunningReceiver(receiver, tmp_path, settings=streaming_settings(wal=True, max_rate=4000))
    try:
        wait_until(
            lambda: (committed_offset(admin_zk, group, topic, 0) or 0) > 0,
            timeout_s=30,
            what="a first commit",
        )
        at_kill = [committed_offset(admin_zk, group, topic, p) or 0 for p in (0, 1)]
        local_cluster.restart_broker()
        more = produce(local_cluster.client_config(), topic, 2, 2000, start=10_000)
        ends = {(topic, p): len(sent[p]) + len(more[p]) for p in (0, 1)}
        wait_until(
            offsets_reach(admin_zk, group, ends),
            timeout_s=90,
            what="every offset at the log end after the restart",
        )
    finally:
        running.stop()
    assert sum(at_kill) < sum(len(v) for v in sent.values()) // 2, "the broker was not killed mid-stream"
    assert running.tracker.registrations == 1, "the receiver had to be restarted"
    assert_exactly_once(running.records(), {(topic, p): sent[p] + more[p] for p in (0, 1)})


@pytest.mark.slow
def test_zookeeper_restart_mid_stream_commits_resume_and_nothing_is_lost(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic, group = unique_name("zkrestart"), unique_name("g")
    local_cluster.create_topic(topic, 2)
    sent = produce(local_cluster.client_config(), topic, 2, 5000)
    receiver = reliable_receiver(
        local_cluster, group, topic, {"zookeeper.session.timeout.ms": "6000"}, consume_batch_size=200
    )
    running = RunningReceiver(receiver, tmp_path, settings=streaming_settings(wal=True, max_rate=2000))
    try:
        admin = local_cluster.zookeeper_client()
        try:
            wait_until(
                lambda: (committed_offset(admin, group, topic, 0) or 0) > 0,
                timeout_s=30,
                what="a first commit",
            )
        finally:
            admin.stop()
            admin.close()
        local_cluster.restart_zookeeper()
        more = produce(local_cluster.client_config(), topic, 2, 1000, start=5000)
        admin = local_cluster.zookeeper_client()
        try:
            ends = {(topic, p): len(sent[p]) + len(more[p]) for p in (0, 1)}
            wait_until(
                offsets_reach(admin, group, ends),
                timeout_s=60,
                what="offsets at the log end after the restart",
            )
        finally:
            admin.stop()
            admin.close()
    finally:
        running.stop()
    records = running.records()
    for p in (0, 1):
        offsets = {r[4] for r in records if r[3] == p}
        assert offsets == set(range(6000)), f"partition {p} lost records"


def duplicates_outside_one_block(
    killed: list[list[Any]], after: list[list[Any]], partition: int
) -> tuple[set[int], set[int]]:
    """(offsets of ``partition`` both runs stored, those not inside one block of the killed run)."""
    first_run = [{r[4] for r in block if r[3] == partition} for block in killed]
    second_run = {r[4] for block in after for r in block if r[3] == partition}
    duplicates = {o for block in first_run for o in block} & second_run
    if not duplicates or any(duplicates <= block for block in first_run):
        return duplicates, set()
    return duplicates, duplicates


@pytest.mark.slow
def test_sigkill_while_the_zookeeper_session_is_suspended_duplicates_at_most_one_block(
    local_cluster: LocalCluster, admin_zk: Any, tmp_path: Path
) -> None:
    """ZooKeeper down for longer than a commit retries (10 s), then the receiver killed: the
    consumers must have paused while the session was SUSPENDED, so that no block after the one
    whose commit was in flight is stored; the next receiver re-reads that one block at most."""
    topic, group = unique_name("suspended"), unique_name("g")
    local_cluster.create_topic(topic, 2)
    sent = produce(local_cluster.client_config(), topic, 2, 20_000)
    first = start_child(local_cluster, group, topic, tmp_path / "run1", max_rate=3000)
    try:
        wait_until(
            lambda: (committed_offset(admin_zk, group, topic, 1) or 0) > 0,
            timeout_s=30,
            what="a first commit",
        )
        local_cluster.kill_zookeeper()
        # Three times the 10 s a commit retries a lost connection: before the fix the consumers
        # kept reading, and each time a retry gave up the next block was stored uncommitted
        # (blocks of 500 records here, often of one partition each: it takes a few).
        time.sleep(35)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        local_cluster.start_zookeeper()
    admin = local_cluster.zookeeper_client()
    try:
        at_kill = [committed_offset(admin, group, topic, p) or 0 for p in (0, 1)]
        assert sum(at_kill) < sum(len(v) for v in sent.values()), "killed too late to be mid-stream"
        second = start_child(local_cluster, group, topic, tmp_path / "run2", max_rate=0)
        try:
            ends = {(topic, p): len(values) for p, values in sent.items()}
            wait_until(
                offsets_reach(admin, group, ends),
                timeout_s=90,
                what="the second receiver to reach the log end",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(30) == 0
    finally:
        admin.stop()
        admin.close()
    run1, run2 = wal_blocks(tmp_path / "run1"), wal_blocks(tmp_path / "run2")
    for p, values in sent.items():
        offsets = {r[4] for block in run1 + run2 for r in block if r[3] == p}
        assert offsets == set(range(len(values))), f"partition {p} lost messages"
        duplicates, spread = duplicates_outside_one_block(run1, run2, p)
        assert not spread, (
            f"partition {p}: re-read {len(duplicates)} records ({min(spread)}..{max(spread)}), "
            "more than one block stored while the session was suspended"
        )


@pytest.mark.slow
def test_zookeeper_session_loss_mid_stream_duplicates_at_most_one_block_per_partition(
    local_cluster: LocalCluster, admin_zk: Any, tmp_path: Path
) -> None:
    topic, group = unique_name("session"), unique_name("g")
    local_cluster.create_topic(topic, 2)
    sent = produce(local_cluster.client_config(), topic, 2, 5000)
    receiver = reliable_receiver(
        local_cluster, group, topic, {"zookeeper.session.timeout.ms": "6000"}, consume_batch_size=200
    )
    reported = 0
    expired = threading.Event()

    def expire_mid_stream(info: ReceivedBlockInfo) -> None:
        # On the push thread, between storing a block and committing it: this block's commit,
        # and those of every block stored until the partitions are re-claimed, are refused.
        nonlocal reported
        reported += 1
        if reported != 5:
            return
        expire_session(local_cluster.zookeeper_connect, receiver.connector._zk)
        # The consumers keep reading meanwhile: several blocks are stored without a session.
        time.sleep(0.5)
        expired.set()

    running = RunningReceiver(
        receiver,
        tmp_path,
        settings=streaming_settings(wal=True, max_rate=2000),
        tracker=RecordingTracker(expire_mid_stream),
    )
    try:
        wait_until(expired.is_set, timeout_s=30, what="the session to be expired mid-stream")
        ends = {(topic, p): len(values) for p, values in sent.items()}
        wait_until(
            offsets_reach(admin_zk, group, ends),
            timeout_s=60,
            what="offsets at the log end after the session loss",
        )
        assert receiver.connector.group.generation >= 1, "the session was not lost"
    finally:
        running.stop()
    blocks = [decode_block(running.block_manager.get(info.block_id)) for info in running.tracker.blocks]
    for p, values in sent.items():
        offsets = [r[4] for block in blocks for r in block if r[3] == p]
        assert set(offsets) == set(range(len(values))), f"partition {p} lost records"
        duplicates = {o for o, n in Counter(offsets).items() if n > 1}
        per_block = [{r[4] for r in block if r[3] == p} for block in blocks]
        assert not duplicates or any(duplicates <= block for block in per_block), (
            f"partition {p}: duplicates {min(duplicates)}..{max(duplicates)} span more than one block"
        )


@pytest.mark.slow
def test_full_disk_under_the_wal_stops_the_receiver_and_a_new_one_resumes_without_loss(
    local_cluster: LocalCluster, admin_zk: Any, tmp_path: Path
) -> None:
    """The receiver's write-ahead log on a 1 MiB tmpfs (real ENOSPC): blocks that could not be
    logged are neither reported nor committed; after the disk grows, the next receiver of the
    group starts at the committed offset and nothing is lost or read twice."""
    topic, group = unique_name("fulldisk"), unique_name("g")
    local_cluster.create_topic(topic, 1)
    values = [f"{i:06d}".encode() + b"." * 1018 for i in range(3000)]  # 3 MB of 1 KiB values
    producer = Producer(local_cluster.client_config(**{"linger.ms": 20}))
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(60) == 0

    def receiver() -> ReliableKafkaReceiver:
        return reliable_receiver(local_cluster, group, topic, consume_batch_size=100)

    # ~200 KB blocks (2000 records/s, 100 ms blocks): several fit on the disk before it fills.
    settings = streaming_settings(wal=True, max_rate=2000)
    with small_tmpfs(tmp_path / "checkpoint", 1024 * 1024) as checkpoint:
        first = RunningReceiver(receiver(), checkpoint, settings=settings)
        try:
            with pytest.raises(Exception) as stopped:
                first.supervisor.await_termination(60)
        finally:
            first.stop()
        assert "No space left on device" in "".join(traceback.format_exception(stopped.value))
        committed = committed_offset(admin_zk, group, topic, 0)
        run1 = wal_blocks(checkpoint)
        logged = sorted(r[4] for block in run1 for r in block)
        assert committed is not None and 0 < committed < len(values), f"not mid-stream: {committed}"
        # Offsets follow the log: exactly what was logged is committed, and only that.
        assert logged == list(range(committed))
        assert sum(info.num_records or 0 for info in first.tracker.blocks) == committed

        resize(checkpoint, 64 * 1024 * 1024)
        second = RunningReceiver(receiver(), checkpoint, settings=streaming_settings(wal=True))
        try:
            wait_until(
                offsets_reach(admin_zk, group, {(topic, 0): len(values)}), timeout_s=60, what="the log end"
            )
        finally:
            second.stop()
        blocks = wal_blocks(checkpoint)
    assert blocks[: len(run1)] == run1, "the first run's blocks come back first, unchanged"
    run2 = [r for block in blocks[len(run1) :] for r in block]
    assert [r[4] for r in run2] == list(range(committed, len(values))), "resumed at the committed offset"
    assert [r[1] for block in blocks for r in block] == values

"""ReliableKafkaReceiver end to end: real ZooKeeper + Kafka, real supervisor, block manager and WAL."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from reliable_kafka.kafka import ReliableKafkaReceiver, ranges_in_metadata
from reliable_kafka.receiver import ReceivedBlockInfo, WriteAheadLogBasedBlockHandler
from reliable_kafka.storage import BlockManager, StorageLevel, decode_block
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.kafka.harness import (
    FAST_GROUP_PARAMS,
    OFFSET_STORES,
    STORE_PARAMS,
    CommittedOffsets,
    RecordingTracker,
    RunningReceiver,
    assert_exactly_once,
    committed_offset,
    offset_ranges_cover,
    offsets_reach,
    produce,
)
from tests.support import wait_until
from wal import FileBasedWriteAheadLog, RecordHandle, WriteAheadLog

# The ZooKeeper receiver protocol on the legacy broker too (the 4.x broker has no ZooKeeper).
pytestmark = [pytest.mark.integration, pytest.mark.brokers("3.9", "0.9")]


@pytest.fixture
def admin_zk(kafka_cluster: ClusterUnderTest) -> Iterator[Any]:
    zk = kafka_cluster.zookeeper_client()
    yield zk
    zk.stop()
    zk.close()


@pytest.mark.docker_half
@pytest.mark.parametrize("store", OFFSET_STORES)
def test_thirty_messages_with_the_wal_on_are_stored_once_in_order_and_committed_after_storing(
    kafka_cluster: ClusterUnderTest, admin_zk: Any, tmp_path: Path, store: str
) -> None:
    topic, group = unique_name("thirty"), unique_name("g")
    kafka_cluster.create_topic(topic, 1)
    sent = produce(kafka_cluster.client_config(), topic, 1, 30)
    committed = CommittedOffsets(store, admin_zk, kafka_cluster.client_config(), group)
    # Per block: the committed offset once the block is stored, and where the block starts.
    offsets_when_stored: list[tuple[int | None, int]] = []

    def before_report(info: ReceivedBlockInfo) -> None:
        # The block is in the block manager and the WAL now; its offsets must not be committed yet.
        (block_range,) = ranges_in_metadata(info.metadata)
        offsets_when_stored.append((committed.highest(topic, 0), block_range.fromOffset))

    # No bootstrap.servers: the brokers are found in ZooKeeper, as the 0.8 consumer did.
    protocol_config = {k: v for k, v in kafka_cluster.client_config().items() if k != "bootstrap.servers"}
    receiver = ReliableKafkaReceiver(
        kafka_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**protocol_config, **FAST_GROUP_PARAMS, **STORE_PARAMS[store], "auto.commit.enable": "true"},
        StorageLevel.MEMORY_AND_DISK_SER,
    )
    running = RunningReceiver(receiver, tmp_path, tracker=RecordingTracker(before_report))
    try:
        wait_until(committed.reach({(topic, 0): 30}), timeout_s=30, what=f"offset 30 in {store}")
    finally:
        running.stop()
    try:
        # After a graceful stop: the log end, in every store in use.
        assert committed.values(topic, 0) == [30] * (2 if store == "dual" else 1)
        committed.assert_nothing_outside_the_store(topic, [0])
    finally:
        committed.close()

    assert offsets_when_stored[0][0] is None, "an offset was committed before the first block was stored"
    for committed, from_offset in offsets_when_stored:
        assert (committed or 0) <= from_offset, (
            f"offset {committed} was committed before the block from {from_offset} was reported"
        )
    assert_exactly_once(running.records(), {(topic, 0): sent[0]})
    # Every reported block went to the WAL and reads back from there as well.
    wal_records = []
    for info in running.tracker.blocks:
        handle = info.block_store_result.wal_record_handle
        assert isinstance(handle, RecordHandle)
        with FileBasedWriteAheadLog(str(Path(handle.path).parent)) as log:
            wal_records.extend(decode_block(log.read(handle)))
    assert [r[1] for r in wal_records] == sent[0]
    # Offset ranges in the metadata tile 0..30 without gaps.
    ranges = [r for info in running.tracker.blocks for r in ranges_in_metadata(info.metadata)]
    assert ranges[0].fromOffset == 0 and ranges[-1].untilOffset == 30
    assert all(a.untilOffset == b.fromOffset for a, b in itertools.pairwise(ranges))


def test_three_topics_of_four_partitions_every_message_once_every_offset_at_log_end(
    kafka_cluster: ClusterUnderTest, admin_zk: Any, tmp_path: Path
) -> None:
    topics = [unique_name(f"multi{i}") for i in range(3)]
    group = unique_name("g")
    expected: dict[tuple[str, int], list[bytes]] = {}
    for topic in topics:
        kafka_cluster.create_topic(topic, 4)
    per_partition = 100_000 // 12 + 1  # 100,008 messages in all
    for topic in topics:
        for p, values in produce(kafka_cluster.client_config(), topic, 4, per_partition).items():
            expected[(topic, p)] = values
    receiver = ReliableKafkaReceiver(
        kafka_cluster.zookeeper_connect,
        group,
        {topics[0]: 1, topics[1]: 2, topics[2]: 4},
        {**kafka_cluster.client_config(), **FAST_GROUP_PARAMS},
        StorageLevel.MEMORY_AND_DISK_SER,
    )
    running = RunningReceiver(receiver, tmp_path)
    try:
        ends = {key: len(values) for key, values in expected.items()}
        wait_until(
            offsets_reach(admin_zk, group, ends), timeout_s=90, what="every partition's offset at its log end"
        )
    finally:
        running.stop()
    # The log end as the broker knows it, not only as the test counted what it produced.
    watermarks = Consumer({**kafka_cluster.client_config(), "group.id": group})
    try:
        for (topic, p), end in ends.items():
            _, high = watermarks.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            assert high == end, f"{topic}/{p}: the broker's high watermark is {high}, {end} were produced"
            assert committed_offset(admin_zk, group, topic, p) == high
    finally:
        watermarks.close()
    assert_exactly_once(running.records(), expected)
    assert offset_ranges_cover(running.tracker.blocks) == {key: per_partition for key in expected}


class FailingWriteAheadLog(WriteAheadLog):
    def __init__(self) -> None:
        self.writes = 0
        self.lock = threading.Lock()

    def write(self, record: bytes, time_ms: int) -> RecordHandle:
        with self.lock:
            self.writes += 1
        raise OSError("disk on fire")

    def read(self, handle: RecordHandle) -> bytes:
        raise NotImplementedError

    def read_all(self) -> Iterator[bytes]:
        return iter(())

    def clean(self, thresh_time_ms: int, wait_for_completion: bool) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_wal_that_fails_every_write_stops_the_receiver_after_four_attempts_and_commits_nothing(
    kafka_cluster: ClusterUnderTest, admin_zk: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="reliable_kafka.kafka.receiver.reliable_receiver")
    topic, group = unique_name("failing"), unique_name("g")
    kafka_cluster.create_topic(topic, 2)
    produce(kafka_cluster.client_config(), topic, 2, 50)
    log = FailingWriteAheadLog()
    receiver = ReliableKafkaReceiver(
        kafka_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**kafka_cluster.client_config(), **FAST_GROUP_PARAMS},
        StorageLevel.MEMORY_AND_DISK_SER,
    )
    receiver.set_receiver_id(0)
    block_manager = BlockManager()
    handler = WriteAheadLogBasedBlockHandler(block_manager, 0, receiver.storage_level, log)
    running = RunningReceiver(receiver, None, handler=handler)
    try:
        with pytest.raises(OSError, match="disk on fire"):
            running.supervisor.await_termination(30)
    finally:
        running.stop()
    assert log.writes == 4, "one block, four attempts in all, then nothing more"
    # Every attempt stored under the generator's block id: one copy, and the log names it.
    (stored,) = block_manager.remove_blocks_older_than(2**62)
    attempts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("storing block")]
    assert attempts == [
        f"storing block {stored} failed (attempt {n} of 4): OSError('disk on fire')" for n in range(1, 5)
    ]
    assert running.tracker.blocks == []
    assert committed_offset(admin_zk, group, topic, 0) is None
    assert committed_offset(admin_zk, group, topic, 1) is None
    assert running.receiver.is_stopped()
    (message, error), *_ = running.tracker.deregistered
    assert "Error while storing block" in message and "disk on fire" in error
    # The group was left: nobody owns the partitions any more.
    assert admin_zk.get_children(f"/consumers/{group}/ids") == []


def test_auto_offset_reset_largest_skips_what_was_produced_before_the_start(
    kafka_cluster: ClusterUnderTest, admin_zk: Any
) -> None:
    topic, group = unique_name("largest"), unique_name("g")
    kafka_cluster.create_topic(topic, 1)
    config = kafka_cluster.client_config()
    produce(config, topic, 1, 50)
    receiver = ReliableKafkaReceiver(
        kafka_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**config, **FAST_GROUP_PARAMS, "auto.offset.reset": "largest"},
        StorageLevel.MEMORY_AND_DISK_SER,
    )
    running = RunningReceiver(receiver, None)
    try:
        # "largest" is resolved when the consumer first fetches: probe until a record arrives,
        # so that what follows is certainly produced after that point.
        probes = 0
        while running.tracker.record_count() == 0:
            assert probes < 150, "no probe message was received"
            produce(config, topic, 1, 1, start=50 + probes)
            probes += 1
            time.sleep(0.2)
        after = produce(config, topic, 1, 100, start=50 + probes)[0]
        end = 50 + probes + 100
        wait_until(
            offsets_reach(admin_zk, group, {(topic, 0): end}), timeout_s=30, what="the offset at the log end"
        )
    finally:
        running.stop()
    offsets = [r[4] for r in running.records()]
    assert min(offsets) >= 50, "a message produced before the receiver started was read"
    assert offsets == list(range(min(offsets), end)), "from the first read on, every message once"
    assert [r[1] for r in running.records()][-100:] == after

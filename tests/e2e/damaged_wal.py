"""A receiver write-ahead log as a killed driver left it, then damaged (a corrupt record in each
batch, the last one torn), and a driver restarted over it with ``getOrCreate``: the run of
tests/e2e/test_wal_damage.py, on the secured cluster too (tests/e2e/secured/test_secured_wal_damage.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.kafka.client.offset_range import OffsetRange, block_metadata
from reliable_kafka.local import LocalCluster
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo, ReceivedBlockStoreResult
from reliable_kafka.receiver.wal_block_handler import receiver_log_directory
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.storage.block_format import encode_chunks, pack_chunk
from reliable_kafka.storage.block_id import StreamBlockId
from tests.cluster_backends import unique_name
from tests.e2e.conftest import e2e_settings
from tests.kafka.harness import produce
from tests.support import wait_until
from wal import FileBasedWriteAheadLog, RecordHandle, WriteAheadLogError

OLD_BATCH_MS = 1_000_000
PER_PARTITION = 10
BLOCK_BOUNDS = [(0, 4), (4, 7), (7, 10)]


def commit_offsets(cluster: LocalCluster, group: str, topic: str, partitions: int, offset: int) -> None:
    """Where the stream will read them: ZooKeeper when the cluster has one, else the coordinator."""
    if cluster.has_zookeeper:
        zk = cluster.zookeeper_client()
        try:
            for partition in range(partitions):
                zk.create(
                    f"/consumers/{group}/offsets/{topic}/{partition}", str(offset).encode(), makepath=True
                )
        finally:
            zk.stop()
            zk.close()
        return
    committer = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(
            offsets=[TopicPartition(topic, p, offset) for p in range(partitions)], asynchronous=False
        )
    finally:
        committer.close()


def write_blocks(checkpoint: str, topic: str, sent: dict[int, list[bytes]]) -> list[RecordHandle]:
    """What a killed driver left: the blocks in the receiver WAL, added and allocated to two
    batches in the metadata log, their offsets committed; returns the blocks' WAL handles."""
    log = FileBasedWriteAheadLog(receiver_log_directory(checkpoint, 0), fsync=False)
    infos: list[ReceivedBlockInfo] = []
    handles: list[RecordHandle] = []
    for partition, values in sent.items():
        for start, end in BLOCK_BOUNDS:
            offsets = list(range(start, end))
            keys = [str(i).encode() for i in offsets]
            chunk = pack_chunk(topic, partition, keys, values[start:end], offsets)
            handle = log.write(encode_chunks([chunk]), OLD_BATCH_MS - 500)
            handles.append(handle)
            block_id = StreamBlockId(0, len(infos) + 1)
            infos.append(
                ReceivedBlockInfo(
                    0,
                    end - start,
                    block_metadata([OffsetRange(topic, partition, start, end)]),
                    ReceivedBlockStoreResult(block_id, end - start, handle),
                )
            )
    log.close()
    tracker = ReceivedBlockTracker.create(
        [0],
        checkpoint,
        e2e_settings(wal=True).wal,
        recover_from_write_ahead_log=True,
        now_ms=lambda: OLD_BATCH_MS,
    )
    half = len(infos) // 2
    for info in infos[:half]:
        tracker.add_block(info)
    tracker.allocate_blocks_to_batch(OLD_BATCH_MS - 1000)
    for info in infos[half:]:
        tracker.add_block(info)
    tracker.allocate_blocks_to_batch(OLD_BATCH_MS)
    tracker.stop()
    return handles


def damage(handles: list[RecordHandle]) -> None:
    """Flip a byte inside the second record of each batch, and tear the last record."""
    assert len({h.path for h in handles}) == 1, "the test expects one segment"
    path = handles[0].path
    with open(path, "r+b") as segment:
        for handle in (handles[1], handles[len(handles) // 2 + 1]):
            segment.seek(handle.offset + 9 + handle.length // 2)
            byte = segment.read(1)
            segment.seek(-1, os.SEEK_CUR)
            segment.write(bytes([byte[0] ^ 0xFF]))
    with open(path, "r+b") as segment:
        segment.truncate(handles[-1].offset + 5)
    with FileBasedWriteAheadLog(os.path.dirname(path)) as log:
        for handle in (handles[1], handles[len(handles) // 2 + 1], handles[-1]):
            with pytest.raises(WriteAheadLogError):
                log.read(handle)


def restart_over_damaged_wal(
    cluster: LocalCluster,
    spark_context: SparkContext,
    tmp_path: Path,
    zookeeper_connect: str | None,
    kafka_params: dict[str, Any],
) -> None:
    """A driver restarted with ``getOrCreate`` over a damaged receiver WAL: its stream (with
    ``kafka_params``) must bring every record of the damaged blocks to the sink, read again from
    Kafka. Test data and the committed offsets are written with the cluster's own client."""
    topic, group = unique_name("waldamage"), unique_name("waldamage")
    cluster.create_topic(topic, partitions=2)
    sent = produce(cluster.client_config(), topic, 2, PER_PARTITION)
    checkpoint = str(tmp_path / "checkpoint")
    damage(write_blocks(checkpoint, topic, sent))
    commit_offsets(cluster, group, topic, len(sent), PER_PARTITION)

    received: list[bytes] = []
    lock = threading.Lock()

    def setup() -> StreamingContext:
        ssc = StreamingContext(spark_context, 1, e2e_settings(wal=True))
        ssc.checkpoint(checkpoint)
        stream = KafkaUtils.createStream(
            ssc,
            zookeeper_connect,
            group,
            {topic: 1},
            {"auto.offset.reset": "smallest", **kafka_params},
            valueDecoder=lambda v: v,
        )

        def keep(rdd: Any) -> None:
            values = rdd.map(lambda kv: kv[1]).collect()
            with lock:
                received.extend(values)

        stream.foreachRDD(keep)
        return ssc

    ssc = StreamingContext.getOrCreate(checkpoint, setup)
    ssc.start()
    try:
        expected = sorted(v for values in sent.values() for v in values)
        wait_until(lambda: len(received) >= len(expected), timeout_s=120, what="every record in the sink")
    finally:
        ssc.stop(stopSparkContext=False)
    assert sorted(received) == expected

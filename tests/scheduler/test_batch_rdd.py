"""The batch RDD on real Spark (local[2]) (BEHAVIOURS.md: "Batch RDD: from the block manager when
blocks are there, from the WAL when they are not, mixed when some are"; "recovered blocks are read
from the WAL")."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import msgpack
import pytest
from pyspark import SparkContext
from pyspark.rdd import PipelinedRDD

from reliable_kafka.dstream.batch_rdd import BlockRDD, create_block_rdd
from reliable_kafka.dstream.block_partition import BlockPartition
from reliable_kafka.kafka.client.offset_range import OffsetRange, merge_offset_ranges, offset_ranges_of_blocks
from reliable_kafka.receiver.received_block import ArrayBufferBlock
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
from reliable_kafka.receiver.wal_block_handler import (
    WriteAheadLogBasedBlockHandler,
    create_receiver_write_ahead_log,
)
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.settings import WriteAheadLogSettings
from reliable_kafka.storage.block_format import encode_block
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_manager import BlockManager
from reliable_kafka.storage.storage_level import StorageLevel
from tests.support import ManualClock
from tests.support.scheduler_fakes import block_info
from wal import RecordHandle

LEVEL = StorageLevel.MEMORY_ONLY_SER


def kafka_records(partition: int, first: int, count: int) -> list[tuple]:
    return [(f"k{o}".encode(), f"v{o}".encode(), "events", partition, o) for o in range(first, first + count)]


def store_blocks(
    checkpoint: Path, block_manager: BlockManager, blocks: list[list[tuple]], first_id: int = 1
) -> list[ReceivedBlockInfo]:
    """Store blocks the way a receiver with the WAL on does: block manager + receiver WAL."""
    handler = WriteAheadLogBasedBlockHandler(
        block_manager, 0, LEVEL, create_receiver_write_ahead_log(str(checkpoint), 0, fsync=False)
    )
    infos = []
    for n, records in enumerate(blocks):
        result = handler.store_block(StreamBlockId(0, first_id + n), ArrayBufferBlock(records))
        partition, offsets = records[0][3], [r[4] for r in records]
        metadata = {"offset_ranges": [["events", partition, min(offsets), max(offsets) + 1]]}
        infos.append(ReceivedBlockInfo(0, result.num_records, metadata, result))
    handler.stop()
    return infos


BLOCKS = [kafka_records(0, 0, 5), kafka_records(1, 0, 3), kafka_records(0, 5, 4)]
ALL_RECORDS = [record for block in BLOCKS for record in block]


def test_from_the_block_manager_when_blocks_are_there(spark_context: SparkContext, tmp_path: Path) -> None:
    block_manager = BlockManager()
    infos = store_blocks(tmp_path, block_manager, BLOCKS)

    rdd = create_block_rdd(spark_context, infos, block_manager, receiver_wal_enabled=True)

    assert rdd.getNumPartitions() == 3
    assert (rdd.num_from_block_manager, rdd.num_from_write_ahead_log) == (3, 0)
    assert rdd.glom().collect() == BLOCKS


def test_from_the_wal_when_they_are_not(spark_context: SparkContext, tmp_path: Path) -> None:
    infos = store_blocks(tmp_path, BlockManager(), BLOCKS)

    rdd = create_block_rdd(spark_context, infos, BlockManager(), receiver_wal_enabled=True)

    assert (rdd.num_from_block_manager, rdd.num_from_write_ahead_log) == (0, 3)
    assert rdd.glom().collect() == BLOCKS


def test_mixed_when_some_are(spark_context: SparkContext, tmp_path: Path) -> None:
    block_manager = BlockManager()
    infos = store_blocks(tmp_path, block_manager, BLOCKS)
    block_manager.remove(infos[1].block_id)

    rdd = create_block_rdd(spark_context, infos, block_manager, receiver_wal_enabled=True)

    assert (rdd.num_from_block_manager, rdd.num_from_write_ahead_log) == (2, 1)
    assert rdd.glom().collect() == BLOCKS


def test_blocks_kept_in_one_place_are_read_by_one_task_each_through_its_own_chain(
    spark_context: SparkContext, tmp_path: Path
) -> None:
    """Grouped (spark.streaming.blockRDD.maxPartitionBytes): one partition, the blocks' records in
    block order, each block read where it is: two from the block manager, one from the WAL."""
    block_manager = BlockManager()
    infos = store_blocks(tmp_path, block_manager, BLOCKS)
    block_manager.remove(infos[1].block_id)

    rdd = create_block_rdd(
        spark_context,
        infos,
        block_manager,
        receiver_wal_enabled=True,
        offset_ranges=offset_ranges_of_blocks,
        max_partition_bytes=128 << 20,
        parallelism=2,
    )

    assert rdd.getNumPartitions() == 1
    assert (rdd.num_from_block_manager, rdd.num_from_write_ahead_log) == (2, 1)
    assert rdd.block_ids == [info.block_id.name for info in infos]
    assert rdd.glom().collect() == [ALL_RECORDS]
    assert rdd.offsetRanges() == [OffsetRange("events", 0, 0, 9), OffsetRange("events", 1, 0, 3)]


def test_grouped_partitions_stop_at_the_size_bound(spark_context: SparkContext, tmp_path: Path) -> None:
    """A bound of the largest block and a bit makes a partition per block again, records
    unchanged; blocks logged by a version that reported no sizes are sized by their WAL records."""
    reported = store_blocks(tmp_path, BlockManager(), BLOCKS)
    sizes = [info.block_store_result.num_bytes for info in reported]
    assert sizes == [info.block_store_result.wal_record_handle.length for info in reported]
    largest = max(sizes)
    infos = [
        dataclasses.replace(
            info, block_store_result=dataclasses.replace(info.block_store_result, num_bytes=None)
        )
        for info in reported
    ]

    rdd = create_block_rdd(
        spark_context, infos, BlockManager(), receiver_wal_enabled=True, max_partition_bytes=largest + 1
    )

    assert rdd.getNumPartitions() == 3
    assert rdd.glom().collect() == BLOCKS


def test_recovered_blocks_are_read_from_the_wal(spark_context: SparkContext, tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    settings = WriteAheadLogSettings(enable=True, fsync=False)
    tracker = ReceivedBlockTracker.create([0], str(tmp_path), settings, now_ms=clock)
    for info in store_blocks(tmp_path, BlockManager(), BLOCKS):
        tracker.add_block(info)
    tracker.allocate_blocks_to_batch(1000)
    tracker.stop()

    # The driver restarts: a fresh, empty block manager and a tracker recovered from the metadata WAL.
    recovered = ReceivedBlockTracker.create([0], str(tmp_path), settings, recover_from_write_ahead_log=True)
    infos = recovered.get_blocks_of_batch_and_stream(1000, 0)
    rdd = create_block_rdd(
        spark_context, infos, BlockManager(), receiver_wal_enabled=True, offset_ranges=offset_ranges_of_blocks
    )
    recovered.stop()

    assert rdd.num_from_write_ahead_log == 3
    assert rdd.collect() == ALL_RECORDS
    assert rdd.offsetRanges() == [OffsetRange("events", 0, 0, 9), OffsetRange("events", 1, 0, 3)]


def test_a_block_in_neither_place_is_left_out_with_a_warning(
    spark_context: SparkContext, caplog: pytest.LogCaptureFixture
) -> None:
    block_manager = BlockManager()
    present = StreamBlockId(0, 1)
    block_manager.put(present, encode_block([1, 2]), LEVEL)
    infos = [block_info(0, 2, unique_id=1), block_info(0, 2, unique_id=2)]
    with caplog.at_level(logging.WARNING):
        rdd = create_block_rdd(spark_context, infos, block_manager)
    assert rdd.collect() == [1, 2]
    assert "input-0-2" in caplog.text
    assert "enable Write Ahead Log" in caplog.text


def test_decoding_runs_on_the_executors(spark_context: SparkContext, tmp_path: Path) -> None:
    infos = store_blocks(tmp_path, BlockManager(), BLOCKS)

    def decode(record: tuple) -> tuple[int, str]:
        return os.getpid(), record[1].decode()

    rdd = create_block_rdd(spark_context, infos, BlockManager(), decoder=decode)
    decoded = rdd.collect()

    assert [value for _, value in decoded] == [r[1].decode() for r in ALL_RECORDS]
    assert os.getpid() not in {pid for pid, _ in decoded}


def test_the_batch_rdd_is_an_ordinary_pipelined_rdd(spark_context: SparkContext) -> None:
    rdd = BlockRDD(spark_context, [[BlockPartition("input-0-1", encode_block([1, 2, 3]))]])
    assert isinstance(rdd, PipelinedRDD)
    assert rdd.map(lambda x: x * 10).filter(lambda x: x > 10).collect() == [20, 30]
    assert rdd.offsetRanges() == []


def test_an_empty_batch_is_an_empty_rdd(spark_context: SparkContext) -> None:
    rdd = create_block_rdd(spark_context, [], BlockManager())
    assert rdd.getNumPartitions() == 0
    assert rdd.collect() == []


def test_partitions_ship_as_msgpack_with_handles_not_data() -> None:
    handle = RecordHandle("/cp/receivedData/0/log-1-2", 10, 20)
    partition = BlockPartition("input-0-7", wal_record_handle=handle)
    raw = partition.encode()
    assert msgpack.unpackb(raw) == {
        "block_id": "input-0-7",
        "data": None,
        "wal": handle.to_dict(),
        "location": None,
        "secret": None,
        "tls_ca": None,
    }
    assert BlockPartition.decode(raw) == partition
    # A task's descriptor: its blocks' fields in one array.
    together = BlockPartition.encode_blocks([partition, partition])
    assert msgpack.unpackb(together) == [msgpack.unpackb(raw)] * 2
    assert BlockPartition.decode_blocks(together) == [partition, partition]
    with pytest.raises(ValueError, match="no data, executor or write-ahead log handle"):
        BlockPartition("input-0-8")


def test_offset_ranges_merge_per_topic_partition() -> None:
    merged = merge_offset_ranges(
        [
            [OffsetRange("b", 0, 10, 20), OffsetRange("a", 1, 0, 5)],
            [OffsetRange.from_metadata({"topic": "b", "partition": 0, "fromOffset": 20, "untilOffset": 31})],
            [OffsetRange.from_metadata({"topic": "a", "partition": 1, "from_offset": 5, "until_offset": 6})],
        ]
    )
    assert merged == [OffsetRange("a", 1, 0, 6), OffsetRange("b", 0, 10, 31)]
    assert [r.count() for r in merged] == [6, 21]
    with pytest.raises(ValueError, match="partition"):
        OffsetRange.from_metadata(["t", "0", 1, 2])

"""Block handlers (BEHAVIOURS.md, "Block handlers"): block manager only, and block manager + WAL."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from reliable_kafka.receiver import (
    ArrayBufferBlock,
    BlockManagerBasedBlockHandler,
    ByteBufferBlock,
    IteratorBlock,
    ManualClock,
    WriteAheadLogBasedBlockHandler,
    create_receiver_write_ahead_log,
    receiver_log_directory,
)
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.storage import (
    BlockFormatError,
    BlockManager,
    BlockStoreError,
    StorageLevel,
    StreamBlockId,
    decode_block,
    encode_block,
)
from tests.support import wait_until
from wal import FileBasedWriteAheadLog, RecordHandle, SegmentNotFoundError, WriteAheadLog

KAFKA_RECORDS = [(f"k{i}".encode(), b"v" * 100, "events", 0, i) for i in range(50)]


def wal_handler(
    tmp_path: Path,
    *,
    block_manager: BlockManager | None = None,
    log: WriteAheadLog | None = None,
    level: StorageLevel = StorageLevel.MEMORY_AND_DISK_SER_2,
    clock: ManualClock | None = None,
    timeout_s: float = 30.0,
) -> WriteAheadLogBasedBlockHandler:
    return WriteAheadLogBasedBlockHandler(
        block_manager or BlockManager(local_dir=tmp_path / "blocks"),
        0,
        level,
        log or create_receiver_write_ahead_log(str(tmp_path / "checkpoint"), 0, fsync=False),
        block_store_timeout_s=timeout_s,
        clock=clock,
    )


def test_block_manager_handler_stores_list_iterator_and_bytes_blocks_with_record_counts() -> None:
    manager = BlockManager()
    handler = BlockManagerBasedBlockHandler(manager, StorageLevel.MEMORY_ONLY_SER)
    cases = [
        (ArrayBufferBlock(KAFKA_RECORDS), 50),
        (IteratorBlock(iter(KAFKA_RECORDS[:7])), 7),
        (ByteBufferBlock(encode_block(KAFKA_RECORDS[:3])), None),
    ]
    for n, (block, expected_count) in enumerate(cases):
        block_id = StreamBlockId(0, n)
        result = handler.store_block(block_id, block)
        assert (result.block_id, result.num_records, result.wal_record_handle) == (
            block_id,
            expected_count,
            None,
        )
    assert decode_block(manager.get(StreamBlockId(0, 0))) == KAFKA_RECORDS
    assert decode_block(manager.get(StreamBlockId(0, 1))) == KAFKA_RECORDS[:7]
    assert decode_block(manager.get(StreamBlockId(0, 2))) == KAFKA_RECORDS[:3]


def test_raw_bytes_that_are_not_a_block_are_refused_at_store_time() -> None:
    handler = BlockManagerBasedBlockHandler(BlockManager(), StorageLevel.MEMORY_ONLY)
    with pytest.raises(BlockFormatError, match="not a block"):
        handler.store_block(StreamBlockId(0, 1), ByteBufferBlock(b"\x80\x04 a pickle"))


def test_a_block_that_does_not_fit_the_storage_level_fails_naming_the_block_and_the_level() -> None:
    handler = BlockManagerBasedBlockHandler(BlockManager(memory_budget_bytes=1024), StorageLevel.MEMORY_ONLY)
    with pytest.raises(
        BlockStoreError, match=r"block input-0-9 .*storage level MEMORY_ONLY does not allow disk"
    ):
        handler.store_block(StreamBlockId(0, 9), ArrayBufferBlock(KAFKA_RECORDS))


def test_a_duplicate_block_id_is_an_error_naming_block_and_level() -> None:
    handler = BlockManagerBasedBlockHandler(BlockManager(), StorageLevel.MEMORY_ONLY)
    handler.store_block(StreamBlockId(0, 1), ArrayBufferBlock([1]))
    with pytest.raises(
        BlockStoreError, match=r"block input-0-1 with storage level MEMORY_ONLY.*already stored"
    ):
        handler.store_block(StreamBlockId(0, 1), ArrayBufferBlock([2]))


def test_storing_the_same_bytes_again_under_the_same_id_succeeds_and_keeps_one_copy() -> None:
    manager = BlockManager()
    handler = BlockManagerBasedBlockHandler(manager, StorageLevel.MEMORY_ONLY)
    for _ in range(2):
        result = handler.store_block(StreamBlockId(0, 1), ArrayBufferBlock(KAFKA_RECORDS))
        assert (result.block_id, result.num_records) == (StreamBlockId(0, 1), 50)
    assert manager.remove_blocks_older_than(2**62) == [StreamBlockId(0, 1)]


def test_a_wal_handler_retry_under_the_same_id_succeeds_after_only_the_wal_failed(tmp_path: Path) -> None:
    class FailsOnce(FileBasedWriteAheadLog):
        failed = False

        def write(self, record: bytes, time_ms: int) -> RecordHandle:
            if not self.failed:
                self.failed = True
                raise OSError("log disk hiccup")
            return super().write(record, time_ms)

    manager = BlockManager()
    log = FailsOnce(str(tmp_path / "log"), fsync=False)
    handler = wal_handler(tmp_path, block_manager=manager, log=log)
    block_id = StreamBlockId(0, 3)
    with pytest.raises(OSError, match="log disk hiccup"):
        handler.store_block(block_id, ArrayBufferBlock(KAFKA_RECORDS))
    wait_until(lambda: manager.contains(block_id), what="the first attempt's copy in the block manager")
    result = handler.store_block(block_id, ArrayBufferBlock(KAFKA_RECORDS))
    assert result.block_id == block_id and result.wal_record_handle is not None
    assert decode_block(log.read(result.wal_record_handle)) == KAFKA_RECORDS
    assert manager.remove_blocks_older_than(2**62) == [block_id]
    handler.stop()


def test_wal_handler_stores_in_both_places_in_parallel_and_returns_the_wal_handle(tmp_path: Path) -> None:
    # Each store waits at a barrier for the other: only parallel writes get through it.
    both_writing = threading.Barrier(2, timeout=5)

    class MeetingBlockManager(BlockManager):
        def put(self, block_id: StreamBlockId, data: bytes, level: StorageLevel) -> bool:
            both_writing.wait()
            return super().put(block_id, data, level)

    class MeetingLog(FileBasedWriteAheadLog):
        def write(self, record: bytes, time_ms: int) -> RecordHandle:
            both_writing.wait()
            return super().write(record, time_ms)

    manager = MeetingBlockManager()
    log = MeetingLog(receiver_log_directory(str(tmp_path), 0), fsync=False)
    handler = wal_handler(tmp_path, block_manager=manager, log=log)
    block_id = StreamBlockId(0, 1)
    result = handler.store_block(block_id, ArrayBufferBlock(KAFKA_RECORDS))
    assert result.block_id == block_id and result.num_records == 50
    assert isinstance(result.wal_record_handle, RecordHandle)
    assert result.wal_record_handle.path.startswith(str(tmp_path / "receivedData" / "0"))
    # The same bytes in both places, and what the WAL gives back equals the input.
    assert log.read(result.wal_record_handle) == manager.get(block_id)
    assert decode_block(log.read(result.wal_record_handle)) == KAFKA_RECORDS
    handler.stop()


def test_wal_handler_data_read_back_from_the_wal_equals_the_input(tmp_path: Path) -> None:
    handler = wal_handler(tmp_path)
    blocks = [KAFKA_RECORDS[i : i + 10] for i in range(0, 50, 10)]
    handles = [
        handler.store_block(StreamBlockId(0, n), ArrayBufferBlock(records)).wal_record_handle
        for n, records in enumerate(blocks)
    ]
    raw = encode_block(["opaque", 1])
    raw_result = handler.store_block(StreamBlockId(0, 99), ByteBufferBlock(raw))
    assert raw_result.num_records is None
    handler.stop()
    # A fresh log over the same directory, as a recovering driver would open it.
    reopened = FileBasedWriteAheadLog(receiver_log_directory(str(tmp_path / "checkpoint"), 0))
    assert [decode_block(reopened.read(handle)) for handle in handles if handle] == blocks
    assert [decode_block(record) for record in reopened.read_all()] == [*blocks, ["opaque", 1]]


def test_wal_handler_forces_replication_1_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        handler = wal_handler(tmp_path, level=StorageLevel.MEMORY_AND_DISK_2)
    assert handler.storage_level == StorageLevel(True, True, False, 1)
    assert "replication 2 is unnecessary when write ahead log is enabled" in caplog.text
    assert "serialization True is not supported" in caplog.text
    handler.stop()


def test_wal_handler_times_out_naming_the_block(tmp_path: Path) -> None:
    release = threading.Event()

    class StuckLog(FileBasedWriteAheadLog):
        def write(self, record: bytes, time_ms: int) -> RecordHandle:
            release.wait(10)
            return super().write(record, time_ms)

    log = StuckLog(str(tmp_path / "log"), fsync=False)
    handler = wal_handler(tmp_path, log=log, timeout_s=0.2)
    with pytest.raises(
        TimeoutError, match=r"storing block input-0-5 timed out after 0.2 s .*write-ahead log"
    ):
        handler.store_block(StreamBlockId(0, 5), ArrayBufferBlock([1, 2, 3]))
    release.set()
    handler.stop()


def test_wal_handler_fails_when_the_block_store_fails(tmp_path: Path) -> None:
    handler = wal_handler(
        tmp_path, block_manager=BlockManager(memory_budget_bytes=10), level=StorageLevel.MEMORY_ONLY
    )
    with pytest.raises(BlockStoreError, match=r"input-0-1.*MEMORY_ONLY"):
        handler.store_block(StreamBlockId(0, 1), ArrayBufferBlock(KAFKA_RECORDS))
    handler.stop()


def test_old_blocks_and_wal_segments_are_cleaned_below_the_threshold(tmp_path: Path) -> None:
    # Block and WAL times come from one manual clock; the tracker computes the threshold
    # (batch time minus the remember duration) and sends it through cleanup_old_blocks.
    clock = ManualClock(1_000)
    manager = BlockManager(now_ms=clock.get_time_ms)
    log = create_receiver_write_ahead_log(str(tmp_path), 0, rolling_interval_s=1, fsync=False)
    handler = wal_handler(tmp_path, block_manager=manager, log=log, clock=clock)
    old = handler.store_block(StreamBlockId(0, 1), ArrayBufferBlock(["old"]))
    clock.set_time(5_000)
    new = handler.store_block(StreamBlockId(0, 2), ArrayBufferBlock(["new"]))
    assert old.wal_record_handle and new.wal_record_handle
    assert old.wal_record_handle.path != new.wal_record_handle.path  # different segments

    handler.cleanup_old_blocks(4_000)

    assert not manager.contains(StreamBlockId(0, 1)) and manager.contains(StreamBlockId(0, 2))
    wait_until(lambda: not Path(old.wal_record_handle.path).exists(), what="the old segment's deletion")
    with pytest.raises(SegmentNotFoundError):
        log.read(old.wal_record_handle)
    assert decode_block(log.read(new.wal_record_handle)) == ["new"]
    handler.stop()


class RecordingReplicator:
    """Stands in for the peers (a unit test of the handler alone): records what it was given."""

    def __init__(self) -> None:
        self.blocks: list[tuple[StreamBlockId, bytes, StorageLevel]] = []

    def replicate(self, block_id: StreamBlockId, data: bytes, level: StorageLevel) -> BlockLocation | None:
        self.blocks.append((block_id, data, level))
        return BlockLocation("peer-host", "2", f"/peer/{block_id.name}", 4040)


def test_a_replicated_level_keeps_a_second_copy_before_the_block_is_reported() -> None:
    replicator = RecordingReplicator()
    block_manager = BlockManager()
    handler = BlockManagerBasedBlockHandler(
        block_manager,
        StorageLevel.MEMORY_AND_DISK_SER_2,
        replicator,  # type: ignore[arg-type]
    )
    result = handler.store_block(StreamBlockId(0, 1), ArrayBufferBlock(["a", "b"]))
    assert result.replica == BlockLocation("peer-host", "2", "/peer/input-0-1", 4040)
    ((block_id, data, level),) = replicator.blocks
    assert block_id == StreamBlockId(0, 1) and level == StorageLevel.MEMORY_AND_DISK_SER_2
    assert data == block_manager.get(block_id)  # the very bytes stored here
    handler.stop()
    block_manager.close()


def test_a_level_with_one_copy_is_never_replicated(caplog: pytest.LogCaptureFixture) -> None:
    replicator = RecordingReplicator()
    block_manager = BlockManager()
    with caplog.at_level(logging.WARNING):
        handler = BlockManagerBasedBlockHandler(
            block_manager,
            StorageLevel.MEMORY_AND_DISK_SER,
            replicator,  # type: ignore[arg-type]
        )
    assert handler.store_block(StreamBlockId(0, 1), ArrayBufferBlock(["a"])).replica is None
    assert not replicator.blocks and not caplog.text
    block_manager.close()


def test_a_replicated_level_with_no_peer_in_this_placement_keeps_one_copy_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    block_manager = BlockManager()
    with caplog.at_level(logging.WARNING):
        handler = BlockManagerBasedBlockHandler(block_manager, StorageLevel.MEMORY_AND_DISK_SER_2)
        for unique_id in range(5):
            assert handler.store_block(StreamBlockId(0, unique_id), ArrayBufferBlock(["a"])).replica is None
    assert caplog.text.count("asks for 2 copies of each block") == 1
    assert "one copy is kept" in caplog.text
    block_manager.close()

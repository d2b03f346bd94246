"""BlockManager: memory under a byte budget, spill to an owner-only disk directory by level,
clear errors, removal by age, thread safety."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from reliable_kafka.storage import BlockManager, BlockStore, BlockStoreError, StorageLevel, StreamBlockId
from reliable_kafka.storage.disk_store import DiskStore, DiskStoreClosedError


def block(n: int) -> StreamBlockId:
    return StreamBlockId(0, n)


def test_put_get_contains_remove(tmp_path: Path) -> None:
    manager = BlockManager(local_dir=tmp_path)
    assert isinstance(manager, BlockStore)
    assert manager.put(block(1), b"abc", StorageLevel.MEMORY_ONLY)
    assert manager.contains(block(1))
    assert manager.get(block(1)) == b"abc"
    assert manager.memory_used_bytes == 3
    assert manager.remove(block(1))
    assert not manager.remove(block(1))
    assert manager.get(block(1)) is None
    assert manager.memory_used_bytes == 0
    assert manager.disk_directory is None  # nothing spilled, nothing created


def test_a_second_put_of_the_same_id_keeps_the_first() -> None:
    manager = BlockManager()
    assert manager.put(block(1), b"first", StorageLevel.MEMORY_ONLY)
    assert not manager.put(block(1), b"second", StorageLevel.MEMORY_ONLY)
    assert manager.get(block(1)) == b"first"


def test_a_block_too_big_for_memory_only_names_the_block_and_the_level() -> None:
    manager = BlockManager(memory_budget_bytes=100)
    expected = r"block input-0-1 \(101 bytes\) does not fit in memory.*storage level MEMORY_ONLY does not"
    with pytest.raises(BlockStoreError, match=expected) as caught:
        manager.put(block(1), b"x" * 101, StorageLevel.of("MEMORY_ONLY"))  # pyspark's, serialized
    assert caught.value.block_id == block(1)
    assert caught.value.level == StorageLevel.MEMORY_ONLY_SER
    assert not manager.contains(block(1))


def test_a_block_that_does_not_fit_spills_to_an_owner_only_directory(tmp_path: Path) -> None:
    manager = BlockManager(memory_budget_bytes=100, local_dir=tmp_path)
    assert manager.put(block(1), b"a" * 60, StorageLevel.MEMORY_AND_DISK)
    assert manager.put(block(2), b"b" * 60, StorageLevel.MEMORY_AND_DISK)  # over budget: disk
    assert manager.put(block(3), b"c" * 10, StorageLevel.DISK_ONLY)
    assert manager.memory_used_bytes == 60
    directory = manager.disk_directory
    assert directory is not None and directory.parent == tmp_path
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert sorted(p.name for p in directory.iterdir()) == ["input-0-2", "input-0-3"]
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert manager.get(block(2)) == b"b" * 60
    assert manager.get(block(3)) == b"c" * 10
    assert manager.remove(block(2))
    assert not (directory / "input-0-2").exists()
    manager.close()
    assert not directory.exists()


def test_remove_blocks_older_than_drops_only_blocks_stored_before_the_threshold(tmp_path: Path) -> None:
    now = [1000]
    manager = BlockManager(memory_budget_bytes=10, local_dir=tmp_path, now_ms=lambda: now[0])
    manager.put(block(1), b"old", StorageLevel.MEMORY_AND_DISK)
    manager.put(block(2), b"old on disk", StorageLevel.MEMORY_AND_DISK)
    now[0] = 2000
    manager.put(block(3), b"new", StorageLevel.MEMORY_AND_DISK)
    assert sorted(manager.remove_blocks_older_than(2000)) == [block(1), block(2)]
    assert [manager.contains(block(n)) for n in (1, 2, 3)] == [False, False, True]
    assert manager.memory_used_bytes == 3
    assert manager.disk_directory is not None and list(manager.disk_directory.iterdir()) == []


def test_concurrent_puts_and_removes_keep_the_accounting_right(tmp_path: Path) -> None:
    manager = BlockManager(memory_budget_bytes=50_000, local_dir=tmp_path)

    def work(thread: int) -> None:
        for n in range(200):
            block_id = StreamBlockId(thread, n)
            assert manager.put(block_id, bytes([thread]) * 100, StorageLevel.MEMORY_AND_DISK)
            if n % 2:
                assert manager.remove(block_id)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = [StreamBlockId(t, n) for t in range(8) for n in range(0, 200, 2)]
    assert all(manager.get(block_id) == bytes([block_id.stream_id]) * 100 for block_id in kept)
    assert manager.memory_used_bytes <= 50_000
    in_memory = manager.memory_used_bytes // 100
    on_disk = len(list(manager.disk_directory.iterdir())) if manager.disk_directory else 0
    assert in_memory + on_disk == len(kept)


def test_put_after_close_fails() -> None:
    manager = BlockManager()
    manager.close()
    with pytest.raises(BlockStoreError, match="closed"):
        manager.put(block(1), b"x", StorageLevel.MEMORY_ONLY)


@pytest.mark.parametrize("close_after_write", [False, True])
def test_a_disk_put_in_flight_during_close_fails_and_leaves_no_directory(
    tmp_path: Path, close_after_write: bool
) -> None:
    class ClosingDuringWrite(DiskStore):
        """close() arrives after the block manager handed the block to the disk store."""

        def put(self, block_id: StreamBlockId, data: bytes) -> None:
            if not close_after_write:
                manager.close()
            super().put(block_id, data)
            if close_after_write:
                manager.close()

    manager = BlockManager(memory_budget_bytes=0, local_dir=tmp_path)
    manager._disk = ClosingDuringWrite(tmp_path)
    with pytest.raises(BlockStoreError, match=r"block input-0-1.*closed"):
        manager.put(block(1), b"spilled", StorageLevel.MEMORY_AND_DISK_SER)
    assert list(tmp_path.iterdir()) == [], "the spill directory came back after close"
    assert not manager.contains(block(1))


def test_a_closed_disk_store_refuses_puts_and_creates_no_directory(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "spill")
    store.put(block(1), b"one")
    first = store.directory
    assert first is not None and first.is_dir()
    store.close()
    with pytest.raises(DiskStoreClosedError):
        store.put(block(2), b"two")
    assert list((tmp_path / "spill").iterdir()) == []
    assert store.directory is None

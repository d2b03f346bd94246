"""ExecutorBlockStore on real files: tiers by level and budget, owner-only atomic files, paths
another process reads, cleanup."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from reliable_kafka.storage import executor_block_store as ebs
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_store import BlockStore, BlockStoreError
from reliable_kafka.storage.executor_block_store import ExecutorBlockStore, read_block_file
from reliable_kafka.storage.storage_level import StorageLevel
from tests.support import ManualClock

B1, B2, B3 = StreamBlockId(3, 1), StreamBlockId(3, 2), StreamBlockId(3, 3)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "shm", tmp_path / "local"


def make_store(dirs: tuple[Path, Path], budget: int = 100, **kwargs: object) -> ExecutorBlockStore:
    memory_dir, local_dir = dirs
    return ExecutorBlockStore(
        "app-1-stream-3", memory_budget_bytes=budget, memory_dir=memory_dir, local_dir=local_dir, **kwargs
    )


def test_implements_the_block_store_protocol(dirs: tuple[Path, Path]) -> None:
    assert isinstance(make_store(dirs), BlockStore)


def test_memory_level_goes_to_the_memory_directory_and_reads_back(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs)
    assert store.put(B1, b"\x00abc", StorageLevel.MEMORY_ONLY_SER)
    path = Path(store.path_of(B1) or "")
    assert path.parent.parent == dirs[0]
    assert path.name == "input-3-1"
    assert store.get(B1) == b"\x00abc" == read_block_file(path)
    assert store.contains(B1)
    assert store.memory_used_bytes == 4
    assert store.disk_directory is None


def test_disk_level_goes_to_the_local_directory_and_not_the_budget(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs)
    assert store.put(B1, b"on disk", StorageLevel.DISK_ONLY)
    assert Path(store.path_of(B1) or "").parent.parent == dirs[1]
    assert store.memory_used_bytes == 0
    assert store.get(B1) == b"on disk"


def test_memory_overflow_spills_to_disk_when_the_level_allows(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs, budget=10)
    store.put(B1, b"x" * 8, StorageLevel.MEMORY_AND_DISK_SER)
    store.put(B2, b"y" * 8, StorageLevel.MEMORY_AND_DISK)  # deserialized: the same bytes
    assert Path(store.path_of(B1) or "").parent.parent == dirs[0]
    assert Path(store.path_of(B2) or "").parent.parent == dirs[1]
    assert store.memory_used_bytes == 8
    assert store.get(B2) == b"y" * 8


def test_memory_only_level_without_room_fails_naming_block_and_level(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs, budget=10)
    store.put(B1, b"x" * 8, StorageLevel.MEMORY_ONLY)
    with pytest.raises(BlockStoreError, match=r"input-3-2.*MEMORY_ONLY_2") as caught:
        store.put(B2, b"y" * 8, StorageLevel.MEMORY_ONLY_SER_2)
    assert caught.value.block_id == B2
    assert caught.value.level == StorageLevel.MEMORY_ONLY_SER_2
    assert not store.contains(B2)
    assert store.memory_used_bytes == 8


def test_a_refused_memory_write_falls_back_to_disk_only_when_the_level_allows(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(dirs)

    def full(_block_id: StreamBlockId, _data: bytes) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store._memory_dir, "put", full)
    assert store.put(B1, b"spilled", StorageLevel.MEMORY_AND_DISK_SER)
    assert Path(store.path_of(B1) or "").parent.parent == dirs[1]
    with pytest.raises(BlockStoreError, match=r"input-3-2.*MEMORY_ONLY"):
        store.put(B2, b"lost", StorageLevel.MEMORY_ONLY)
    assert store.memory_used_bytes == 0
    assert not store.contains(B2)


def test_a_failed_disk_write_is_a_block_store_error(dirs: tuple[Path, Path]) -> None:
    dirs[1].write_bytes(b"a file where the local directory should be")
    store = make_store(dirs)
    with pytest.raises(BlockStoreError, match="input-3-1") as caught:
        store.put(B1, b"data", StorageLevel.DISK_ONLY)
    assert caught.value.level == StorageLevel.DISK_ONLY
    assert not store.contains(B1)
    assert store.put(B1, b"data", StorageLevel.MEMORY_ONLY)


def test_putting_a_stored_block_again_changes_nothing(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs)
    assert store.put(B1, b"first", StorageLevel.MEMORY_ONLY)
    assert not store.put(B1, b"second", StorageLevel.DISK_ONLY)
    assert store.get(B1) == b"first"
    assert store.memory_used_bytes == 5


def test_files_are_owner_only_and_no_temporary_file_is_left(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs)
    store.put(B1, b"m", StorageLevel.MEMORY_ONLY)
    store.put(B2, b"d", StorageLevel.DISK_ONLY)
    for directory in (store.memory_directory, store.disk_directory):
        assert directory is not None
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert "app-1-stream-3" in directory.name
        for entry in directory.iterdir():
            assert not entry.name.startswith("."), entry
            assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_two_stores_of_the_same_stream_never_share_a_directory(dirs: tuple[Path, Path]) -> None:
    first, second = make_store(dirs), make_store(dirs)
    first.put(B1, b"first", StorageLevel.MEMORY_AND_DISK)
    second.put(B1, b"second", StorageLevel.MEMORY_AND_DISK)
    assert first.path_of(B1) != second.path_of(B1)
    assert (first.get(B1), second.get(B1)) == (b"first", b"second")
    second.close()
    assert first.get(B1) == b"first"


def test_unsafe_characters_in_the_name_stay_out_of_the_path(dirs: tuple[Path, Path]) -> None:
    store = ExecutorBlockStore("../app 1/stream", memory_dir=dirs[0], local_dir=dirs[1])
    store.put(B1, b"x", StorageLevel.MEMORY_ONLY)
    directory = store.memory_directory
    assert directory is not None
    assert directory.parent == dirs[0]
    assert "/" not in directory.name and " " not in directory.name


def test_remove_deletes_the_file_and_frees_the_budget(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs)
    store.put(B1, b"12345", StorageLevel.MEMORY_ONLY)
    store.put(B2, b"67890", StorageLevel.DISK_ONLY)
    paths = [store.path_of(B1), store.path_of(B2)]
    assert store.remove(B1) and store.remove(B2)
    assert not store.remove(B1)
    assert store.memory_used_bytes == 0
    assert store.path_of(B1) is None and store.get(B1) is None
    assert [read_block_file(p or "") for p in paths] == [None, None]


def test_remove_blocks_older_than_uses_the_store_time(dirs: tuple[Path, Path]) -> None:
    clock = ManualClock(1_000)
    store = make_store(dirs, now_ms=clock)
    store.put(B1, b"old", StorageLevel.MEMORY_ONLY)
    clock.now_ms = 2_000
    store.put(B2, b"old too", StorageLevel.DISK_ONLY)
    clock.now_ms = 3_000
    store.put(B3, b"new", StorageLevel.MEMORY_ONLY)
    assert sorted(store.remove_blocks_older_than(3_000)) == [B1, B2]
    assert [store.contains(b) for b in (B1, B2, B3)] == [False, False, True]
    assert store.memory_used_bytes == 3
    assert store.remove_blocks_older_than(3_000) == []


def test_close_removes_the_directories_and_later_puts_fail(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs)
    store.put(B1, b"m", StorageLevel.MEMORY_ONLY)
    store.put(B2, b"d", StorageLevel.DISK_ONLY)
    directories = [store.memory_directory, store.disk_directory]
    store.close()
    assert all(d is not None and not d.exists() for d in directories)
    assert store.get(B1) is None and not store.contains(B2)
    with pytest.raises(BlockStoreError, match="closed"):
        store.put(B3, b"late", StorageLevel.MEMORY_AND_DISK)
    assert [list(d.iterdir()) for d in dirs] == [[], []]


def test_another_process_reads_a_block_by_its_path_until_it_is_removed(dirs: tuple[Path, Path]) -> None:
    store = make_store(dirs, budget=4096)
    data = bytes(range(256)) * 4
    store.put(B1, data, StorageLevel.MEMORY_ONLY)
    store.put(B2, data[::-1], StorageLevel.DISK_ONLY)
    reader = (
        "import sys\n"
        "from reliable_kafka.storage.executor_block_store import read_block_file\n"
        "for path in sys.argv[1:]:\n"
        "    data = read_block_file(path)\n"
        "    sys.stdout.write('gone\\n' if data is None else data.hex() + '\\n')\n"
    )

    def read_elsewhere(*paths: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", reader, *paths], capture_output=True, text=True, check=True
        ).stdout
        return out.split()

    paths = [store.path_of(B1) or "", store.path_of(B2) or ""]
    assert read_elsewhere(*paths) == [data.hex(), data[::-1].hex()]
    store.remove(B1)
    store.close()
    assert read_elsewhere(*paths) == ["gone", "gone"]


def test_defaults_are_spark_local_dirs_and_dev_shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spark_local = tmp_path / "blockmgr-1"
    spark_local.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path / 'missing'},{spark_local}")
    assert ebs.default_local_dir() == spark_local
    monkeypatch.delenv("SPARK_LOCAL_DIRS")
    assert ebs.default_local_dir().is_dir()
    shm = Path("/dev/shm")
    usable = shm.is_dir() and os.access(shm, os.W_OK | os.X_OK)
    assert ebs.default_memory_dir(spark_local) == (shm if usable else spark_local)
    monkeypatch.setattr(ebs, "_SHARED_MEMORY", tmp_path / "no-shm-here")
    assert ebs.default_memory_dir(spark_local) == spark_local


def test_default_store_keeps_memory_blocks_in_dev_shm_when_there_is_one(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK | os.X_OK)):
        pytest.skip("no writable /dev/shm on this machine")
    store = ExecutorBlockStore("app-1-stream-3", local_dir=tmp_path)
    try:
        store.put(B1, b"in ram", StorageLevel.MEMORY_ONLY)
        assert Path(store.path_of(B1) or "").parent.parent == shm
    finally:
        store.close()
    assert store.memory_directory is None


def test_non_bytes_data_is_refused(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(TypeError):
        make_store(dirs).put(B1, bytearray(b"x"), StorageLevel.MEMORY_ONLY)  # type: ignore[arg-type]

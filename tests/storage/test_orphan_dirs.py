"""Block store directories of ended processes are removed by the next store on the host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reliable_kafka.storage import StorageLevel, StreamBlockId
from reliable_kafka.storage.executor_block_store import ExecutorBlockStore
from reliable_kafka.storage.orphan_dirs import remove_orphans


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_new_store_removes_the_directories_of_ended_processes(tmp_path: Path) -> None:
    memory, disk = tmp_path / "shm", tmp_path / "local"
    memory.mkdir()
    disk.mkdir()
    dead = _dead_pid()
    orphan_mem = memory / f"reliable-kafka-app-stream-0-mem-{dead}-abc123"
    orphan_disk = disk / f"reliable-kafka-app-stream-0-disk-{dead}-def456"
    alive = memory / f"reliable-kafka-app-stream-1-mem-{os.getppid()}-ghi789"
    unrelated = memory / f"something-else-mem-{dead}-x"
    for directory in (orphan_mem, orphan_disk, alive, unrelated):
        directory.mkdir()
        (directory / "block").write_bytes(b"x")
    store = ExecutorBlockStore("app-stream-2", local_dir=disk, memory_dir=memory)
    try:
        assert not orphan_mem.exists() and not orphan_disk.exists()
        assert alive.exists() and unrelated.exists()
        store.put(StreamBlockId(2, 0), b"data", StorageLevel.MEMORY_ONLY)
        (own,) = [p for p in memory.iterdir() if p.name.startswith("reliable-kafka-app-stream-2-")]
        assert f"-mem-{os.getpid()}-" in own.name
        # Another store starting now keeps this live process's directory.
        assert remove_orphans(memory, "mem") == 0 and own.exists()
    finally:
        store.close()


def test_symlinks_and_files_are_never_followed_or_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep").write_bytes(b"x")
    link = tmp_path / f"reliable-kafka-app-stream-0-mem-{dead}-link"
    link.symlink_to(target, target_is_directory=True)
    plain = tmp_path / f"reliable-kafka-app-stream-0-mem-{dead}-file"
    plain.write_bytes(b"x")
    assert remove_orphans(tmp_path, "mem") == 0
    assert (target / "keep").exists() and link.is_symlink() and plain.exists()

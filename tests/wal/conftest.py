"""Shared helpers for the write-ahead log tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from wal import FileBasedWriteAheadLog


def segment_files(directory: Path) -> list[str]:
    return sorted((p.name for p in directory.iterdir() if p.name.startswith("log-")), key=_by_start)


def _by_start(name: str) -> tuple[int, int]:
    _, start, end = name.split("-")
    return int(start), int(end)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "wal"


@pytest.fixture
def make_log(log_dir: Path) -> Iterator[Any]:
    """Factory for file logs in ``log_dir`` that are all closed at the end of the test."""
    logs: list[FileBasedWriteAheadLog] = []

    def make(**kwargs: Any) -> FileBasedWriteAheadLog:
        directory = kwargs.pop("directory", log_dir)
        log = FileBasedWriteAheadLog(str(directory), **kwargs)
        logs.append(log)
        return log

    yield make
    for log in logs:
        log.close()


@pytest.fixture
def memory_dir() -> Iterator[str]:
    """A fresh directory in fsspec's process-wide memory filesystem, removed afterwards."""
    path = f"/wal-test-{uuid.uuid4().hex}"
    yield path
    fs = MemoryFileSystem()
    if fs.exists(path):
        fs.rm(path, recursive=True)

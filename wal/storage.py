"""The small surface the log needs from a filesystem: exclusive create, append, ranged read, list, delete."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import BinaryIO


class SegmentWriter(ABC):
    """An open segment. After any exception its position is unknown: the log abandons it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.position = 0

    @abstractmethod
    def append(self, header: bytes, payload: bytes | memoryview) -> int:
        """Write header+payload, make them as durable as the policy says, return the frame offset."""

    @abstractmethod
    def close(self) -> None: ...


class Storage(ABC):
    """The log directory on some filesystem.

    ``published_on_flush``: a write that returned is in the store while its segment stays
    open; False where only closing the file publishes it (object stores).
    """

    published_on_flush = True

    def __init__(self, directory: str) -> None:
        self.directory = directory

    @abstractmethod
    def join(self, name: str) -> str: ...

    @abstractmethod
    def contains(self, path: str) -> bool:
        """Whether ``path`` names a file directly inside the directory (handles come from outside)."""

    @abstractmethod
    def create_segment(self, path: str) -> SegmentWriter:
        """Create a new, empty segment (and the directory on first use); ``FileExistsError`` if taken.

        The writer's ``path`` is where the segment really lives (a store without exclusive
        create may add a unique suffix to the name).
        """

    @abstractmethod
    def read_range(self, path: str, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``offset`` (fewer at end of file); ``FileNotFoundError`` if missing."""

    @abstractmethod
    def open_reader(self, path: str) -> tuple[BinaryIO, int]:
        """A buffered sequential reader and the segment's size at open time."""

    @abstractmethod
    def list_entries(self) -> list[tuple[str, str]]:
        """(basename, path) of every file in the directory; empty if the directory does not exist."""

    @abstractmethod
    def delete(self, path: str) -> None: ...

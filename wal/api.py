"""The interface every write-ahead log implements, and the handle it hands back."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Self


@dataclass(frozen=True, slots=True)
class RecordHandle:
    """Where one record lives: a segment path, the offset of its frame, and its payload length.

    Handles travel inside block metadata and driver events, so they convert to plain
    str/int dicts (msgpack-friendly) and never need pickle.
    """

    path: str
    offset: int
    length: int

    def to_dict(self) -> dict[str, str | int]:
        return {"path": self.path, "offset": self.offset, "length": self.length}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> RecordHandle:
        path, offset, length = d["path"], d["offset"], d["length"]
        # Handles come back from disk/wire: reject anything that is not exactly the types we wrote.
        if not isinstance(path, str):
            raise TypeError(f"RecordHandle path must be str, got {type(path).__name__}")
        for name, value in (("offset", offset), ("length", length)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise TypeError(f"RecordHandle {name} must be a non-negative int, got {value!r}")
        return cls(path, offset, length)  # type: ignore[arg-type]


class WriteAheadLog(ABC):
    """Spark's ``WriteAheadLog`` contract.

    ``write`` returns only once the record is as durable as the log was configured to make it.
    ``time_ms`` is the record's logical time; ``clean`` uses it to drop old data.
    """

    @abstractmethod
    def write(self, record: bytes, time_ms: int) -> RecordHandle:
        """Append one record and return the handle that reads it back."""

    @abstractmethod
    def read(self, handle: RecordHandle) -> bytes:
        """Read the record a handle points at; raises ``CorruptRecordError``/``SegmentNotFoundError``."""

    @abstractmethod
    def read_all(self) -> Iterator[bytes]:
        """Every intact record, oldest segment first; damaged data is skipped with a warning."""

    @abstractmethod
    def clean(self, thresh_time_ms: int, wait_for_completion: bool) -> None:
        """Delete data older than ``thresh_time_ms``; in the background unless ``wait_for_completion``."""

    @abstractmethod
    def close(self) -> None:
        """Release files and threads; writes afterwards raise ``WriteAheadLogClosedError``."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

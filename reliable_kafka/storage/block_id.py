"""Block ids of received data (Spark's ``StreamBlockId``) and the counter that hands them out."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

_STREAM_BLOCK_NAME = re.compile(r"input-([0-9]+)-([0-9]+)")


@dataclass(frozen=True, slots=True, order=True)
class StreamBlockId:
    """One block of received data: ``input-<stream_id>-<unique_id>``."""

    stream_id: int
    unique_id: int

    def __post_init__(self) -> None:
        for field in ("stream_id", "unique_id"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"StreamBlockId.{field} must be a non-negative int, got {value!r}")

    @property
    def name(self) -> str:
        return f"input-{self.stream_id}-{self.unique_id}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, name: str) -> StreamBlockId:
        match = _STREAM_BLOCK_NAME.fullmatch(name)
        if match is None:
            raise ValueError(f"{name!r} is not a stream block id (input-<streamId>-<uniqueId>)")
        return cls(int(match.group(1)), int(match.group(2)))


class StreamBlockIdGenerator:
    """Unique block ids for one stream, shared by every block generator of a receiver.

    Like Spark, the counter starts at the wall-clock time in ms: a receiver restarted later
    starts above the ids its previous incarnation handed out unless that one produced more than
    one block per millisecond.
    """

    def __init__(self, stream_id: int, first_unique_id: int | None = None) -> None:
        self.stream_id = stream_id
        self._next = time.time_ns() // 1_000_000 if first_unique_id is None else first_unique_id
        self._lock = threading.Lock()

    def next_id(self) -> StreamBlockId:
        with self._lock:
            unique_id = self._next
            self._next += 1
        return StreamBlockId(self.stream_id, unique_id)

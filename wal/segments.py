"""Segment file names: ``log-<start_ms>-<end_ms>``, as Spark's FileBasedWriteAheadLog names them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# The optional suffix is added on stores without exclusive create (see FsspecStorage).
_NAME = re.compile(r"log-(\d+)-(\d+)(?:\.[0-9a-f]{32})?")


@dataclass(frozen=True, slots=True, order=True)
class SegmentInfo:
    """One segment; ordering is (start, end, path), which is write order for segments this package made."""

    start_ms: int
    end_ms: int
    path: str


def segment_name(start_ms: int, end_ms: int) -> str:
    return f"log-{start_ms}-{end_ms}"


def segment_basename(path: str) -> str:
    """The file name of a local or fsspec path (both use "/"; local paths may also use os.sep)."""
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def parse_segment_name(name: str) -> tuple[int, int] | None:
    """(start_ms, end_ms), or None for files that are not segments (editor droppings, temp files)."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def segments_in_order(entries: Iterable[tuple[str, str]]) -> list[SegmentInfo]:
    """Segments among ``(basename, path)`` directory entries, oldest first."""
    found = []
    for name, path in entries:
        times = parse_segment_name(name)
        if times is not None:
            found.append(SegmentInfo(times[0], times[1], path))
    found.sort()
    return found

"""Reading whole segments back: every intact record, torn or corrupt data reported and skipped."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

from wal.errors import WriteAheadLogError
from wal.framing import HEADER_SIZE, MAGIC, FrameError, decode_header, verify_payload
from wal.storage import Storage

logger = logging.getLogger(__name__)


_SCAN_CHUNK = 1 << 20
_MAGIC_BYTE = bytes([MAGIC])


def iter_segment(storage: Storage, path: str) -> Iterator[bytes]:
    """Records of one segment in order.

    A torn tail (a crash mid-append) ends the segment with a warning. After a corrupt frame
    reading resumes at the next offset where a whole frame checks out (magic byte, length
    within the segment, CRC32C over length and payload), with a warning saying how many bytes
    were skipped; a payload that itself holds a well-formed frame could be taken for one,
    which a 32-bit CRC makes unlikely for anything but deliberately embedded frames.
    A missing segment (cleaned meanwhile) is skipped with a warning. Any other I/O error
    raises ``WriteAheadLogError``: silently dropping a readable-later segment would lose data.
    """
    try:
        reader, size = storage.open_reader(path)
    except FileNotFoundError:
        logger.warning("write-ahead log segment %s vanished before recovery could read it; skipped", path)
        return
    except OSError as exc:
        raise WriteAheadLogError(f"cannot open write-ahead log segment {path}: {exc}") from exc
    cursor = _Cursor(reader)
    try:
        offset = 0
        while offset < size:
            try:
                try:
                    payload = _next_record(cursor, size - offset)
                except FrameError as exc:
                    resume = _next_intact_frame(storage, path, offset + 1, size)
                    _report_damage(path, offset, size, exc, resume)
                    if resume is None:
                        return
                    if resume < cursor.position:
                        # The bad frame's bogus length read past the resume point; readers only go forward.
                        cursor.reader.close()
                        cursor = _Cursor(storage.open_reader(path)[0])
                    if not cursor.skip_to(resume):
                        return
                    offset = resume
                    continue
            except FileNotFoundError:
                logger.warning("write-ahead log segment %s vanished while being recovered", path)
                return
            except OSError as exc:
                raise WriteAheadLogError(f"cannot read write-ahead log segment {path}: {exc}") from exc
            yield payload
            offset += HEADER_SIZE + len(payload)
    finally:
        cursor.reader.close()


class _Cursor:
    """A forward-only reader that knows its offset (fsspec range readers cannot seek or tell)."""

    def __init__(self, reader: BinaryIO) -> None:
        self.reader = reader
        self.position = 0

    def read(self, size: int) -> bytes:
        data = self.reader.read(size)
        self.position += len(data)
        return data

    def skip_to(self, target: int) -> bool:
        """Read up to ``target``; False if the segment ended first."""
        while self.position < target:
            if not self.read(min(target - self.position, _SCAN_CHUNK)):
                return False
        return True


def _next_record(cursor: _Cursor, remaining: int) -> bytes:
    length, crc = decode_header(cursor.read(min(HEADER_SIZE, remaining)))
    # Check against the bytes that exist before reading: a garbage length must not allocate gigabytes.
    if length > remaining - HEADER_SIZE:
        raise FrameError(f"record of {length} bytes runs past the end of the segment", torn=True)
    payload = cursor.read(length)
    verify_payload(length, crc, payload)
    return payload


def _next_intact_frame(storage: Storage, path: str, start: int, size: int) -> int | None:
    """Offset of the first frame at or after ``start`` that checks out, or None."""
    position = start
    while position <= size - HEADER_SIZE:
        chunk = storage.read_range(path, position, min(_SCAN_CHUNK, size - position))
        if not chunk:
            return None
        index = chunk.find(_MAGIC_BYTE)
        while index != -1:
            candidate = position + index
            if candidate > size - HEADER_SIZE:
                return None
            # The header is in the chunk unless it straddles the chunk's end: no read per candidate.
            header = chunk[index : index + HEADER_SIZE] if index + HEADER_SIZE <= len(chunk) else None
            if _frame_checks_out(storage, path, candidate, size, header):
                return candidate
            index = chunk.find(_MAGIC_BYTE, index + 1)
        position += len(chunk)
    return None


def _frame_checks_out(storage: Storage, path: str, offset: int, size: int, header: bytes | None) -> bool:
    try:
        if header is None:
            header = storage.read_range(path, offset, HEADER_SIZE)
        length, crc = decode_header(header)
        # Most random candidates fail here, before any payload is read.
        if length > size - offset - HEADER_SIZE:
            return False
        verify_payload(length, crc, storage.read_range(path, offset + HEADER_SIZE, length))
    except FrameError:
        return False
    return True


def _report_damage(path: str, offset: int, size: int, exc: FrameError, resume: int | None) -> None:
    if resume is not None:
        logger.warning(
            "corrupt write-ahead log record in %s at offset %d: %s; skipped %d bytes to the next "
            "intact record at offset %d",
            path,
            offset,
            exc.reason,
            resume - offset,
            resume,
        )
    elif exc.torn:
        logger.warning(
            "torn record at the end of write-ahead log segment %s (offset %d, %d bytes ignored): %s",
            path,
            offset,
            size - offset,
            exc.reason,
        )
    else:
        logger.warning(
            "corrupt write-ahead log record in %s at offset %d: %s; no intact record after it, "
            "skipping the rest of the segment (%d bytes)",
            path,
            offset,
            exc.reason,
            size - offset,
        )


def read_segments(storage: Storage, paths: Iterable[str]) -> Iterator[bytes]:
    for path in paths:
        yield from iter_segment(storage, path)


def read_segments_parallel(storage: Storage, paths: Iterable[str], threads: int) -> Iterator[bytes]:
    """Same records and order as ``read_segments``; segments are fetched ``threads`` at a time.

    Built for close-after-write logs: one small segment per record, where per-file latency
    (an object-store GET) dominates. A bounded window keeps memory flat for huge logs.
    """
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="wal-recovery")
    try:
        pending: deque[Future[list[bytes]]] = deque()
        todo = iter(paths)
        for path in todo:
            pending.append(pool.submit(_segment_records, storage, path))
            if len(pending) >= 2 * threads:
                break
        while pending:
            records = pending.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(pool.submit(_segment_records, storage, nxt))
            yield from records
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _segment_records(storage: Storage, path: str) -> list[bytes]:
    return list(iter_segment(storage, path))

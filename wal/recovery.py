"""Reading whole segments back: every intact record, torn or corrupt data reported and skipped."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

from wal.errors import WriteAheadLogError
from wal.framing import HEADER_SIZE, FrameError, decode_header, verify_payload
from wal.storage import Storage

logger = logging.getLogger(__name__)


def iter_segment(storage: Storage, path: str) -> Iterator[bytes]:
    """Records of one segment in order.

    A torn tail (a crash mid-append) or a corrupt frame ends the segment with a warning:
    nothing after a bad frame can be trusted to start on a frame boundary. A missing
    segment (cleaned meanwhile) is skipped with a warning. Any other I/O error raises
    ``WriteAheadLogError``: silently dropping a readable-later segment would lose data.
    """
    try:
        reader, size = storage.open_reader(path)
    except FileNotFoundError:
        logger.warning("write-ahead log segment %s vanished before recovery could read it; skipped", path)
        return
    except OSError as exc:
        raise WriteAheadLogError(f"cannot open write-ahead log segment {path}: {exc}") from exc
    with reader:
        offset = 0
        while offset < size:
            try:
                payload = _next_record(reader, size - offset)
            except FrameError as exc:
                _report_damage(path, offset, size, exc)
                return
            except FileNotFoundError:
                logger.warning("write-ahead log segment %s vanished while being recovered", path)
                return
            except OSError as exc:
                raise WriteAheadLogError(f"cannot read write-ahead log segment {path}: {exc}") from exc
            yield payload
            offset += HEADER_SIZE + len(payload)


def _next_record(reader: BinaryIO, remaining: int) -> bytes:
    length, crc = decode_header(reader.read(min(HEADER_SIZE, remaining)))
    # Check against the bytes that exist before reading: a garbage length must not allocate gigabytes.
    if length > remaining - HEADER_SIZE:
        raise FrameError(f"record of {length} bytes runs past the end of the segment", torn=True)
    payload = reader.read(length)
    verify_payload(length, crc, payload)
    return payload


def _report_damage(path: str, offset: int, size: int, exc: FrameError) -> None:
    if exc.torn:
        logger.warning(
            "torn record at the end of write-ahead log segment %s (offset %d, %d bytes ignored): %s",
            path,
            offset,
            size - offset,
            exc.reason,
        )
    else:
        logger.warning(
            "corrupt write-ahead log record in %s at offset %d: %s; skipping the rest of the segment "
            "(%d bytes)",
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

"""The on-disk and on-wire layout of a block: a list of records, never pickled.

Two layouts, told apart by their magic; both decode to the same list of records::

    row layout (any receiver)
    offset 0  4 bytes   magic b"RKB\\x01"
    offset 4  ...       one msgpack array holding the records in order

    chunk layout (Kafka receivers)
    offset 0  4 bytes   magic b"RKB\\x02"
    offset 4  ...       one msgpack array of chunks, each the array
                        [topic, partition, [key...], [value...], [offset...]]
                        of consecutive records of one partition

msgpack spec: https://github.com/msgpack/msgpack/blob/master/spec.md; str is UTF-8
(str8/16/32), bytes is bin8/16/32.

A row record is any msgpack-able value: None, bool, int (64-bit), float, str, bytes, and arrays
or maps of those. Arrays decode as tuples (immutable, hashable, and the fastest shape to
decode), so a Kafka record travels as the tuple ``(key, value, topic, partition, offset)``.
The chunk layout is how Kafka receivers write the same records: each consumer thread packs
every batch it reads right away, while its messages are still in the CPU cache, building the
columns with ``map`` over the client's C accessors (no Python bytecode per record); a block is
then one array header plus the chunks' bytes. That halves the GIL time per record against
building tuples and packing the whole block later (``benchmarks/block_format_bench.py``), and
buffers a few bytes objects per block instead of a tuple per record.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import msgpack

BLOCK_MAGIC = b"RKB\x01"
CHUNKED_BLOCK_MAGIC = b"RKB\x02"
_MAGIC_LENGTH = 4


class BlockFormatError(ValueError):
    """Bytes that are not a block in this format (wrong magic, truncated or corrupt msgpack)."""


@dataclass(frozen=True, slots=True)
class PackedChunk:
    """Consecutive records of one Kafka partition, already packed as one chunk of the chunk layout."""

    data: bytes
    num_records: int


def pack_chunk(
    topic: str,
    partition: int,
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    offsets: Sequence[int],
) -> PackedChunk:
    """One chunk: the records ``(keys[i], values[i], topic, partition, offsets[i])``."""
    if not len(keys) == len(values) == len(offsets):
        raise ValueError(
            f"chunk columns differ in length: {len(keys)} keys, {len(values)} values, {len(offsets)} offsets"
        )
    return PackedChunk(
        msgpack.packb((topic, partition, keys, values, offsets), use_bin_type=True), len(offsets)
    )


@dataclass(frozen=True, slots=True)
class EncodedBlock:
    """A block of chunks in the chunk layout, ready to store, and how many records it holds."""

    data: bytes
    num_records: int

    @classmethod
    def of(cls, chunks: Sequence[PackedChunk]) -> EncodedBlock:
        return cls(encode_chunks(chunks), sum(chunk.num_records for chunk in chunks))


def encode_block(records: Sequence[Any]) -> bytes:
    """Serialize records in the row layout; raises ``TypeError`` for a value msgpack cannot represent."""
    return BLOCK_MAGIC + msgpack.packb(records, use_bin_type=True)


def encode_chunks(chunks: Sequence[PackedChunk]) -> bytes:
    """A block in the chunk layout: the chunks' bytes after one msgpack array header."""
    return b"".join([CHUNKED_BLOCK_MAGIC, _array_header(len(chunks)), *[c.data for c in chunks]])


def _array_header(length: int) -> bytes:
    # msgpack's fixarray / array 16 / array 32 headers.
    if length < 16:
        return bytes((0x90 | length,))
    if length < 1 << 16:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


def check_block(data: bytes | bytearray | memoryview) -> None:
    """Cheap check that bytes claim to be a block (magic only; the body is checked on decode)."""
    magic = bytes(data[:_MAGIC_LENGTH])
    if magic not in (BLOCK_MAGIC, CHUNKED_BLOCK_MAGIC):
        raise BlockFormatError(
            f"not a block: expected magic {BLOCK_MAGIC!r} or {CHUNKED_BLOCK_MAGIC!r}, got {magic!r}"
        )


Chunk = tuple[str, int, tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]


def decode_block(data: bytes | bytearray | memoryview) -> list[Any]:
    """The records of a block in either layout."""
    body = _body(data)
    if _in_row_layout(data):
        return list(body)
    records: list[Any] = []
    for chunk in _checked_chunks(body):
        records.extend(rows_of_chunk(chunk))
    return records


def decode_chunks(data: bytes | bytearray | memoryview) -> list[Chunk] | None:
    """The chunks of a block in the chunk layout, each checked, as its columns
    ``(topic, partition, keys, values, offsets)`` (no record built yet); ``None`` for a block in
    the row layout, without unpacking it (read it with :func:`decode_block`)."""
    if _in_row_layout(data):
        return None
    return _checked_chunks(_body(data))


def _in_row_layout(data: bytes | bytearray | memoryview) -> bool:
    return bytes(data[:_MAGIC_LENGTH]) == BLOCK_MAGIC


def _checked_chunks(body: tuple[Any, ...]) -> list[Chunk]:
    for index, chunk in enumerate(body):
        if not (isinstance(chunk, tuple) and len(chunk) == 5):
            raise BlockFormatError(f"chunk {index} is not a [topic, partition, keys, values, offsets] array")
        topic, partition, keys, values, offsets = chunk
        if not (
            isinstance(topic, str)
            and isinstance(partition, int)
            and isinstance(keys, tuple)
            and isinstance(values, tuple)
            and isinstance(offsets, tuple)
            and len(keys) == len(values) == len(offsets)
        ):
            raise BlockFormatError(f"chunk {index} has mistyped fields or columns of different lengths")
    return list(body)


def rows_of_chunk(chunk: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """A checked chunk's records ``(key, value, topic, partition, offset)``, in order. A chunk
    read for a ``messageHandler`` carries more columns after its five (each record's timestamp,
    timestamp type, headers): its records carry them after their five fields."""
    topic, partition, keys, values, offsets, *metadata = chunk
    return zip(keys, values, repeat(topic), repeat(partition), offsets, *metadata)


def _body(data: bytes | bytearray | memoryview) -> tuple[Any, ...]:
    check_block(data)
    try:
        body = msgpack.unpackb(
            memoryview(data)[_MAGIC_LENGTH:], raw=False, use_list=False, strict_map_key=False
        )
    except (ValueError, TypeError) as exc:  # msgpack's unpack errors are ValueErrors
        raise BlockFormatError(f"corrupt block body: {exc}") from exc
    if not isinstance(body, tuple):
        raise BlockFormatError(f"block body is a {type(body).__name__}, not an array")
    return body

"""The on-disk and on-wire layout of a block: a list of records, never pickled.

Layout (version 1)::

    offset 0  4 bytes   magic b"RKB\\x01" ("reliable-kafka block", format version 1)
    offset 4  ...       one msgpack array (spec: https://github.com/msgpack/msgpack/blob/master/spec.md)
                        holding the records in order; str is UTF-8 (str8/16/32), bytes is bin8/16/32

A record is any msgpack-able value: None, bool, int (64-bit), float, str, bytes, and arrays or
maps of those. Arrays decode as tuples (immutable, hashable, and the fastest shape to decode),
so a Kafka record travels as the tuple ``(key, value, topic, partition, offset)``. Measured with
20,000 such records (16-byte key, 100-byte value): encode 7.4M records/s, decode 4.5M records/s;
a columnar chunk (one topic/partition, key/value/offset columns) was only ~25% faster and 7%
smaller, and cannot hold a block that mixes partitions, so records stay row-shaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgpack

BLOCK_MAGIC = b"RKB\x01"


class BlockFormatError(ValueError):
    """Bytes that are not a block in this format (wrong magic, truncated or corrupt msgpack)."""


def encode_block(records: Sequence[Any]) -> bytes:
    """Serialize records; raises ``TypeError`` for a value msgpack cannot represent."""
    return BLOCK_MAGIC + msgpack.packb(records, use_bin_type=True)


def check_block(data: bytes | bytearray | memoryview) -> None:
    """Cheap check that bytes claim to be a block (magic only; the body is checked on decode)."""
    if bytes(data[: len(BLOCK_MAGIC)]) != BLOCK_MAGIC:
        raise BlockFormatError(f"not a block: expected magic {BLOCK_MAGIC!r}, got {bytes(data[:4])!r}")


def decode_block(data: bytes | bytearray | memoryview) -> list[Any]:
    check_block(data)
    try:
        records = msgpack.unpackb(
            memoryview(data)[len(BLOCK_MAGIC) :], raw=False, use_list=False, strict_map_key=False
        )
    except (ValueError, TypeError) as exc:  # msgpack's unpack errors are ValueErrors
        raise BlockFormatError(f"corrupt block body: {exc}") from exc
    if not isinstance(records, tuple):
        raise BlockFormatError(f"block body is a {type(records).__name__}, not an array of records")
    return list(records)

"""Many records packed into one: the payload a batched write hands to the wrapped log.

Format: msgpack ``[1, [record, ...]]`` (version, list of bin). Never pickle: the data is
read back by other processes and must not be able to run code.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgpack

AGGREGATE_VERSION = 1


def aggregate(records: Sequence[bytes]) -> bytes:
    return msgpack.packb([AGGREGATE_VERSION, list(records)], use_bin_type=True)


def deaggregate(data: bytes) -> list[bytes]:
    """The records of an aggregate; ``ValueError`` if ``data`` is not one."""
    try:
        decoded = msgpack.unpackb(data, raw=False, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ValueError(f"not a batched write-ahead log record: {exc}") from exc
    if (
        not isinstance(decoded, list)
        or len(decoded) != 2
        or decoded[0] != AGGREGATE_VERSION
        or not isinstance(decoded[1], list)
        or not all(isinstance(r, bytes) for r in decoded[1])
    ):
        raise ValueError("not a batched write-ahead log record (unexpected structure or version)")
    return decoded[1]

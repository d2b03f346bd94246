"""The shapes a receiver hands a block to its handler in (Spark's ``ReceivedBlock``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ArrayBufferBlock:
    """Records already in a list."""

    records: list[Any]


@dataclass(frozen=True, slots=True)
class IteratorBlock:
    """Records still to be drawn from an iterable; drawn once, when the block is stored."""

    iterator: Iterable[Any]


@dataclass(frozen=True, slots=True)
class ByteBufferBlock:
    """A block the receiver serialized itself, in the block format
    (:func:`reliable_kafka.storage.encode_block` or ``encode_chunks``), with its record count
    if the receiver knows it."""

    data: bytes
    num_records: int | None = None


ReceivedBlock = ArrayBufferBlock | IteratorBlock | ByteBufferBlock

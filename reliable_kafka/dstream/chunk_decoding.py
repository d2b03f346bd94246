"""A chunk of records through a stream's decoder: from its key and value columns at once when
the decoder offers that, else record by record in C loops (``map``, ``zip``), not a Python
generator step per record.

Shared by the two read chains whose records come as chunks of one Kafka partition: a batch's
received blocks (:mod:`~reliable_kafka.dstream.block_partition`) and the direct stream's exact
offset ranges (``kafka/direct/kafka_rdd``). A chunk is the columns ``(topic, partition, keys,
values, offsets)`` of the block layout's chunk (``storage.block_format``); a chunk read for a
``messageHandler`` carries each record's ``timestamps, timestamp types, headers`` after those five,
and its records then carry them after their five fields, as the decoder expects.

A decoder that can build a chunk's elements from its key and value columns says so by being a
:class:`ColumnDecoder` (Kafka's default UTF-8 decoders are); should that fail, the chunk is decoded
again record by record through the decoder itself, which names, skips or dead-letters the record.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, repeat
from typing import Any, Protocol, runtime_checkable

from reliable_kafka.storage.block_format import rows_of_chunk


@runtime_checkable
class ColumnDecoder(Protocol):
    def decode_columns(self, keys: Sequence[Any], values: Sequence[Any]) -> list[Any] | None:
        """A chunk's elements from its key and value columns; None: this decoder decodes record
        by record. Raises when a value does not decode."""
        ...


def decoded_chunks(
    chunks: Iterable[Sequence[Any]], decoder: Callable[[Any], Any], skip: object
) -> Iterator[Any]:
    """``decoder(record)`` of each record of ``chunks``, in order, leaving out what the decoder
    returns as ``skip``; one chunk at a time (each read when the one before it is used up)."""
    if not isinstance(decoder, ColumnDecoder):
        return chain.from_iterable(decoded_rows(rows_of_chunk(chunk), decoder, skip) for chunk in chunks)
    return chain.from_iterable(_from_columns(chunk, decoder, skip) for chunk in chunks)


def _from_columns(chunk: Sequence[Any], decoder: Any, skip: object) -> list[Any]:
    try:
        items = decoder.decode_columns(chunk[2], chunk[3])
    except Exception:
        # A key or value the columns fail on: the decoder finds, names and handles it.
        items = None
    return items if items is not None else decoded_rows(rows_of_chunk(chunk), decoder, skip)


def decoded_rows(rows: Iterable[Any], decoder: Callable[[Any], Any], skip: object) -> list[Any]:
    """``decoder(row)`` of each row, leaving out ``skip``."""
    items = list(map(decoder, rows))
    if any(map(operator.is_, items, repeat(skip))):
        return [item for item in items if item is not skip]
    return items

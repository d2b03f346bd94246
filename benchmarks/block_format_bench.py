"""Block encoding and decoding: the chunk layout Kafka receivers write against the row layout.

    python benchmarks/block_format_bench.py [--records 200000] [--size 100] [--chunk 200] [--repeat 5]

One block of --records Kafka records (--size-byte values, 16-byte keys, 4 partitions), read as
consume() hands them over: fresh Message objects in batches of --chunk of one partition.
  rows    build a (key, value, topic, partition, offset) tuple per message, buffer them, and
          encode_block the whole block at the end (the baseline: any receiver's path, and the
          Kafka receivers' before the chunk layout)
  chunks  pack_chunk each batch as it arrives (columns by map() over the message accessors),
          then encode_chunks the block at the end (the Kafka receivers' path)
Each run gets its own fresh messages, as a receiver would; the best of --repeat counts. Both
blocks are then decoded back to rows with decode_block. Ratios > 1 mean the chunk layout is faster.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from random import Random
from typing import Any

from confluent_kafka import Message

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliable_kafka.storage import PackedChunk, decode_block, encode_block, encode_chunks, pack_chunk

TOPIC = "events"
PARTITIONS = 4


def consumer_batches(records: int, size: int, chunk: int) -> list[list[Message]]:
    """What consume() returns: lists of Messages, each of one partition here."""
    batches: list[list[Message]] = []
    offsets = [0] * PARTITIONS
    random = Random(0)  # the same records every time: both layouts must decode to them
    for start in range(0, records, chunk):
        partition = (start // chunk) % PARTITIONS
        count = min(chunk, records - start)
        batch = []
        for _ in range(count):
            batch.append(
                Message(
                    topic=TOPIC,
                    partition=partition,
                    offset=offsets[partition],
                    key=random.randbytes(16),
                    value=random.randbytes(size),
                )
            )
            offsets[partition] += 1
        batches.append(batch)
    return batches


def as_rows(batches: list[list[Message]]) -> bytes:
    rows: list[Any] = []
    for messages in batches:
        partition = messages[0].partition()
        rows.extend([(m.key(), m.value(), TOPIC, partition, m.offset()) for m in messages])
    return encode_block(rows)


_key, _value, _offset = Message.key, Message.value, Message.offset


def as_chunks(batches: list[list[Message]]) -> bytes:
    chunks: list[PackedChunk] = []
    for messages in batches:
        offsets = list(map(_offset, messages))
        keys, values = list(map(_key, messages)), list(map(_value, messages))
        chunks.append(pack_chunk(TOPIC, messages[0].partition(), keys, values, offsets))
    return encode_chunks(chunks)


def best_encode(
    repeat: int, args: argparse.Namespace, encode: Callable[[list[list[Message]]], bytes]
) -> tuple[float, bytes]:
    best, block = float("inf"), b""
    for _ in range(repeat):
        batches = consumer_batches(args.records, args.size, args.chunk)
        started = time.perf_counter()
        block = encode(batches)
        best = min(best, time.perf_counter() - started)
        del batches
    return best, block


def best_of(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows_s, rows_block = best_encode(args.repeat, args, as_rows)
    chunks_s, chunks_block = best_encode(args.repeat, args, as_chunks)
    rows_decode_s, rows_decoded = best_of(args.repeat, lambda: decode_block(rows_block))
    chunks_decode_s, chunks_decoded = best_of(args.repeat, lambda: decode_block(chunks_block))
    if sorted(rows_decoded, key=lambda r: (r[3], r[4])) != sorted(chunks_decoded, key=lambda r: (r[3], r[4])):
        raise SystemExit("the two layouts decoded to different records")

    n = args.records
    print(f"{n:,} records of {args.size} B in chunks of {args.chunk}, best of {args.repeat}")
    print(f"encode  rows   (baseline) : {n / rows_s:12,.0f} records/s  {len(rows_block) / 1e6:7.1f} MB")
    print(f"encode  chunks            : {n / chunks_s:12,.0f} records/s  {len(chunks_block) / 1e6:7.1f} MB")
    print(f"ratio encode chunks/rows  : {rows_s / chunks_s:12.2f}")
    print(f"decode  rows   (baseline) : {n / rows_decode_s:12,.0f} records/s")
    print(f"decode  chunks            : {n / chunks_decode_s:12,.0f} records/s")
    print(f"ratio decode chunks/rows  : {rows_decode_s / chunks_decode_s:12.2f}")


if __name__ == "__main__":
    main()

"""Recovery time of a driver restart with its write-ahead logs on local disk and at remote URLs.

    python benchmarks/recovery_bench.py [--records 1000000] [--size 100] [--block-records 10000,200000]
        [--wal-url hdfs://nn:8020/tmp/bench] [--wal-url s3a://bucket/bench] [--spark-conf FILE]
        [--blocks-per-batch 5] [--readers 1] [--repeat 2]

What a restarted driver does before the first batch it runs again has its data, timed with the
product's own code, in two steps:
1. metadata: ``ReceivedBlockTracker.create(..., recover_from_write_ahead_log=True)`` replays
   ``<checkpoint>/receivedBlockMetadata`` (what the ``ReceiverTracker`` of a restarted context
   does), then asks for the pending batches and their blocks;
2. blocks: every block of every pending batch read back as a batch partition reads a block no
   executor holds any more: a ``BlockPartition`` with the block's WAL handle (and the remote
   directory, as ``ReceiverInputDStream`` builds it), through its descriptor's msgpack round trip,
   then ``BlockPartition.read()`` from ``<checkpoint>/receivedData/0``. ``--readers`` threads
   read at once; a real restart reads them in Spark tasks, as many at once as executor cores.
Decoding the records (the same work on any storage) is not timed, only checked: every record
comes back.

Written beforehand and not timed, as a receiver and a driver write them: ``--records`` records
of ``--size`` bytes from 4 Kafka partitions, packed in chunks of 200 as the receiver's consumer
threads pack them, in blocks of ``--block-records``, each stored by the receiver's
``WriteAheadLogBasedBlockHandler`` (one WAL write, fsync on) and reported to a
``ReceivedBlockTracker`` logging to the metadata WAL (a block addition event per block, its offset
ranges as metadata; a batch allocation every ``--blocks-per-batch`` blocks; none completed: the
driver died with every record pending). The time of the writes is printed beside.

Per repeat, block size and location (local disk first, then each ``--wal-url`` in the order
given, rotated every repeat): write, then recover with fresh filesystem clients (fsspec's cached
instances dropped, as in a new process). The page cache stays warm for the local disk (and under
a server running on this machine); a restart after losing the machine reads colder. The best of
``--repeat`` counts, since other work on the machine only slows a run down; each remote figure is
also given as a multiple of local disk's in the same run.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wal_url import filesystem_options, remove, run_directory, where

from reliable_kafka.dstream.block_partition import BlockPartition
from reliable_kafka.kafka.client.offset_range import OffsetRange, block_metadata
from reliable_kafka.receiver import (
    ByteBufferBlock,
    ReceivedBlockInfo,
    WriteAheadLogBasedBlockHandler,
    create_receiver_write_ahead_log,
)
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.settings import WriteAheadLogSettings
from reliable_kafka.storage import (
    BlockManager,
    StorageLevel,
    StreamBlockIdGenerator,
    decode_block,
    pack_chunk,
)
from reliable_kafka.storage.block_format import EncodedBlock
from reliable_kafka.util.filesystems import FilesystemOptions, RemoteDirectory, configure, locate

STREAM = 0
TOPIC = "bench"
PARTITIONS = 4
# The receiver's consume batch: each consumer thread packs a chunk of this many records.
CHUNK_RECORDS = 200
BATCH_INTERVAL_MS = 1000
SETTINGS = WriteAheadLogSettings(enable=True, fsync=True)


@dataclass(frozen=True)
class Recovery:
    """One location's figures for one run."""

    write_s: float
    metadata_s: float
    blocks_s: float
    blocks: int
    batches: int

    @property
    def total_s(self) -> float:
        return self.metadata_s + self.blocks_s


def blocks_of(
    records: int, size: int, block_records: int
) -> Iterator[tuple[EncodedBlock, list[OffsetRange]]]:
    """The blocks a receiver reading ``PARTITIONS`` partitions round-robin stores, with their
    offset ranges: chunks of ``CHUNK_RECORDS`` consecutive records of one partition."""
    value = b"x" * size
    next_offset = [0] * PARTITIONS
    chunk = 0
    for first in range(0, records, block_records):
        in_block = min(block_records, records - first)
        chunks, ranges = [], {}
        for start in range(0, in_block, CHUNK_RECORDS):
            n = min(CHUNK_RECORDS, in_block - start)
            partition = chunk % PARTITIONS
            chunk += 1
            offset = next_offset[partition]
            chunks.append(
                pack_chunk(TOPIC, partition, [None] * n, [value] * n, list(range(offset, offset + n)))
            )
            ranges.setdefault(partition, offset)
            next_offset[partition] = offset + n
        yield (
            EncodedBlock.of(chunks),
            [OffsetRange(TOPIC, p, start, next_offset[p]) for p, start in sorted(ranges.items())],
        )


def write_as_receiver(
    checkpoint: str, options: FilesystemOptions, records: int, size: int, block_records: int, per_batch: int
) -> float:
    """Seconds to store and report every block (see the module's doc); every batch left pending."""
    block_store = BlockManager()
    handler = WriteAheadLogBasedBlockHandler(
        block_store,
        STREAM,
        StorageLevel.MEMORY_AND_DISK_SER,
        create_receiver_write_ahead_log(checkpoint, STREAM, fsync=True, filesystem_options=options),
    )
    tracker = ReceivedBlockTracker.create([STREAM], checkpoint, SETTINGS)
    block_ids = StreamBlockIdGenerator(STREAM)
    batch_time_ms = (time.time_ns() // 1_000_000 // BATCH_INTERVAL_MS) * BATCH_INTERVAL_MS
    started = time.perf_counter()
    try:
        for n, (block, ranges) in enumerate(blocks_of(records, size, block_records), start=1):
            block_id = block_ids.next_id()
            result = handler.store_block(block_id, ByteBufferBlock(block.data, block.num_records))
            # The restarted driver finds no receiver holding it: only the WAL has it.
            block_store.remove(block_id)
            info = ReceivedBlockInfo(STREAM, block.num_records, block_metadata(ranges), result)
            if not tracker.add_block(info):
                raise RuntimeError(f"block {block_id} not logged in the metadata WAL")
            if n % per_batch == 0:
                batch_time_ms += BATCH_INTERVAL_MS
                tracker.allocate_blocks_to_batch(batch_time_ms)
        if tracker.has_unallocated_received_blocks():
            tracker.allocate_blocks_to_batch(batch_time_ms + BATCH_INTERVAL_MS)
        return time.perf_counter() - started
    finally:
        handler.stop()
        tracker.stop()


def fresh_clients(url: str, options: FilesystemOptions) -> None:
    """Drop fsspec's cached filesystem instances (connections, listing caches): a new driver
    process starts without them."""
    fs = locate(url, options).fs
    if fs is not None:
        type(fs).clear_instance_cache()


def recover(checkpoint: str, records: int, readers: int) -> tuple[float, float, int, int]:
    """(metadata seconds, block-read seconds, blocks, pending batches), as the module's doc says."""
    started = time.perf_counter()
    tracker = ReceivedBlockTracker.create([STREAM], checkpoint, SETTINGS, recover_from_write_ahead_log=True)
    try:
        pending = tracker.pending_batch_times()
        infos = [info for t in pending for info in tracker.get_blocks_of_batch_and_stream(t, STREAM)]
        metadata_s = time.perf_counter() - started
    finally:
        tracker.stop()
    directory = RemoteDirectory.configured(checkpoint)
    descriptors = [
        # As create_block_rdd builds a partition of a block only the WAL has.
        BlockPartition(
            info.block_id.name, None, info.block_store_result.wal_record_handle, wal_directory=directory
        ).encode()
        for info in infos
    ]
    started = time.perf_counter()
    with ThreadPoolExecutor(readers) as pool:
        blocks = list(pool.map(lambda raw: BlockPartition.decode(raw).read(), descriptors))
    blocks_s = time.perf_counter() - started
    recovered = sum(len(decode_block(data)) for data in blocks)
    if recovered != records:
        raise RuntimeError(f"recovered {recovered:,} of {records:,} records from {checkpoint}")
    return metadata_s, blocks_s, len(infos), len(pending)


def run_at(url: str, options: FilesystemOptions, args: argparse.Namespace, block_records: int) -> Recovery:
    checkpoint = run_directory(url, "recovery-bench")
    # How the driver's metadata log, which gets only a URL, reaches it (StreamingContext.checkpoint).
    configure(checkpoint, options)
    try:
        write_s = write_as_receiver(
            checkpoint, options, args.records, args.size, block_records, args.blocks_per_batch
        )
        os.sync()  # what the writes left dirty is written out now, not during the recovery
        fresh_clients(checkpoint, options)
        metadata_s, blocks_s, blocks, batches = recover(checkpoint, args.records, args.readers)
    finally:
        remove(checkpoint, options)
    return Recovery(write_s, metadata_s, blocks_s, blocks, batches)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="records written, then recovered")
    parser.add_argument("--size", type=int, default=100, help="record value size in bytes (default 100)")
    parser.add_argument(
        "--block-records",
        default="10000,200000",
        help="records per block, comma-separated (default 10000,200000)",
    )
    parser.add_argument(
        "--blocks-per-batch", type=int, default=5, help="blocks allocated to each batch (default 5)"
    )
    parser.add_argument("--readers", type=int, default=1, help="blocks read at once (default 1)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, interleaved; the best counts")
    parser.add_argument(
        "--dir", help="local directory for the local-disk baseline (default: a temp dir in the CWD)"
    )
    parser.add_argument(
        "--wal-url", action="append", default=[], help="a remote checkpoint URL to compare (repeatable)"
    )
    parser.add_argument("--spark-conf", help="properties file with the spark.hadoop.* keys for --wal-url")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    options = filesystem_options(args.spark_conf)
    sizes = [int(s) for s in args.block_records.split(",")]

    local_root = tempfile.mkdtemp(prefix=".recovery-bench-", dir=args.dir or os.getcwd())
    urls = [local_root, *args.wal_url]
    print(
        f"{args.records:,} records x {args.size} B, {args.blocks_per_batch} blocks a batch, "
        f"{args.readers} reader(s); local disk {local_root}" + "".join(f", {url}" for url in args.wal_url)
    )
    results: dict[tuple[int, str], list[Recovery]] = {}
    try:
        for run in range(args.repeat):
            for block_records in sizes:
                shift = run % len(urls)
                for url in urls[shift:] + urls[:shift]:
                    result = run_at(url, options, args, block_records)
                    results.setdefault((block_records, url), []).append(result)
                    print(
                        f"run {run + 1}, blocks of {block_records:,}, {where(url)}: written in "
                        f"{result.write_s:.2f} s; recovery {result.total_s:.2f} s (metadata "
                        f"{result.metadata_s:.2f} s, {result.blocks} block(s) of {result.batches} batch(es) "
                        f"{result.blocks_s:.2f} s)",
                        flush=True,
                    )
    finally:
        remove(local_root, options)

    print(f"\nbest of {args.repeat} by recovery time; x local: the same figure over local disk's")
    header = (
        f"{'block records':>13} {'where':<6} {'blocks':>6} {'write s':>8} {'metadata s':>10} "
        f"{'blocks s':>9} {'recovery s':>10} {'x local':>8} {'MB/s read':>9}"
    )
    print(header)
    print("-" * len(header))
    megabytes = args.records * args.size / 1e6
    for block_records in sizes:
        local = min(results[(block_records, local_root)], key=lambda r: r.total_s)
        for url in urls:
            best = min(results[(block_records, url)], key=lambda r: r.total_s)
            print(
                f"{block_records:>13,} {where(url):<6} {best.blocks:>6} {best.write_s:>8.2f} "
                f"{best.metadata_s:>10.2f} {best.blocks_s:>9.2f} {best.total_s:>10.2f} "
                f"{best.total_s / local.total_s:>7.1f}x {megabytes / best.blocks_s:>9.0f}"
            )


if __name__ == "__main__":
    main()

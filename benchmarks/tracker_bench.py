"""ReceivedBlockTracker throughput with the driver metadata WAL (fsync on), batched vs unbatched,
against the same number of raw ``os.write`` + ``os.fsync`` calls in the same run.

    python benchmarks/tracker_bench.py [--events N] [--threads 1,8] [--blocks-per-batch 50] [--dir PATH]

An event is one ``add_block`` (a BlockAdditionEvent) or one ``allocate_blocks_to_batch`` (a
BatchAllocationEvent carrying every block queued since the last one). T receiver threads add
blocks concurrently, as T receivers do; one allocation follows every --blocks-per-batch blocks.
Baseline: one thread writing --events records of the size of an addition event, each followed by
fsync, to a file in the same directory. Reported: events/s and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo, ReceivedBlockStoreResult
from reliable_kafka.scheduler.received_block_events import BlockAdditionEvent, encode_event
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.settings import WriteAheadLogSettings
from reliable_kafka.storage.block_id import StreamBlockId
from wal import RecordHandle


def block_info(stream_id: int, n: int) -> ReceivedBlockInfo:
    handle = RecordHandle(
        f"/checkpoint/receivedData/{stream_id}/log-1700000000000-1700000060000", n * 4096, 4000
    )
    metadata = {"offset_ranges": [["events", stream_id, n * 100, (n + 1) * 100]]}
    block_id = StreamBlockId(stream_id, 1_700_000_000_000 + n)
    return ReceivedBlockInfo(stream_id, 100, metadata, ReceivedBlockStoreResult(block_id, 100, handle))


def bench_baseline(directory: Path, events: int, size: int) -> float:
    record = os.urandom(size)
    path = directory / "baseline.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        started = time.perf_counter()
        for _ in range(events):
            os.write(fd, record)
            os.fsync(fd)
        return time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()


def bench_tracker(
    directory: Path, events: int, threads: int, blocks_per_batch: int, batching: bool
) -> tuple[int, float]:
    """(events written, seconds)."""
    checkpoint = directory / f"checkpoint-{'batched' if batching else 'unbatched'}-{threads}"
    settings = WriteAheadLogSettings(driver_allow_batching=batching, fsync=True)
    tracker = ReceivedBlockTracker.create(range(threads), str(checkpoint), settings)
    # events = blocks + blocks / blocks_per_batch allocations
    blocks = events * blocks_per_batch // (blocks_per_batch + 1)
    per_thread = blocks // threads
    infos = [[block_info(t, n) for n in range(per_thread)] for t in range(threads)]
    added = 0
    added_lock = threading.Lock()
    batch_time = [0]

    def receiver(mine: list[ReceivedBlockInfo]) -> None:
        nonlocal added
        for info in mine:
            if not tracker.add_block(info):
                raise SystemExit("benchmark failed: add_block returned False")
            with added_lock:
                added += 1
                allocate = added % blocks_per_batch == 0
                if allocate:
                    batch_time[0] += 1000
                    batch = batch_time[0]
            if allocate:
                tracker.allocate_blocks_to_batch(batch)

    workers = [threading.Thread(target=receiver, args=(mine,), daemon=True) for mine in infos]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    allocated = sum(
        len(v) for t in tracker.allocated_batch_times() for v in tracker.get_blocks_of_batch(t).values()
    )
    allocations = len(tracker.allocated_batch_times())
    tracker.stop()
    if allocated != allocations * blocks_per_batch or allocated < added - blocks_per_batch:
        raise SystemExit(
            f"benchmark failed: {allocated} of {added} blocks allocated in {allocations} batches"
        )
    return added + allocations, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--threads", default="1,8")
    parser.add_argument("--blocks-per-batch", type=int, default=50)
    parser.add_argument("--dir", default=None, help="directory to write in (default: a temp dir under .)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="tracker-bench-", dir=args.dir or "."))
    try:
        size = len(encode_event(BlockAdditionEvent(block_info(0, 0))))
        base_s = bench_baseline(directory, args.events, size)
        base_rate = args.events / base_s
        print(
            f"~{args.events} events ({args.blocks_per_batch} additions per allocation), {size}-byte additions"
        )
        print(f"{'case':<28}{'events/s':>12}{'vs baseline':>14}")
        print(f"{'baseline os.write+fsync':<28}{base_rate:>12,.0f}{1.0:>13.2f}x", flush=True)
        for threads in (int(t) for t in args.threads.split(",")):
            for batching in (False, True):
                events, elapsed = bench_tracker(
                    directory, args.events, threads, args.blocks_per_batch, batching
                )
                rate = events / elapsed
                name = f"{'batched' if batching else 'unbatched'}, {threads} thread(s)"
                print(f"{name:<28}{rate:>12,.0f}{rate / base_rate:>13.2f}x", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

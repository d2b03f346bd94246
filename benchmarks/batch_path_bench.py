"""Where a batch's time goes, from the block's descriptor to the job's result (issue 27 part 2).

    python benchmarks/batch_path_bench.py [--records 2000000] [--block-records 100000]
        [--size 100] [--repeat 3] [--master local[2]] [--no-spark]

Blocks as a Kafka receiver writes them (chunk layout, chunks of 500 records of one of 4
partitions, keys None, --size-byte values), kept in files as an executor's block store keeps them;
the batch RDD reads them by path (executor placement, the peers.py run's path).

In-process steps, on one block, in one process (seconds per million records, best of --repeat):
  read          the partition's descriptor decoded and its block file read
  decode_block  msgpack and the rows (key, value, topic, partition, offset) of the block
  decoder       createStream's default decoder (UTF-8 key and value) over those rows, per record
  handler       the same with a messageHandler ``(m.offset, m.message)``, per record
  read chain    the whole executor-side function of a batch RDD (read + decode + decoder), then
                counted as ``rdd.count()`` counts, for: the default decoder, the handler, none
Spark steps (--master, one job per figure, one partition per block; wall: best of --repeat; CPU:
the mean, of the driver's Python, its JVM, and the Python workers, from proc_cpu.py):
  tasks         the same partitions, each task counting its descriptor (launch and result fixed cost)
  read          each task reads its block's bytes and returns their length
  count         ``rdd.count()`` of the batch RDD with the default decoder (peers.py's (d) job)
  handler       ``rdd.count()`` with the messageHandler
Baseline, measured in the same run: the read chain as it was before issue 27's part 2
(``reference_read_blocks`` below: a block decoded to rows, then one decoder call and one
generator step per record); every read-chain and count figure is printed beside its ratio
baseline / now (> 1: now is faster).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from proc_cpu import CpuMeter, CpuUsage, driver_jvm_pid

from reliable_kafka.dstream.batch_rdd import SKIP_RECORD, BlockRDD, _ReadBlocks
from reliable_kafka.dstream.block_partition import BlockPartition
from reliable_kafka.kafka.kafka_utils import KafkaRecordDecoder
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.storage.block_format import decode_block, encode_chunks, pack_chunk
from reliable_kafka.util.located_rdd import executor_locations, located_rdd

TOPIC = "events"
PARTITIONS = 4
CHUNK = 500


def make_block(first: int, records: int, size: int) -> bytes:
    chunks = []
    for start in range(first, first + records, CHUNK):
        count = min(CHUNK, first + records - start)
        # Values as peers.py's producer writes them: a stamp, then filler.
        values = [f"{1_700_000_000_000_000_000 + n}:".encode().ljust(size, b"x") for n in range(count)]
        partition = (start // CHUNK) % PARTITIONS
        chunks.append(pack_chunk(TOPIC, partition, [None] * count, values, list(range(start, start + count))))
    return encode_chunks(chunks)


def handler(m: Any) -> Any:
    return m.offset, m.message


class ReferenceReadBlocks:
    """The batch RDD's executor-side function before issue 27's part 2, kept as the baseline."""

    def __init__(self, decoder: Callable[[Any], Any] | None) -> None:
        self.decoder = decoder

    def __call__(self, _split: int, descriptors: Iterable[bytes]) -> Iterator[Any]:
        decoder = self.decoder
        for raw in descriptors:
            records = decode_block(BlockPartition.decode(raw).read())
            if decoder is None:
                yield from records
            else:
                for item in map(decoder, records):
                    if item is not SKIP_RECORD:
                        yield item


def count(iterator: Iterable[Any]) -> int:
    # What pyspark's RDD.count() runs in each task.
    return sum(1 for _ in iterator)


def best(repeat: int, run: Callable[[], Any]) -> float:
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return min(seconds)


def per_million(seconds: float, records: int) -> float:
    return seconds / records * 1e6


def line(step: str, seconds_per_m: float, baseline_per_m: float | None = None) -> str:
    text = f"  {step:<34} {seconds_per_m:8.3f} s/M records"
    if baseline_per_m is not None:
        text += f"   baseline {baseline_per_m:7.3f}   ratio {baseline_per_m / seconds_per_m:5.2f}x"
    return text


def in_process(descriptor: bytes, records: int, repeat: int) -> list[tuple[str, float, float | None]]:
    default, with_handler = KafkaRecordDecoder(), KafkaRecordDecoder(messageHandler=handler)
    partition = BlockPartition.decode(descriptor)
    # What a batch task gets: its blocks (here the one) in one descriptor.
    task_descriptor = BlockPartition.encode_blocks([partition])
    data = partition.read()
    rows = decode_block(data)
    assert len(rows) == records
    figures: list[tuple[str, float, float | None]] = [
        ("read", best(repeat, lambda: BlockPartition.decode(descriptor).read()), None),
        ("decode_block", best(repeat, lambda: decode_block(data)), None),
        ("decoder (default)", best(repeat, lambda: list(map(default, rows))), None),
        ("decoder (messageHandler)", best(repeat, lambda: list(map(with_handler, rows))), None),
    ]
    for name, decoder in (("default", default), ("messageHandler", with_handler), ("none", None)):
        now = best(repeat, lambda d=decoder: count(_ReadBlocks(d)(0, [task_descriptor])))
        before = best(repeat, lambda d=decoder: count(ReferenceReadBlocks(d)(0, [descriptor])))
        figures.append((f"read chain + count ({name})", now, before))
    assert count(_ReadBlocks(default)(0, [task_descriptor])) == records
    return [
        (step, per_million(s, records), None if b is None else per_million(b, records))
        for step, s, b in figures
    ]


def spark_context(master: str) -> Any:
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415 - only with Spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("batch-path-bench")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    return sc


@dataclass(frozen=True)
class Measured:
    """A Spark job's best wall time of the runs, and its mean CPU seconds per run by process."""

    wall_s: float
    cpu: tuple[float, float, float]  # driver Python, driver JVM, Python workers

    def line(self, step: str, records: int, baseline: Measured | None = None) -> str:
        wall, cpu = per_million(self.wall_s, records), per_million(sum(self.cpu), records)
        split = "/".join(f"{per_million(c, records):.2f}" for c in self.cpu)
        text = f"  {step:<26} {wall:6.3f} s/M wall  {cpu:6.3f} CPU s/M (py/jvm/workers {split})"
        if baseline is not None:
            base_wall, base_cpu = (
                per_million(baseline.wall_s, records),
                per_million(sum(baseline.cpu), records),
            )
            text += (
                f"\n  {'':<26} baseline {base_wall:6.3f} wall {base_cpu:6.3f} CPU; "
                f"ratio {base_wall / wall:4.2f}x wall, {base_cpu / cpu:4.2f}x CPU"
            )
        return text


def measure(repeat: int, *jobs: Callable[[], Any]) -> list[Measured]:
    """Each job run once to warm up, then ``repeat`` rounds of all of them in turn (a baseline
    and its contender see the same load)."""
    meter = CpuMeter(driver_jvm_pid())
    walls: list[list[float]] = [[] for _ in jobs]
    cpus: list[list[CpuUsage]] = [[] for _ in jobs]
    for job in jobs:
        job()
    for _ in range(repeat):
        for n, job in enumerate(jobs):
            meter.start()
            job()
            usage = meter.stop()
            walls[n].append(usage.wall_s)
            cpus[n].append(usage)
    return [
        Measured(
            min(wall),
            (
                sum(u.driver_python_s for u in cpu) / repeat,
                sum(u.driver_jvm_s for u in cpu) / repeat,
                sum(u.spark_others_s for u in cpu) / repeat,
            ),
        )
        for wall, cpu in zip(walls, cpus, strict=True)
    ]


def spark_steps(sc: Any, descriptors: list[bytes], records: int, repeat: int) -> list[str]:
    """The Spark figures' lines."""
    partitions = [BlockPartition.decode(d) for d in descriptors]
    located = [(d, p.preferred_locations) for d, p in zip(descriptors, partitions, strict=True)]

    def checked(make: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            if (result := make()) != records:
                raise SystemExit(f"FAILED: counted {result:,}, expected {records:,}")

        return run

    def tasks() -> Any:
        return located_rdd(sc, located).mapPartitions(lambda it: [sum(1 for _ in it)]).sum()

    def read() -> Any:
        return located_rdd(sc, located).map(lambda d: len(BlockPartition.decode(d).read())).sum()

    def batch(decoder: Any, reference: bool) -> Any:
        if reference:
            # The same source RDD, with the baseline's function in place of the read chain.
            return located_rdd(sc, located).mapPartitionsWithIndex(ReferenceReadBlocks(decoder)).count()
        return BlockRDD(sc, [[p] for p in partitions], decoder=decoder).count()

    lines = []
    task_cost, read_cost = measure(repeat, tasks, read)
    per_task = task_cost.wall_s / len(descriptors) * 1000
    lines.append(task_cost.line("tasks (launch + result)", records) + f"; {per_task:.1f} ms wall per task")
    lines.append(read_cost.line("read", records))
    for name, decoder in (
        ("default", KafkaRecordDecoder()),
        ("messageHandler", KafkaRecordDecoder(messageHandler=handler)),
    ):
        now, before = measure(
            repeat, checked(lambda d=decoder: batch(d, False)), checked(lambda d=decoder: batch(d, True))
        )
        lines.append(now.line(f"count ({name})", records, before))
    return lines


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--block-records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per value (at least 24)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--no-spark", action="store_true", help="the in-process steps only")
    args = parser.parse_args(list(argv))
    if args.records < 1 or args.block_records < 1 or args.repeat < 1:
        parser.error("--records, --block-records and --repeat must be 1 or more")
    if args.size < 24:
        parser.error("--size must be at least 24 bytes")
    return args


def write_blocks(directory: Path, records: int, block_records: int, size: int, host: str) -> list[bytes]:
    """The blocks' files, and each one's partition descriptor (read by path, as on an executor)."""
    descriptors = []
    for n, first in enumerate(range(0, records, block_records)):
        path = directory / f"input-0-{n}"
        path.write_bytes(make_block(first, min(block_records, records - first), size))
        location = BlockLocation(host, "driver", str(path))
        descriptors.append(BlockPartition(f"input-0-{n}", location=location).encode())
    return descriptors


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    print(
        f"batch path: {args.records:,} records x {args.size} B in blocks of {args.block_records:,}; "
        f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs",
        flush=True,
    )
    sc = None if args.no_spark else spark_context(args.master)
    try:
        # The host the executor advertises: a partition prefers it, as a receiver's block would.
        host = "localhost" if sc is None else executor_locations(sc)[0][0]
        with tempfile.TemporaryDirectory(prefix="batch-path-bench-") as directory:
            descriptors = write_blocks(Path(directory), args.records, args.block_records, args.size, host)
            one_block = min(args.block_records, args.records)
            print("in-process, one block:")
            for step, figure, baseline in in_process(descriptors[0], one_block, args.repeat):
                print(line(step, figure, baseline), flush=True)
            if sc is not None:
                print(f"Spark ({args.master}), {len(descriptors)} partitions:")
                for text in spark_steps(sc, descriptors, args.records, args.repeat):
                    print(text, flush=True)
    finally:
        if sc is not None:
            sc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

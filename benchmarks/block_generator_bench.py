"""BlockGenerator throughput (records in, blocks pushed to a no-op listener) against appending
the same records to a Python list, in the same run.

    python benchmarks/block_generator_bench.py [--count N] [--size 100] [--batches 10,100,1000] [--repeat 3]

Cases, each over the same --count distinct records of --size bytes:
  baseline       list.append, one record at a time
  add_data       BlockGenerator.add_data, one record at a time (no callback)
  with_callback  BlockGenerator.add_data_with_callback, one record at a time
  multiple/B     BlockGenerator.add_multiple_data_with_callback, batches of B records
A generator case is timed from its first add until stop() returns, i.e. until every record has
been cut into a block and pushed. Default 200 ms blocks, unlimited rate. Each case runs --repeat
times, interleaved, and the median is reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliable_kafka.receiver import BlockGenerator, BlockGeneratorListener
from reliable_kafka.storage import StreamBlockId


class NoOpListener(BlockGeneratorListener):
    def __init__(self) -> None:
        self.pushed = 0

    def on_add_data(self, data: Any, metadata: Any) -> None:
        pass

    def on_generate_block(self, block_id: StreamBlockId) -> None:
        pass

    def on_push_block(self, block_id: StreamBlockId, records: list[Any]) -> None:
        self.pushed += len(records)

    def on_error(self, message: str, error: BaseException) -> None:
        raise SystemExit(f"benchmark failed: {message}: {error}")


def bench_baseline(records: list[bytes]) -> float:
    out: list[bytes] = []
    append = out.append
    started = time.perf_counter()
    for record in records:
        append(record)
    return time.perf_counter() - started


def run_generator(records: list[bytes], feed: Callable[[BlockGenerator, list[bytes]], None]) -> float:
    listener = NoOpListener()
    generator = BlockGenerator(listener, 0)
    generator.start()
    started = time.perf_counter()
    feed(generator, records)
    generator.stop()
    elapsed = time.perf_counter() - started
    if listener.pushed != len(records):
        raise SystemExit(f"lost records: pushed {listener.pushed} of {len(records)}")
    return elapsed


def feed_one_at_a_time(generator: BlockGenerator, records: list[bytes]) -> None:
    add = generator.add_data
    for record in records:
        add(record)


def feed_with_callback(generator: BlockGenerator, records: list[bytes]) -> None:
    add = generator.add_data_with_callback
    for record in records:
        add(record, None)


def feed_batches(batch: int, generator: BlockGenerator, records: list[bytes]) -> None:
    add = generator.add_multiple_data_with_callback
    for start in range(0, len(records), batch):
        add(records[start : start + batch], None)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batches", default="10,100,1000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    records = [os.urandom(args.size) for _ in range(args.count)]
    cases: dict[str, Callable[[], float]] = {
        "baseline": partial(bench_baseline, records),
        "add_data": partial(run_generator, records, feed_one_at_a_time),
        "with_callback": partial(run_generator, records, feed_with_callback),
    }
    for batch in (int(b) for b in args.batches.split(",")):
        cases[f"multiple/{batch}"] = partial(run_generator, records, partial(feed_batches, batch))

    timings: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, case in cases.items():
            timings[name].append(case())

    rates = {name: args.count / statistics.median(times) for name, times in timings.items()}
    python = sys.version.split()[0]
    print(f"{args.count} records of {args.size} bytes, median of {args.repeat} runs, Python {python}")
    print(f"{'case':<16}{'records/s':>14}{'vs baseline':>14}")
    for name, rate in rates.items():
        print(f"{name:<16}{rate:>14,.0f}{rate / rates['baseline']:>13.3f}x")


if __name__ == "__main__":
    main()

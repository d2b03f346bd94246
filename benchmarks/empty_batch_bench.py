"""Per-batch overhead of the streaming engine on empty batches, against the bare Spark action.

    python benchmarks/empty_batch_bench.py [--batches 100] [--batch-ms 50] [--master local[2]]

Cases, in one run on one SparkContext:
  baseline   rdd.count() called directly in a loop on --batches empty RDDs (half before the
             streaming cases, half after)
  noop       queueStream of --batches empty RDDs, foreachRDD doing nothing: the engine alone
  count      the same stream with foreachRDD(rdd.count()): the baseline action run by the engine
Streaming cases run on the wall clock at --batch-ms; each batch's figures come from the listener's
BatchInfo: "generate" is batch time to submission (allocation + DStream graph + job set),
"end-to-end" is batch time to the end of the batch's last job. The first --warmup batches of each
case are left out. The ratio compares the count case's end-to-end median with the baseline's.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from percentiles import percentile
from pyspark import SparkConf, SparkContext

from reliable_kafka.context import StreamingContext
from reliable_kafka.scheduler.listener import BatchInfo, StreamingListener, StreamingListenerBatchCompleted


class BatchRecorder(StreamingListener):
    def __init__(self, expected: int) -> None:
        self.infos: list[BatchInfo] = []
        self.expected = expected
        self.done = threading.Event()

    def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
        self.infos.append(batchCompleted.batchInfo)
        if len(self.infos) >= self.expected:
            self.done.set()


def bench_baseline(sc: SparkContext, batches: int) -> list[float]:
    rdds = [sc.emptyRDD() for _ in range(batches)]
    timings = []
    for rdd in rdds:
        started = time.perf_counter()
        rdd.count()
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def bench_stream(
    sc: SparkContext, batches: int, warmup: int, batch_ms: int, output: Callable[[Any], Any]
) -> dict[str, list[float]]:
    ssc = StreamingContext(sc, batch_ms / 1000)
    recorder = BatchRecorder(batches + warmup)
    ssc.addStreamingListener(recorder)
    ssc.queueStream([sc.emptyRDD() for _ in range(batches + warmup)]).foreachRDD(output)
    ssc.start()
    try:
        if not recorder.done.wait(timeout=(batches + warmup) * batch_ms / 1000 * 20 + 60):
            raise RuntimeError(f"only {len(recorder.infos)} batches completed")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    infos = recorder.infos[warmup : warmup + batches]
    return {
        "generate": [info.submissionTime - info.batchTime for info in infos],
        "scheduling delay": [info.schedulingDelay for info in infos],
        "processing delay": [info.processingDelay for info in infos],
        "end-to-end": [info.processingEndTime - info.batchTime for info in infos],
    }


def row(name: str, values: list[float]) -> str:
    return f"  {name:<34} {statistics.median(values):8.2f} {percentile(values, 95):8.2f} {max(values):8.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--batch-ms", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster(args.master)
        .setAppName("empty-batch-bench")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    try:
        bench_baseline(sc, 200)  # JIT, py4j and scheduler warm-up
        # The baseline runs before and after the streams, so neither side gets the warmer JVM.
        baseline = bench_baseline(sc, args.batches // 2)
        noop = bench_stream(sc, args.batches, args.warmup, args.batch_ms, lambda rdd: None)
        count = bench_stream(sc, args.batches, args.warmup, args.batch_ms, lambda rdd: rdd.count())
        baseline += bench_baseline(sc, args.batches - args.batches // 2)
    finally:
        sc.stop()

    print(f"empty batches: {args.batches} per case, batch duration {args.batch_ms} ms, master {args.master}")
    print(f"  {'ms':<34} {'median':>8} {'p95':>8} {'max':>8}")
    print(row("baseline rdd.count() in a loop", baseline))
    for name, figures in (("noop", noop), ("count", count)):
        for figure, values in figures.items():
            print(row(f"{name}: {figure}", values))
    base = statistics.median(baseline)
    end_to_end = statistics.median(count["end-to-end"])
    print(
        f"ratio count end-to-end / baseline: {end_to_end / base:.1f}x "
        f"(engine overhead per batch {end_to_end - base:.2f} ms; noop batch end-to-end "
        f"{statistics.median(noop['end-to-end']):.2f} ms)"
    )


if __name__ == "__main__":
    main()

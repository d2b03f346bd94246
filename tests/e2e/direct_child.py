"""A pyspark 2.4-style direct-stream application in a process of its own (its own Spark cluster).

    python -m tests.e2e.direct_child --run N --brokers B --topic T --checkpoint DIR --output FILE
        [--master local-cluster[2,2,1024]] [--max-rate N] [--hold-at P:O --hold-marker FILE]

``KafkaUtils.createDirectStream`` with ``StreamingContext.getOrCreate``; each batch's output
operation appends JSON lines to ``--output`` (one fsync'ed write each):

    {"kind": "begin", "run": N, "batch": T, "ranges": [[topic, partition, from, until], ...]}
    {"kind": "batch", "run": N, "batch": T, "ranges": [...], "records": [[partition, offset, value], ...]}

and ``{"kind": "job_error", "batch": T, "error": ...}`` for a failed output operation.

``--hold-at P:O``: the executor task that reads offset O of partition P, the first time only,
writes its Python worker's pid to ``--hold-marker`` and then waits there (for the test to kill
its executor mid-range). Prints ``started`` once running; SIGTERM stops gracefully.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from datetime import datetime
from typing import Any

from pyspark import SparkConf, SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.dstream.functions import time_ms_of
from reliable_kafka.scheduler.listener import StreamingListener
from tests.e2e.cluster_child import Sink

HOLD_LIMIT_S = 300.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("--brokers", "--topic", "--checkpoint", "--output"):
        parser.add_argument(name, required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--master", default="local-cluster[2,2,1024]")
    parser.add_argument("--max-rate", type=int, default=0, help="maxRatePerPartition; 0: unlimited")
    parser.add_argument("--hold-at", default=None, help="PARTITION:OFFSET")
    parser.add_argument("--hold-marker", default=None)
    return parser.parse_args(argv)


def holding_handler(hold_at: tuple[int, int] | None, marker: str | None) -> Any:
    """The messageHandler: (partition, offset, value), held once at ``hold_at`` (executor side)."""

    def handle(m: Any) -> tuple[int, int, str]:
        if hold_at is not None and marker is not None and (m.partition, m.offset) == hold_at:
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass  # held before: a retry of the task reads on
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                # Waits for the test's SIGKILL of this executor; the limit only keeps a failed
                # test from leaving a task behind forever.
                threading.Event().wait(HOLD_LIMIT_S)
        return m.partition, m.offset, m.message

    return handle


class JobErrors(StreamingListener):
    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def onOutputOperationCompleted(self, outputOperationCompleted: Any) -> None:
        info = outputOperationCompleted.output_operation_info
        if info.failure_reason:
            self._sink.write(
                {"kind": "job_error", "batch": info.batch_time_ms, "error": info.failure_reason[:4000]}
            )


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster(args.master)
        .setAppName(f"direct-child-{args.run}")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.driver.memory", "1g")
        .set("spark.streaming.kafka.maxRatePerPartition", str(args.max_rate))
        .set("spark.streaming.gracefulStopTimeout", "120s")
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    sink = Sink(args.output)
    hold_at = tuple(int(part) for part in args.hold_at.split(":")) if args.hold_at else None
    handler = holding_handler(hold_at, args.hold_marker)  # type: ignore[arg-type]

    def setup() -> StreamingContext:
        ssc = StreamingContext(sc, 1)
        stream = KafkaUtils.createDirectStream(
            ssc,
            [args.topic],
            {"metadata.broker.list": args.brokers, "auto.offset.reset": "smallest"},
            messageHandler=handler,
        )

        def write_batch(batch_time: datetime, rdd: Any) -> None:
            batch_ms = time_ms_of(batch_time)
            ranges = [[r.topic, r.partition, r.fromOffset, r.untilOffset] for r in rdd.offsetRanges()]
            base = {"run": args.run, "batch": batch_ms, "ranges": ranges}
            sink.write({"kind": "begin", **base})
            records = rdd.collect()
            sink.write({"kind": "batch", **base, "records": [list(record) for record in records]})

        stream.foreachRDD(write_batch)
        return ssc

    ssc = StreamingContext.getOrCreate(args.checkpoint, setup)
    ssc.addStreamingListener(JobErrors(sink))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ssc.start()
    print("started", flush=True)
    stop.wait()
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    sink.write({"kind": "stopped", "time": time.time()})
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

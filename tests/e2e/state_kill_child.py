"""The running word count of the state kill test, run in a process of its own (its own SparkContext).

    python -m tests.e2e.state_kill_child --zk ZK --group G --topic T --checkpoint DIR --output FILE --run N

Kafka receiver with the WAL on, built through ``StreamingContext.getOrCreate``; each message
``m-<n>`` is the word ``w<n % 7>``, counted with ``updateStateByKey`` (state checkpointed every
``--state-checkpoint-s``). For every batch it appends to ``--output``, one fsync'ed line per output
operation:

    {"kind": "in", "run": N, "batch": T, "recs": [[partition, offset, word], ...]}
    {"kind": "totals", "run": N, "batch": T, "totals": {word: count, ...}}

Prints ``started`` once running; SIGTERM stops it gracefully (exit 0); SIGKILL is the test's crash.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from datetime import datetime
from typing import Any

from pyspark import SparkConf, SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.dstream.functions import time_ms_of
from tests.e2e.kill_child import Sink, delay_block_reports

WORDS = 7


def word_of(value: str) -> str:
    return f"w{int(value.removeprefix('m-')) % WORDS}"


def add_counts(new: list[int], total: int | None) -> int:
    return (total or 0) + sum(new)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("--zk", "--group", "--topic", "--checkpoint", "--output"):
        parser.add_argument(name, required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--kafka-params", default="{}")
    parser.add_argument("--placement", choices=("executors", "driver"), default="executors")
    parser.add_argument("--batch-s", type=int, default=1)
    parser.add_argument("--state-checkpoint-s", type=int, default=4)
    # As kill_child's: widens the window in which a kill leaves a stored, uncommitted block.
    parser.add_argument("--report-delay-ms", type=int, default=150)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    delay_block_reports(args.report_delay_ms)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    for name in ("reliable_kafka.context", "reliable_kafka.dstream.dstream_graph"):
        logging.getLogger(name).setLevel(logging.INFO)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster("local[4]")
        .setAppName(f"state-kill-child-{args.run}")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
        # The state's partitions: on the test's two cores more only add tasks to every batch.
        .set("spark.default.parallelism", "2")
        .set("spark.streaming.receiver.writeAheadLog.enable", "true")
        .set("spark.streaming.blockInterval", "200ms")
        .set("spark.streaming.gracefulStopTimeout", "120s")
        .set("spark.streaming.receiver.placement", args.placement)
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    sink = Sink(args.output, args.run)

    def setup() -> StreamingContext:
        ssc = StreamingContext(sc, args.batch_s)
        stream = KafkaUtils.createStream(
            ssc,
            args.zk or None,
            args.group,
            {args.topic: 1},
            json.loads(args.kafka_params),
            messageHandler=lambda m: (m.partition, m.offset, word_of(m.message)),
        )

        def write_input(batch_time: datetime, rdd: Any) -> None:
            recs = [list(record) for record in rdd.collect()]
            sink.write({"kind": "in", "batch": time_ms_of(batch_time), "recs": recs})

        def write_totals(batch_time: datetime, rdd: Any) -> None:
            sink.write({"kind": "totals", "batch": time_ms_of(batch_time), "totals": dict(rdd.collect())})

        stream.foreachRDD(write_input)
        counts = stream.map(lambda record: (record[2], 1)).updateStateByKey(add_counts)
        counts.checkpoint(args.state_checkpoint_s)
        counts.foreachRDD(write_totals)
        return ssc

    ssc = StreamingContext.getOrCreate(args.checkpoint, setup)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ssc.start()
    print("started", flush=True)
    while not stop.is_set():
        ssc.awaitTerminationOrTimeout(0.2)  # raises a failed job's error
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

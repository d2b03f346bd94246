"""A Kafka streaming application that a test stops after a fault, in a process of its own.

    python -m tests.e2e.stop_child --fault zookeeper|broker|spark|none
        --end stop|graceful|raise|sigterm|sigterm-now --output FILE --checkpoint DIR
        [--placement driver|executors] [--sink-delay-ms N] [--kafka 3.9] [--spark-log-level WARN]

Starts its own ``LocalCluster`` (ZooKeeper mode) and, inside ``with LocalCluster()``, a
``KafkaUtils.createStream`` context with checkpointing and the receiver WAL on. Once a batch has
output records it injects ``--fault`` (SIGKILL ZooKeeper or the broker; ``sc.stop()`` under the
running context), then ends as ``--end`` says: ``ssc.stop()`` (not graceful or graceful), an
exception raised out of the ``with`` block (the context is left to the exit-time hook), or a wait
for SIGTERM (``sigterm``: ``stopGracefullyOnShutdown`` on; ``sigterm-now``: off, Spark's default;
either also waits for a kill). ``--spark-log-level WARN`` keeps what Spark and Hadoop log about
a stop. Appends JSON lines to ``--output``, fsync'ed:
``{"begin": n}`` and ``{"end": n}`` around each batch of n > 0 records, and
``{"event": "faulted" | "stopping" | "stopped"}``; prints ``started``, then ``stopping`` just
before it stops (``waiting`` before it waits for SIGTERM). The test times the rest. SIGUSR1
dumps every thread's stack to stderr (a test that times it out sends one first).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from pyspark import SparkConf, SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.local import LocalCluster
from tests.support.producing import ANY_PARTITION, produce_acked

TOPIC = "stop-topic"
GROUP = "stop-group"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", choices=("zookeeper", "broker", "spark", "none"), required=True)
    parser.add_argument(
        "--end", choices=("stop", "graceful", "raise", "sigterm", "sigterm-now"), required=True
    )
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--placement", choices=("executors", "driver"), default="driver")
    parser.add_argument("--stop-timeout", default="10s")
    parser.add_argument("--kafka", default="3.9")
    # WARN shows what Spark and Hadoop log about a stop (a shutdown hook that failed, a task killed).
    parser.add_argument("--spark-log-level", choices=("ERROR", "WARN"), default="ERROR")
    # A slow sink, so that a stop (and a SIGTERM during it) lands inside a batch.
    parser.add_argument("--sink-delay-ms", type=int, default=0)
    return parser.parse_args(argv)


def append(path: str, entry: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps({**entry, "at": time.time()}) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def produce(cluster: LocalCluster, count: int) -> None:
    messages = ((None, f"value-{n}".encode(), ANY_PARTITION) for n in range(count))
    produce_acked(cluster.client_config(**{"linger.ms": 5}), TOPIC, messages)


class AppFailed(RuntimeError):
    """What the application raises inside ``with LocalCluster()`` for ``--end raise``."""


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # A test that times this process out dumps its threads first: where a stop hangs.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    # What the test waits for (the stop began) and what a failed run's log must explain.
    for name in ("reliable_kafka.context", "reliable_kafka.scheduler.job_generator", "reliable_kafka.util"):
        logging.getLogger(name).setLevel(logging.INFO)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with LocalCluster(kafka=args.kafka) as cluster:
        cluster.create_topic(TOPIC, partitions=2)
        produce(cluster, 200)
        conf = (
            SparkConf()
            .setMaster("local[4]")
            .setAppName(f"stop-child-{args.fault}-{args.end}")
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.streaming.receiver.writeAheadLog.enable", "true")
            .set("spark.streaming.blockInterval", "200ms")
            .set("spark.streaming.receiver.placement", args.placement)
            .set("spark.streaming.stopTimeout", args.stop_timeout)
            .set("spark.streaming.stopGracefullyOnShutdown", str(args.end == "sigterm").lower())
        )
        sc = SparkContext(conf=conf)
        sc.setLogLevel(args.spark_log_level)
        ssc = StreamingContext(sc, 1)
        ssc.checkpoint(args.checkpoint)
        stream = KafkaUtils.createStream(
            ssc,
            cluster.zookeeper_connect,
            GROUP,
            {TOPIC: 1},
            {"auto.offset.reset": "smallest", **cluster.client_config()},
        )
        first_batch = threading.Event()

        def write_batch(rdd: Any) -> None:
            count = rdd.count()
            if count:
                append(args.output, {"begin": count})
                first_batch.set()
                time.sleep(args.sink_delay_ms / 1000)
                append(args.output, {"end": count})

        stream.foreachRDD(write_batch)
        ssc.start()
        print("started", flush=True)
        if not first_batch.wait(180):
            raise AssertionError("no batch with records within 180 s")
        if args.fault == "zookeeper":
            cluster.kill_zookeeper()
        elif args.fault == "broker":
            cluster.kill_broker()
        elif args.fault == "spark":
            sc.stop()
        append(args.output, {"event": "faulted"})
        # Long enough for the consumers and watches to notice and start retrying.
        time.sleep(3)
        if args.end in ("sigterm", "sigterm-now"):
            print("waiting", flush=True)
            ssc.awaitTermination()
            append(args.output, {"event": "stopped"})
            return 0
        print("stopping", flush=True)
        append(args.output, {"event": "stopping"})
        if args.end == "raise":
            raise AppFailed("the application failed with its context running")
        ssc.stop(stopSparkContext=True, stopGraceFully=args.end == "graceful")
        append(args.output, {"event": "stopped"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

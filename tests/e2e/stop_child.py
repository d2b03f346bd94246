"""A Kafka streaming application that a test stops after a fault, in a process of its own.

    python -m tests.e2e.stop_child --fault zookeeper|broker|spark|none
        --end stop|graceful|raise|sigterm|sigterm-now --output FILE --checkpoint DIR
        [--placement driver|executors] [--sink-delay-ms N] [--kafka 3.9] [--spark-log-level WARN]
        [--zookeeper-connect HOST:PORT --bootstrap-servers HOST:PORT --topic T --group G]

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
before it stops (``waiting`` before it waits for SIGTERM), with ``--sink-delay-ms`` once a
batch is queued behind the slow first one. The test times the rest. SIGUSR1
dumps every thread's stack to stderr (a test that times it out sends one first).

With ``--zookeeper-connect`` and ``--bootstrap-servers`` (faults ``spark`` and ``none`` only: the
others kill a server) it uses that running cluster instead, with a topic and group of its own:
a start of ZooKeeper and a broker less for the cases whose subject is Spark's stop, not theirs.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from pyspark import SparkConf, SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.examples.wordcount import ensure_topic
from reliable_kafka.local import LocalCluster
from reliable_kafka.scheduler.listener import StreamingListener
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
    parser.add_argument("--zookeeper-connect", help="a running cluster's ZooKeeper: start none")
    parser.add_argument("--bootstrap-servers", help="that running cluster's brokers")
    parser.add_argument("--topic", default=TOPIC)
    parser.add_argument("--group", default=GROUP)
    args = parser.parse_args(argv)
    if (args.zookeeper_connect is None) != (args.bootstrap_servers is None):
        parser.error("--zookeeper-connect and --bootstrap-servers go together")
    if args.zookeeper_connect and args.fault in ("zookeeper", "broker"):
        parser.error(f"--fault {args.fault} kills a server: it needs a cluster of its own")
    return args


def append(path: str, entry: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps({**entry, "at": time.time()}) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class RunningCluster:
    """A cluster the test already runs: what the application needs of it, and no faults."""

    zookeeper_connect: str
    bootstrap_servers: str

    def client_config(self, **overrides: str | int | bool) -> dict[str, str | int | bool]:
        return {"bootstrap.servers": self.bootstrap_servers, **overrides}

    def create_topic(self, name: str, partitions: int) -> None:
        ensure_topic(self.client_config(), name, partitions)


def cluster_of(args: argparse.Namespace) -> contextlib.AbstractContextManager[LocalCluster | RunningCluster]:
    if args.zookeeper_connect:
        return contextlib.nullcontext(RunningCluster(args.zookeeper_connect, args.bootstrap_servers))
    return LocalCluster(kafka=args.kafka)


def produce(cluster: LocalCluster | RunningCluster, topic: str, count: int) -> None:
    messages = ((None, f"value-{n}".encode(), ANY_PARTITION) for n in range(count))
    produce_acked(cluster.client_config(**{"linger.ms": 5}), topic, messages)


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
    with cluster_of(args) as cluster:
        cluster.create_topic(args.topic, partitions=2)
        produce(cluster, args.topic, 200)
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
            args.group,
            {args.topic: 1},
            {"auto.offset.reset": "smallest", **cluster.client_config()},
        )
        first_batch = threading.Event()
        queued_behind = threading.Event()

        class QueuedBehind(StreamingListener):
            """A batch submitted while the first slow one runs waits behind it: what a stop
            during the slow batch must announce as queued."""

            def onBatchSubmitted(self, batchSubmitted: Any) -> None:
                if first_batch.is_set():
                    queued_behind.set()

        ssc.addStreamingListener(QueuedBehind())

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
        if args.sink_delay_ms and not queued_behind.wait(60):
            raise AssertionError("no batch submitted behind the slow one within 60 s")
        if args.fault != "none":
            if args.fault == "zookeeper":
                cluster.kill_zookeeper()  # type: ignore[union-attr]  # parse_args: a LocalCluster
            elif args.fault == "broker":
                cluster.kill_broker()  # type: ignore[union-attr]
            else:
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

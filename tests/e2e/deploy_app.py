"""The README's application as a file for ``spark-submit``: the "Running on a cluster" recipe.

    spark-submit --archives env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python \\
        ... deploy_app.py [--bootstrap-servers HOST:PORT] ZK GROUP TOPIC CHECKPOINT OUTPUT

tests/e2e/test_packed_venv_deploy.py submits it to a standalone master whose executors have
nothing installed but the packed virtualenv. It imports nothing from the tests: what a user's
``app.py`` would be. Everything but its inputs comes from spark-submit's ``--conf`` (the write-ahead
log, ports, the status page, stopGracefullyOnShutdown). Each batch appends one JSON line per
record to OUTPUT, with what the task that tagged it saw: the interpreter (``sys.executable``,
``sys.prefix``), where ``reliable_kafka`` was imported from, and the executor's host; and the
batch's time (``batch_ms``): a batch run again after a restart keeps its time.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from pyspark import SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.dstream.functions import time_ms_of


def with_interpreter(records: Iterable[tuple[Any, str]]) -> Iterator[dict[str, Any]]:
    """Runs in a batch task on an executor: tags each record with what that task runs on."""
    import socket

    import reliable_kafka

    seen = {
        "executable": sys.executable,
        "prefix": sys.prefix,
        "package": reliable_kafka.__file__,
        "host": os.environ.get("SPARK_LOCAL_IP") or socket.gethostname(),
    }
    for _key, value in records:
        yield {"value": value, **seen}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="deploy_app.py")
    parser.add_argument("--bootstrap-servers", help="with ZK '-': the group in Kafka's group coordinator")
    for name in ("zk_quorum", "group", "topic", "checkpoint", "output"):
        parser.add_argument(name)
    return parser.parse_args(argv)


def kafka_params(args: argparse.Namespace) -> tuple[str | None, dict[str, str]]:
    """The ZooKeeper quorum (None: none) and the stream's Kafka params."""
    params = {"auto.offset.reset": "smallest"}
    if args.zk_quorum != "-":
        return args.zk_quorum, params
    if not args.bootstrap_servers:
        raise SystemExit("deploy_app.py: ZK '-' needs --bootstrap-servers")
    # A receiver whose executor dies without a word (its driver or its node lost) keeps its
    # partitions in the group until its session times out: 6 s (the brokers' minimum), not 45.
    return None, {
        **params,
        "bootstrap.servers": args.bootstrap_servers,
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "500",
    }


def main(argv: list[str]) -> None:
    args = parse(argv)
    zk_quorum, params = kafka_params(args)
    group, topic, checkpoint, output = args.group, args.topic, args.checkpoint, args.output
    # The stream's start and stop lines on stderr (the driver's log): what an operator reads.
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("reliable_kafka").setLevel(logging.INFO)
    sc = SparkContext()  # master, archives and settings: spark-submit's

    def append(rows: list[dict[str, Any]]) -> None:
        if rows:
            with open(output, "a", encoding="utf-8") as sink:
                sink.write("".join(json.dumps(row) + "\n" for row in rows))

    def create_context() -> StreamingContext:
        ssc = StreamingContext(sc, 2)
        ssc.checkpoint(checkpoint)
        lines = KafkaUtils.createStream(ssc, zk_quorum, group, {topic: 1}, params)

        def write(batch_time: datetime, rdd: Any) -> None:
            batch_ms = time_ms_of(batch_time)
            append([{**row, "batch_ms": batch_ms} for row in rdd.collect()])

        lines.mapPartitions(with_interpreter).foreachRDD(write)
        return ssc

    ssc = StreamingContext.getOrCreate(checkpoint, create_context)
    ssc.start()
    print(f"started {os.getpid()}", flush=True)
    ssc.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1:])

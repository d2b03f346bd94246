"""The driver of the source's kill test, in a process of its own (its own SparkContext).

    python -m tests.e2e.sql_query_child --run N --brokers B --zookeeper ZK --group G --topic T \
        --checkpoint DIR --sink DIR [--available-now] [--max-offsets-per-trigger N]

A ``reliable-kafka`` query on ``--topic`` (the group's offsets in ZooKeeper), at most
``--max-offsets-per-trigger`` (200) offsets a batch, one batch every 200 ms, checkpointed in
``--checkpoint``. Its sink writes each batch to ``--sink``/``batch-<id>.json`` (``[[partition,
offset, value], ...]``) through a temporary file and a rename: a batch run again after a kill
writes the same file again, so the sink holds each batch once whatever the kills. Prints
``started`` after its first batch; with ``--available-now`` it reads up to the log ends seen at
its start and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import reliable_kafka.sql


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    for name in ("--run", "--brokers", "--zookeeper", "--group", "--topic", "--checkpoint", "--sink"):
        parser.add_argument(name, required=True)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-offsets-per-trigger", default="200")
    args = parser.parse_args(argv)
    sink = Path(args.sink)
    sink.mkdir(parents=True, exist_ok=True)

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(f"query-child-{args.run}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    reliable_kafka.sql.register(spark)
    started = False

    def write_batch(frame: Any, batch_id: int) -> None:
        nonlocal started
        rows = [[r.partition, r.offset, bytes(r.value).decode()] for r in frame.collect()]
        temporary = sink / f".batch-{batch_id}.json.tmp"
        temporary.write_text(json.dumps(rows))
        os.replace(temporary, sink / f"batch-{batch_id}.json")
        if not started:
            started = True
            print("started", flush=True)

    frame = (
        spark.readStream.format("reliable-kafka")
        .option("kafka.bootstrap.servers", args.brokers)
        .option("zookeeper.connect", args.zookeeper)
        .option("group.id", args.group)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
        .load()
    )
    writer = frame.writeStream.foreachBatch(write_batch).option("checkpointLocation", args.checkpoint)
    writer = (
        writer.trigger(availableNow=True)
        if args.available_now
        else writer.trigger(processingTime="200 milliseconds")
    )
    query = writer.start()
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

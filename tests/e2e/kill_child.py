"""The user application of the kill test, run in a process of its own (its own SparkContext).

    python -m tests.e2e.kill_child --zk ZK --group G --topic T --checkpoint DIR --output FILE --run N

``--checkpoint`` is a path or a URL (``hdfs://``, ``s3a://``; reached with the ``spark.hadoop.*``
keys of ``--spark-conf-file``).

``--zk ""``: no ZooKeeper; the kafka params' ``bootstrap.servers`` reach the group coordinator.

A Kafka word-less "sink" job with the receiver WAL and checkpointing on, built through
``StreamingContext.getOrCreate``. For every batch ``foreachRDD`` appends to ``--output``, fsync'ed:

    {"kind": "begin", "run": N, "batch": T, "blocks": [{"id": ID, "ranges": [[p, from, until], ...]}, ...]}
    {"kind": "rec", "run": N, "batch": T, "p": partition, "o": offset, "v": value}   (one per record)
    ... then, after ``--sink-delay-ms`` (a slow sink, so that kills land inside batches):
    {"kind": "end", "run": N, "batch": T}

With ``--hold-file`` naming a file that exists, the first batch with records and a block this
run's own receiver stored writes ``{"kind": "held", "run": N, "batch": T}`` after its records and
then waits for ever, instead of its "end": the test's kill then lands inside that batch for sure
(a kill timed on seeing a batch unfinished could land after its end).

``--report-delay-ms`` holds each block between being reported to the driver (stored in both
places, in the metadata log) and having its offsets committed, widening the window in which a
kill leaves a stored but uncommitted block behind: the block the next run reads again.

At start it writes ``{"kind": "recovered", "run": N, "pending": [...], "blocks": [...]}``: the
batches to run again (allocated but not completed in the driver's metadata log, or pending in the
checkpoint), and every block it recovered (those of the pending batches and those not yet
allocated), in the "begin" format: the blocks earlier runs stored, which this run did not read
itself. Prints ``started`` once running; SIGTERM stops it gracefully (exit 0); SIGKILL is what the
test sends otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
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
from reliable_kafka.kafka.client.offset_range import offset_ranges_of_blocks
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.scheduler.receiver_tracker import ReceiverTracker


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("--zk", "--group", "--topic", "--checkpoint", "--output"):
        parser.add_argument(name, required=True)
    parser.add_argument("--run", type=int, required=True)
    # JSON, or @FILE holding it: a secret on a command line is there for every user's ps to see.
    parser.add_argument("--kafka-params", default="{}")
    parser.add_argument("--sink-delay-ms", type=int, default=250)
    parser.add_argument("--report-delay-ms", type=int, default=150)
    parser.add_argument("--placement", choices=("executors", "driver"), default="executors")
    # A JSON object of extra SparkConf entries (e.g. spark.hadoop.* keys for a remote checkpoint).
    parser.add_argument("--spark-conf-file")
    parser.add_argument("--batch-s", type=int, default=1)
    parser.add_argument("--hold-file")
    # Everything the driver's Python logs, at DEBUG (kazoo's requests, librdkafka's lines...): for
    # the canary check, which greps the log for secrets.
    parser.add_argument("--debug-log", action="store_true")
    return parser.parse_args(argv)


def kafka_params_of(value: str) -> dict[str, Any]:
    if value.startswith("@"):
        with open(value[1:]) as handle:
            return dict(json.load(handle))
    return dict(json.loads(value))


class Sink:
    """Appends JSON lines with one write + fsync per group, as a careful file sink would."""

    def __init__(self, path: str, run: int) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.run = run

    def write(self, *entries: dict[str, Any]) -> None:
        data = "".join(json.dumps({**entry, "run": self.run}) + "\n" for entry in entries).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)


def delay_block_reports(delay_ms: int) -> None:
    """Sleep after every AddBlock the tracker accepts, before the receiver may commit its offsets."""
    add_block = ReceiverTracker.add_block

    def slow_add_block(self: ReceiverTracker, info: ReceivedBlockInfo) -> bool:
        added = add_block(self, info)
        time.sleep(delay_ms / 1000)
        return added

    ReceiverTracker.add_block = slow_add_block  # type: ignore[method-assign]


def block_entry(info: ReceivedBlockInfo) -> dict[str, Any]:
    ranges = [[r.partition, r.fromOffset, r.untilOffset] for r in offset_ranges_of_blocks([info])]
    return {"id": info.block_id.name, "ranges": ranges}


def recovered_batches_and_blocks(
    ssc: StreamingContext, stream_id: int
) -> tuple[list[int], list[dict[str, Any]]]:
    """The batches the metadata log holds as allocated but not completed, and the blocks it holds
    for the next batches, read before the context starts: once it runs, a regenerated batch may
    complete (and the first batch take the unallocated blocks) before a loaded machine lets this
    process look."""
    assert ssc.checkpoint_dir is not None
    tracker = ReceivedBlockTracker.create(
        [stream_id], ssc.checkpoint_dir, ssc.settings.wal, recover_from_write_ahead_log=True
    )
    try:
        pending = tracker.pending_batch_times()
        infos = [
            info
            for batch_time in pending
            for info in tracker.get_blocks_of_batch_and_stream(batch_time, stream_id)
        ]
        infos += tracker.get_unallocated_blocks(stream_id)
    finally:
        tracker.stop()
    return list(pending), [block_entry(info) for info in infos]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    delay_block_reports(args.report_delay_ms)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    # Group membership, commits and receiver restarts: what a failed run's log must explain.
    for name in ("reliable_kafka.kafka", "reliable_kafka.receiver.receiver_supervisor"):
        logging.getLogger(name).setLevel(logging.DEBUG if args.debug_log else logging.INFO)
    if args.debug_log:
        logging.getLogger().setLevel(logging.DEBUG)
        logging.getLogger("py4j").setLevel(logging.INFO)  # every gateway call: volume, no secrets
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster("local[4]")
        .setAppName(f"kill-child-{args.run}")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.streaming.receiver.writeAheadLog.enable", "true")
        .set("spark.streaming.blockInterval", "200ms")
        .set("spark.streaming.gracefulStopTimeout", "120s")
        .set("spark.streaming.receiver.placement", args.placement)
    )
    if args.spark_conf_file:
        with open(args.spark_conf_file) as handle:
            conf.setAll(json.load(handle).items())
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    sink = Sink(args.output, args.run)
    holder: dict[str, Any] = {}

    def holds(blocks: list[dict[str, Any]]) -> bool:
        """Whether to hold this batch: asked to, and it has a block this run's receiver stored."""
        if not args.hold_file or not os.path.exists(args.hold_file):
            return False
        return any(block["id"] not in holder["recovered_ids"] for block in blocks)

    def setup() -> StreamingContext:
        ssc = StreamingContext(sc, args.batch_s)
        stream = KafkaUtils.createStream(
            ssc,
            args.zk or None,
            args.group,
            {args.topic: 1},
            kafka_params_of(args.kafka_params),
            messageHandler=lambda m: (m.partition, m.offset, m.message),
        )

        def write_batch(batch_time: datetime, rdd: Any) -> None:
            batch_ms = time_ms_of(batch_time)
            records = rdd.collect()
            tracker = holder["ssc"].scheduler.receiver_tracker
            blocks = [
                block_entry(info) for info in tracker.get_blocks_of_batch_and_stream(batch_ms, stream.id)
            ]
            sink.write(
                {"kind": "begin", "batch": batch_ms, "blocks": blocks},
                *({"kind": "rec", "batch": batch_ms, "p": p, "o": o, "v": v} for p, o, v in records),
            )
            if records and holds(blocks):
                sink.write({"kind": "held", "batch": batch_ms})
                threading.Event().wait()  # until the test's SIGKILL
            time.sleep(args.sink_delay_ms / 1000)
            sink.write({"kind": "end", "batch": batch_ms})

        stream.foreachRDD(write_batch)
        holder["stream_id"] = stream.id
        return ssc

    ssc = StreamingContext.getOrCreate(args.checkpoint, setup)
    holder["ssc"] = ssc
    pending, recovered = recovered_batches_and_blocks(ssc, holder["stream_id"])
    holder["recovered_ids"] = {block["id"] for block in recovered}
    # Batches pending in the checkpoint run again too (the metadata log may already hold them as
    # completed: the kill came after the completion was logged, before the next checkpoint).
    if ssc.initial_checkpoint is not None:
        pending = sorted({*pending, *ssc.initial_checkpoint.pending_times_ms})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ssc.start()
    sink.write({"kind": "recovered", "pending": pending, "blocks": recovered})
    print("started", flush=True)
    while not stop.is_set():
        ssc.awaitTerminationOrTimeout(0.2)  # raises a failed job's error
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

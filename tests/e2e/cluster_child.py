"""A user application with receivers on executors, in a process of its own (its own Spark cluster).

    python -m tests.e2e.cluster_child --zk ZK --group G --topics T1,T2 --checkpoint DIR --output FILE
        [--wal on|off] [--storage-level NAME] [--master local-cluster[2,2,1024]]

One ``createStream`` per topic, unioned (Spark's way to scale Kafka input), on a real Spark cluster:
``local-cluster[2,2,1024]`` is two executor JVMs with two task slots each and their own Python
workers. Each batch appends JSON lines to ``--output`` (fsync'ed):

    {"kind": "batch", "batch": T, "driver_bytes": N, "partitions": P, "locations": [...]}
    {"kind": "rec", "batch": T, "t": topic, "p": partition, "o": offset}       (one per record)

``--zk ""``: no ZooKeeper; the kafka params' ``bootstrap.servers`` reach the group coordinator.

``driver_bytes`` counts the batch's blocks whose bytes come from the driver (0 in executor
placement); ``partitions`` counts its blocks. Listener events are appended as they come:

    {"kind": "receiver_started" | "receiver_stopped" | "receiver_error", "stream": S,
     "executor_id": E, "host": H, "time": wall seconds, "message": ...}
    {"kind": "streaming_error", "time": wall seconds, "message": ...}

and, as each batch's output operation begins, the blocks it reads (each block's executor, the
path of its write-ahead log record, the executor of its second copy, its offset ranges):

    {"kind": "begin", "batch": T, "time": wall seconds,
     "blocks": [{"id", "executor", "wal", "replica", "ranges"}]}

With ``--hold-until FILE``, the first batch with a block of the first stream writes
``{"kind": "held", "batch": T}`` after its "begin" and reads its blocks only once FILE exists.

With ``--sink-ms-per-record N`` each batch's tasks take N ms per record before the driver collects
them (a slow sink that more executors make faster). With ``--allocation-events`` the listener
also appends every completed batch and every decision of streaming dynamic allocation:

    {"kind": "batch_done", "batch": T, "time": wall seconds, "processing_ms": P, "records": N}
    {"kind": "scaling", "time_ms": T, "action": "up" | "down" | "hold", "ratio": R, "basis": B,
     "executors": N, "target": N, "executor_id": E, "reason": ...}

and, once a second, the live executors: ``{"kind": "executors", "time": wall seconds, "count": N}``.

plus ``{"kind": "tracker", "host": H, "port": P}`` at start and ``{"kind": "job_error", ...}`` for
a failed batch. Prints ``started`` once running; SIGTERM stops gracefully, then prints ``stopped``.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from reliable_kafka.dstream.batch_rdd import BlockRDD
from reliable_kafka.dstream.block_partition import BlockPartition
from reliable_kafka.dstream.functions import time_ms_of
from reliable_kafka.kafka.client.offset_range import offset_ranges_of_blocks
from reliable_kafka.scheduler.executor_allocation_client import SparkExecutorAllocationClient
from reliable_kafka.scheduler.listener import (
    StreamingListener,
    StreamingListenerReceiverError,
    StreamingListenerReceiverStarted,
    StreamingListenerReceiverStopped,
    StreamingListenerStreamingError,
)
from reliable_kafka.storage.block_format import decode_block
from reliable_kafka.util import instruments
from reliable_kafka.util.located_rdd import current_executor, executor_locations, located_rdd


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("--zk", "--group", "--topics", "--checkpoint", "--output"):
        parser.add_argument(name, required=True)
    parser.add_argument("--run", type=int, default=0)
    parser.add_argument("--wal", choices=("on", "off"), default="on")
    parser.add_argument("--storage-level", default="MEMORY_AND_DISK_SER_2")
    parser.add_argument("--master", default="local-cluster[2,2,1024]")
    parser.add_argument("--placement", choices=("executors", "driver"), default="executors")
    parser.add_argument("--kafka-params", default="{}")
    parser.add_argument("--graceful-stop-timeout", default="120s")
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE, another SparkConf entry")
    parser.add_argument(
        "--hold-until",
        help="once: hold the first batch with a block of the first stream before it reads its blocks, "
        "until this file exists (the test's faults land while the batch waits)",
    )
    parser.add_argument("--sink-ms-per-record", type=int, default=0)
    parser.add_argument("--allocation-events", action="store_true")
    parser.add_argument(
        "--probe-fetch",
        action="store_true",
        help="once: read a block in a task on an executor other than its holder, by fetch only",
    )
    return parser.parse_args(argv)


class Sink:
    """JSON lines, one write + fsync per group, safe from several threads."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._lock = threading.Lock()

    def write(self, *entries: dict[str, Any]) -> None:
        data = "".join(json.dumps(entry) + "\n" for entry in entries).encode()
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)


class ReceiverEvents(StreamingListener):
    def __init__(self, sink: Sink, allocation_events: bool = False) -> None:
        self._sink = sink
        self._allocation_events = allocation_events

    def _write(self, kind: str, info: Any) -> None:
        self._sink.write(
            {
                "kind": kind,
                "stream": info.stream_id,
                "executor_id": info.executor_id,
                "host": info.location,
                "name": info.name,
                "time": time.time(),
                "message": info.last_error_message,
            }
        )

    def onReceiverStarted(self, receiverStarted: StreamingListenerReceiverStarted) -> None:
        self._write("receiver_started", receiverStarted.receiver_info)

    def onReceiverStopped(self, receiverStopped: StreamingListenerReceiverStopped) -> None:
        self._write("receiver_stopped", receiverStopped.receiver_info)

    def onReceiverError(self, receiverError: StreamingListenerReceiverError) -> None:
        self._write("receiver_error", receiverError.receiver_info)

    def onStreamingError(self, streamingError: StreamingListenerStreamingError) -> None:
        self._sink.write({"kind": "streaming_error", "time": time.time(), "message": streamingError.message})

    def onBatchCompleted(self, batchCompleted: Any) -> None:
        if self._allocation_events:
            info = batchCompleted.batch_info
            self._sink.write(
                {
                    "kind": "batch_done",
                    "batch": info.batch_time_ms,
                    "time": time.time(),
                    "processing_ms": info.processing_delay_ms,
                    "scheduling_ms": info.scheduling_delay_ms,
                    "records": info.num_records,
                }
            )

    def onScalingDecision(self, scalingDecision: Any) -> None:
        if self._allocation_events:
            self._sink.write({"kind": "scaling", **dataclasses.asdict(scalingDecision.decision)})

    def onOutputOperationCompleted(self, outputOperationCompleted: Any) -> None:
        info = outputOperationCompleted.output_operation_info
        if info.failure_reason:
            self._sink.write(
                {
                    "kind": "job_error",
                    "batch": info.batch_time_ms,
                    "error": info.failure_reason[:4000],
                    # The Python error's own lines, wherever Spark's stack puts them.
                    "lost": [line for line in info.failure_reason.splitlines() if "records lost" in line][:5],
                }
            )


def probe_fetch(
    sc: SparkContext, ssc: StreamingContext, batch_ms: int, stream_ids: list[int], sink: Sink
) -> None:
    """Force a batch task onto an executor that does not hold its block, with no file to read
    (as on another host): it must fetch the block from the holder's block server."""
    tracker = ssc.scheduler.receiver_tracker
    assert tracker is not None
    infos = [info for sid in stream_ids for info in tracker.get_blocks_of_batch_and_stream(batch_ms, sid)]
    info = next(i for i in infos if i.block_store_result.location is not None and i.num_records)
    holder = info.block_store_result.location
    assert holder is not None
    other = next((h, e) for h, e in executor_locations(sc) if e != holder.executor_id)
    no_file = dataclasses.replace(holder, path=None)
    partition = BlockPartition(
        info.block_id.name, location=no_file, fetch_secret=tracker.runner.block_fetch_secret
    )
    rdd = located_rdd(sc, [(partition.encode(), [f"executor_{other[0]}_{other[1]}"])])

    def read(raw: bytes) -> bytes:
        records = decode_block(BlockPartition.decode(raw).read())
        return json.dumps({"ran_on": current_executor()[1], "records": len(records)}).encode()

    (result,) = rdd.map(read).collect()
    # The holder's next instruments report (every few seconds) brings the serve to the driver's
    # metrics; the test may lose that host soon after, so this waits for it here.
    deadline = time.monotonic() + 60
    while instruments.combined_snapshot().blocks_served < 1 and time.monotonic() < deadline:
        threading.Event().wait(0.2)
    sink.write(
        {
            "kind": "forced_fetch",
            "holder": holder.executor_id,
            "expected": info.num_records,
            "served_reported": instruments.combined_snapshot().blocks_served,
            **json.loads(result),
        }
    )


def sample_executors(sc: SparkContext, sink: Sink, stop: threading.Event) -> None:
    client = SparkExecutorAllocationClient(sc)
    while not stop.wait(1.0):  # a sampling period, not a wait for an event
        try:
            sink.write({"kind": "executors", "time": time.time(), "count": len(client.executor_ids())})
        except Exception:  # the SparkContext stopping
            return


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("reliable_kafka.scheduler").setLevel(logging.INFO)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster(args.master)
        .setAppName(f"cluster-child-{args.run}")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.driver.memory", "1g")
        .set("spark.streaming.receiver.placement", args.placement)
        .set("spark.streaming.receiver.writeAheadLog.enable", "true" if args.wal == "on" else "false")
        .set("spark.streaming.blockInterval", "200ms")
        .set("spark.streaming.gracefulStopTimeout", args.graceful_stop_timeout)
        .set("spark.streaming.receiverRestartDelay", "500ms")
    )
    for entry in args.conf:
        key, _, value = entry.partition("=")
        conf.set(key, value)
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    sink = Sink(args.output)
    topics = args.topics.split(",")

    def setup() -> StreamingContext:
        ssc = StreamingContext(sc, 1)
        streams = [
            KafkaUtils.createStream(
                ssc,
                args.zk or None,
                args.group,
                {topic: 1},
                {"auto.offset.reset": "smallest", **json.loads(args.kafka_params)},
                storageLevel=args.storage_level,
                messageHandler=lambda m: (m.topic, m.partition, m.offset),
            )
            for topic in topics
        ]
        block_rdds: dict[int, list[BlockRDD]] = {}
        probed: list[int] = []
        held: list[int] = []

        def note_blocks(batch_time: datetime, rdd: Any) -> None:
            if isinstance(rdd, BlockRDD):
                block_rdds.setdefault(time_ms_of(batch_time), []).append(rdd)

        for stream in streams:
            stream.foreachRDD(note_blocks)

        def write_batch(batch_time: datetime, rdd: Any) -> None:
            batch_ms = time_ms_of(batch_time)
            tracker = holder["ssc"].scheduler.receiver_tracker
            blocks = [
                {
                    "id": info.block_id.name,
                    "executor": None
                    if info.block_store_result.location is None
                    else info.block_store_result.location.executor_id,
                    "wal": None
                    if info.block_store_result.wal_record_handle is None
                    else info.block_store_result.wal_record_handle.path,
                    "replica": None
                    if info.block_store_result.replica is None
                    else info.block_store_result.replica.executor_id,
                    "ranges": [
                        [r.topic, r.partition, r.fromOffset, r.untilOffset]
                        for r in offset_ranges_of_blocks([info])
                    ],
                }
                for stream in streams
                for info in tracker.get_blocks_of_batch_and_stream(batch_ms, stream.id)
            ]
            sink.write({"kind": "begin", "batch": batch_ms, "time": time.time(), "blocks": blocks})
            first_stream = f"input-{streams[0].id}-"
            if args.hold_until and not held and any(b["id"].startswith(first_stream) for b in blocks):
                held.append(batch_ms)
                sink.write({"kind": "held", "batch": batch_ms})
                while not os.path.exists(args.hold_until):
                    threading.Event().wait(0.1)  # polls for the test's release file
            if args.sink_ms_per_record:
                pause_s = args.sink_ms_per_record / 1000

                def slowly(record: Any) -> Any:
                    time.sleep(pause_s)  # the sink's own work, per record
                    return record

                rdd = rdd.map(slowly)
            records = rdd.collect()
            parts = block_rdds.pop(batch_ms, [])
            if args.probe_fetch and not probed and records:
                probe_fetch(sc, holder["ssc"], batch_ms, [stream.id for stream in streams], sink)
                probed.append(batch_ms)
            sink.write(
                {
                    "kind": "batch",
                    "batch": batch_ms,
                    "driver_bytes": sum(r.num_with_driver_bytes for r in parts),
                    "partitions": sum(len(r.block_ids) for r in parts),
                },
                *({"kind": "rec", "batch": batch_ms, "t": t, "p": p, "o": o} for t, p, o in records),
            )

        ssc.union(*streams).foreachRDD(write_batch)
        return ssc

    holder: dict[str, Any] = {}
    ssc = StreamingContext.getOrCreate(args.checkpoint, setup)
    holder["ssc"] = ssc
    ssc.addStreamingListener(ReceiverEvents(sink, args.allocation_events))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ssc.start()
    tracker = ssc.scheduler.receiver_tracker
    runner = getattr(tracker, "runner", None)
    server = getattr(runner, "server", None)
    if server is not None:
        host, port = server.address
        sink.write({"kind": "tracker", "host": host, "port": port, "app_id": sc.applicationId})
    if args.allocation_events:
        threading.Thread(
            target=sample_executors, args=(sc, sink, stop), name="executor-sampler", daemon=True
        ).start()
    print("started", flush=True)
    # Not awaitTermination: it raises a failed batch's error, and this app records those (above)
    # and goes on, as a Spark Streaming app that catches them would.
    stop.wait()
    # What the driver's /metrics shows of the receivers' data path (reported from the executors).
    totals = instruments.combined_snapshot()
    sink.write(
        {
            "kind": "instruments",
            "wal_writes": totals.wal_write.count,
            "commits": totals.offset_commit.count,
            "block_store_bytes": totals.block_store_bytes,
            "blocks_served": totals.blocks_served,
        }
    )
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    sink.write({"kind": "stopped", "time": time.time()})
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

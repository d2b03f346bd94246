"""End to end through createStream with the WAL on, against a raw confluent-kafka consumer.

    python benchmarks/pipeline_bench.py [--messages 1000000] [--partitions 4] [--size 100]
        [--latency-rate 5000] [--latency-seconds 15] [--master local[2]]

On a real local ZooKeeper + Kafka 3.9 (LocalCluster's default) and a real Spark (this process's SparkContext):

1. throughput: ``--messages`` are produced first; (a) a plain confluent-kafka consumer reads them
   all (assign from offset 0, count only); (b) ``KafkaUtils.createStream`` with the receiver WAL
   on and checkpointing, ``foreachRDD(rdd.count())``, from ``ssc.start()`` until every record has
   been counted in a batch (receive, WAL fsync, ZooKeeper commit, batch allocation, block read
   and msgpack + UTF-8 decode in the Python workers). Prints both rates and (b)/(a), twice:
   "cold" is the first stream of a fresh SparkContext, so it also pays for Spark's first job and
   for starting and importing the Python workers (~2 s on 2 cores); "warm" is the same run on a
   second backlog of ``--messages`` after the latency run, as a long-running job sees it.
2. latency: a producer sends ``--latency-rate`` msg/s for ``--latency-seconds``. How p50/p99 are
   measured: each value starts with ``time.time_ns()`` taken just before ``Producer.produce`` (so
   librdkafka's queueing and ``linger.ms`` 5 count); in ``foreachRDD`` the batch's records are
   collected to the driver and, once ``collect()`` returns, ``time.time_ns()`` is read once for
   the whole batch. A record's latency is that end time minus its produce time: produce, broker,
   receiver fetch, block interval, WAL write and fsync, ZooKeeper commit, waiting for the batch,
   job scheduling, block read, decode and the collect. Both stamps come from this host's wall
   clock (one machine, no skew). p50/p99 are inclusive percentiles over every record; max is the
   largest. Batch duration 1 s, block interval 200 ms (Spark's), so ~0.5-1 s of it is batching by
   design.
3. empty batches: the same context keeps running with no input; the processing time of each
   empty batch (a Spark job over zero blocks) is the fixed per-batch overhead.

Delivery is checked in all three streaming runs: the Kafka offset ranges of every block of every batch
must cover each partition's produced offsets exactly once, and the records counted must equal
the records produced. A lost or duplicated record makes the run exit with status 1 and say which
offsets, after printing the figures (a number from a run that lost data is not a result).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from pyspark import SparkConf, SparkContext, StorageLevel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.dstream.batch_rdd import offset_ranges_of
from reliable_kafka.dstream.functions import time_ms_of
from reliable_kafka.local import LocalCluster
from reliable_kafka.scheduler.listener import StreamingListener, StreamingListenerBatchCompleted

BATCH_S = 1.0


class DeliveryCheck:
    """Every produced record exactly once, from the batches' block metadata (no record shipping).

    Offsets start at 0 on the fresh topics; ``produced_per_partition[p]`` records went to ``p``.
    """

    def __init__(self, ssc: StreamingContext, stream: Any) -> None:
        self._ssc = ssc
        self._stream_id = stream.id
        self._lock = threading.Lock()
        self.counted = 0
        self._ranges: dict[int, list[tuple[int, int, int]]] = {}  # partition -> (from, until, batch)

    def add_batch(self, batch_time: datetime, records: int) -> None:
        batch_ms = time_ms_of(batch_time)
        tracker = self._ssc.scheduler.receiver_tracker
        assert tracker is not None
        infos = tracker.get_blocks_of_batch_and_stream(batch_ms, self._stream_id)
        with self._lock:
            self.counted += records
            for info in infos:
                for r in offset_ranges_of([info]):
                    self._ranges.setdefault(r.partition, []).append((r.fromOffset, r.untilOffset, batch_ms))

    def problems(self, produced_per_partition: list[int]) -> list[str]:
        found: list[str] = []
        with self._lock:
            counted, ranges = self.counted, {p: sorted(rs) for p, rs in self._ranges.items()}
        for partition, produced in enumerate(produced_per_partition):
            expected_next = 0
            for start, until, batch_ms in ranges.get(partition, []):
                if start < expected_next:
                    found.append(
                        f"partition {partition}: offsets {start}-{min(until, expected_next) - 1} "
                        f"delivered again in batch {batch_ms}"
                    )
                elif start > expected_next:
                    found.append(f"partition {partition}: offsets {expected_next}-{start - 1} lost")
                expected_next = max(expected_next, until)
            if expected_next < produced:
                found.append(f"partition {partition}: offsets {expected_next}-{produced - 1} lost")
            elif expected_next > produced:
                found.append(f"partition {partition}: offsets up to {expected_next - 1}, {produced} produced")
        total = sum(produced_per_partition)
        if counted != total:
            found.append(f"{counted:,} records counted in batches for {total:,} produced")
        return found


def per_partition(messages: int, partitions: int) -> list[int]:
    """Records per partition when message i goes to partition i % partitions."""
    return [len(range(p, messages, partitions)) for p in range(partitions)]


def make_value(size: int) -> bytes:
    stamp = str(time.time_ns()).encode() + b":"
    return stamp + b"x" * max(0, size - len(stamp))


def produce_backlog(cluster: LocalCluster, topic: str, partitions: int, messages: int, size: int) -> None:
    producer = Producer(
        cluster.client_config(
            **{"linger.ms": 50, "batch.num.messages": 10000, "queue.buffering.max.messages": 500000}
        )
    )
    started = time.monotonic()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, make_value(size), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError("not every message was acknowledged")
    print(f"produced {messages:,} x {size} B in {time.monotonic() - started:.1f} s")


def raw_consume(cluster: LocalCluster, topic: str, partitions: int, messages: int) -> float:
    consumer = Consumer(cluster.client_config(**{"group.id": "bench-raw", "enable.auto.commit": False}))
    started = time.monotonic()
    # The receiver's consumers learn the leader before assign(); so does this one, or it would
    # wait out librdkafka's 500 ms offset-query retry timer.
    consumer.list_topics(topic, timeout=5)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = 0
    while count < messages:
        count += sum(1 for m in consumer.consume(num_messages=100, timeout=1.0) if m.error() is None)
    elapsed = time.monotonic() - started
    consumer.close()
    return elapsed


def create_stream(ssc: StreamingContext, cluster: LocalCluster, topic: str, group: str) -> Any:
    return KafkaUtils.createStream(
        ssc,
        cluster.zookeeper_connect,
        group,
        {topic: 1},
        {"auto.offset.reset": "smallest", **cluster.client_config()},
        # One copy in the block manager: the WAL is the other (Spark warns about _2 with a WAL).
        storageLevel=StorageLevel.MEMORY_AND_DISK,
    )


def new_context(sc: SparkContext, checkpoint: Path) -> StreamingContext:
    ssc = StreamingContext(sc, BATCH_S)
    ssc.checkpoint(str(checkpoint))
    return ssc


def pipeline_throughput(
    sc: SparkContext, cluster: LocalCluster, topic: str, args: argparse.Namespace, checkpoint: Path
) -> tuple[float, list[str]]:
    """Seconds until every record was counted, and the delivery problems found (none expected)."""
    ssc = new_context(sc, checkpoint)
    messages = args.messages
    done = threading.Event()
    finished_at = [0.0]
    stream = create_stream(ssc, cluster, topic, "bench-pipeline")
    check = DeliveryCheck(ssc, stream)

    def count(batch_time: datetime, rdd: Any) -> None:
        check.add_batch(batch_time, rdd.count())
        if check.counted >= messages and not done.is_set():
            finished_at[0] = time.monotonic()
            done.set()

    stream.foreachRDD(count)
    started = time.monotonic()
    ssc.start()
    if not done.wait(1800):
        raise SystemExit(f"FAILED: only {check.counted:,} of {messages:,} records counted in 30 minutes")
    # Batches still running may add duplicates: wait for them before judging.
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    return finished_at[0] - started, check.problems(per_partition(messages, args.partitions))


class BatchTimes(StreamingListener):
    """Processing time of every completed batch, with its record count."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int]] = []  # (records, processing ms)
        self.lock = threading.Lock()

    def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
        info = batchCompleted.batchInfo
        if info.processing_delay_ms is not None:
            with self.lock:
                self.batches.append((info.num_records, info.processing_delay_ms))


def steady_producer(
    cluster: LocalCluster, topic: str, partitions: int, rate: int, seconds: float, size: int
) -> int:
    producer = Producer(cluster.client_config(**{"linger.ms": 5}))
    interval, sent = 0.01, 0
    per_tick = max(1, int(rate * interval))
    started = time.monotonic()
    next_tick = started
    while next_tick - started < seconds:
        for _ in range(per_tick):
            producer.produce(topic, make_value(size), partition=sent % partitions)
            sent += 1
        producer.poll(0)
        next_tick += interval
        time.sleep(max(0.0, next_tick - time.monotonic()))
    if producer.flush(60) != 0:
        raise RuntimeError("not every message was acknowledged")
    return sent


def latency_and_empty_batches(
    sc: SparkContext, cluster: LocalCluster, topic: str, args: argparse.Namespace, checkpoint: Path
) -> tuple[list[float], list[int], list[str]]:
    """Per-record latencies (see the module docstring), empty batch times, delivery problems."""
    ssc = new_context(sc, checkpoint)
    latencies_ms: list[float] = []
    lock = threading.Lock()
    stream = create_stream(ssc, cluster, topic, "bench-latency")
    check = DeliveryCheck(ssc, stream)

    def measure(batch_time: datetime, rdd: Any) -> None:
        stamps = rdd.map(lambda kv: int(kv[1].split(":", 1)[0])).collect()
        now = time.time_ns()
        check.add_batch(batch_time, len(stamps))
        with lock:
            latencies_ms.extend((now - stamp) / 1e6 for stamp in stamps)

    stream.foreachRDD(measure)
    listener = BatchTimes()
    ssc.addStreamingListener(listener)
    ssc.start()
    # Let the receiver join its group before the clock of the first message starts.
    time.sleep(3)
    sent = steady_producer(
        cluster, topic, args.partitions, args.latency_rate, args.latency_seconds, args.size
    )
    deadline = time.monotonic() + 300
    while len(latencies_ms) < sent and time.monotonic() < deadline:
        time.sleep(0.2)
    with listener.lock:
        seen = len(listener.batches)
    # Empty batches from here on: the stream is idle.
    while time.monotonic() < deadline:
        with listener.lock:
            if len(listener.batches) >= seen + args.empty_batches + 2:
                break
        time.sleep(0.2)
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    with listener.lock:
        # Skip the first two idle batches: they may still hold the producer's last records.
        empty = [ms for records, ms in listener.batches[seen + 2 :] if records == 0]
    return latencies_ms, empty, check.problems(per_partition(sent, args.partitions))


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--latency-rate", type=int, default=5000, help="msg/s in the latency run")
    parser.add_argument("--latency-seconds", type=float, default=15.0)
    parser.add_argument("--empty-batches", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    with (
        tempfile.TemporaryDirectory(prefix="pipeline-bench-") as work,
        LocalCluster(Path(work) / "cluster") as cluster,
    ):
        for topic in ("bench", "latency", "bench-warm"):
            cluster.create_topic(topic, partitions=args.partitions)
        produce_backlog(cluster, "bench", args.partitions, args.messages, args.size)
        produce_backlog(cluster, "bench-warm", args.partitions, args.messages, args.size)
        conf = (
            SparkConf()
            .setMaster(args.master)
            .setAppName("pipeline-bench")
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.streaming.receiver.writeAheadLog.enable", "true")
        )
        sc = SparkContext(conf=conf)
        sc.setLogLevel("ERROR")
        try:
            raw_s = raw_consume(cluster, "bench", args.partitions, args.messages)
            pipeline_s, throughput_problems = pipeline_throughput(
                sc, cluster, "bench", args, Path(work) / "cp1"
            )
            latencies, empty, latency_problems = latency_and_empty_batches(
                sc, cluster, "latency", args, Path(work) / "cp2"
            )
            warm_s, warm_problems = pipeline_throughput(sc, cluster, "bench-warm", args, Path(work) / "cp3")
        finally:
            sc.stop()

    raw_rate = args.messages / raw_s
    print(f"(a) raw confluent-kafka consume:    {raw_rate:>12,.0f} records/s ({raw_s:.1f} s)")
    for label, seconds in (("cold", pipeline_s), ("warm", warm_s)):
        rate = args.messages / seconds
        print(
            f"(b) createStream, WAL on, {label}: {rate:>12,.0f} records/s ({seconds:.1f} s), "
            f"ratio (b)/(a) {rate / raw_rate:.2f}"
        )
    if latencies:
        print(
            f"latency at {args.latency_rate:,} msg/s ({len(latencies):,} records, batch {BATCH_S:g} s): "
            f"p50 {percentile(latencies, 50):.0f} ms, p99 {percentile(latencies, 99):.0f} ms, "
            f"max {max(latencies):.0f} ms"
        )
    if empty:
        print(
            f"empty batch processing time ({len(empty)} batches): median {statistics.median(empty):.0f} ms, "
            f"max {max(empty)} ms"
        )
    problems = [f"throughput run: {p}" for p in throughput_problems]
    problems += [f"warm throughput run: {p}" for p in warm_problems]
    problems += [f"latency run: {p}" for p in latency_problems]
    if problems:
        print("FAILED: records lost or duplicated, the figures above are not valid:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        raise SystemExit(1)
    print("delivery: every record exactly once in all three streaming runs")


if __name__ == "__main__":
    main()

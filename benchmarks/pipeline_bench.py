"""End to end through createStream with the WAL on, in both receiver placements, against a raw
confluent-kafka consumer.

    python benchmarks/pipeline_bench.py [--placement both|all|driver,executors,hosts] [--messages 300000]
        [--partitions 4] [--size 100] [--latency-rate 5000] [--latency-seconds 15]
        [--empty-batches 10] [--ui-rounds 1] [--replication] [--master local[2]]
        [--cluster-master local-cluster[2,2,1024]] [--conf KEY=VALUE ...]

On a real local ZooKeeper + Kafka 3.9 (LocalCluster's default) and a real Spark. ``--placement
both`` (the default) runs the driver placement (``spark.streaming.receiver.placement=driver``: the
receiver is threads of this Python process) on ``--master``, stops that SparkContext, then runs
the executor placement (the receiver is a long-running task on an executor, blocks stay there) on
``--cluster-master``: ``local-cluster[2,2,1024]`` is two executor JVMs with two task slots each
and their own Python workers (what tests/e2e/cluster_child.py runs). Its standalone workers ignore
``SPARK_WORKER_DIR`` (Spark's LocalSparkCluster passes no work directory, so each Worker uses
``SPARK_HOME/work``, in the venv): the run removes its own ``SPARK_HOME/work/<application id>``
after stopping the context. PySpark's py4j gateway, and so the driver JVM process, is the same for
both. A full run takes a few minutes on 2 cores. Each placement does the runs below on fresh
topics, then prints a table; with both, it prints the ratios executors / driver of records/s and
of driver CPU per million records, each with its goal (>= 0.8 and <= 0.2) and whether it was met,
for the warm run (the steady state; cold also shown). The load average is printed too: figures
from a busy shared machine are noisy (run it twice). ``--conf`` adds Spark settings to both
contexts, for experiments such as ``--conf spark.locality.wait=0`` (batch tasks then need not
queue for the one free core of the executor that holds the receiver and its blocks).
``--placement hosts`` (``all``: with both others) runs the executor placement once more on the
several-hosts cluster (LocalSparkHosts, root: two workers with their own address, ``/dev/shm`` and
local dirs, one 3-core executor each), where a batch task on the other host fetches its block from
the receiver's block server, and prints its records/s and p99 latency against local-cluster's.
``--replication`` adds, in each executor placement, two runs with the write-ahead log off and the
reliable receiver (``spark.streaming.receiver.reliableWithoutWriteAheadLog``), each of two
receivers on half of ``--messages``: blocks kept with one copy (``MEMORY_AND_DISK_SER``), then two
(``MEMORY_AND_DISK_SER_2``: the second on the other receiver's executor, on the other host on the
hosts cluster; a receiver alone has no peer). It prints records/s and CPU per million records of
every process (driver Python, driver JVM, executors and their Python workers) for each, and the
ratios: what a second copy of each block costs.

1. throughput: ``--messages`` are produced first; (a) a plain confluent-kafka consumer reads them
   all (assign from offset 0, count only); (b) ``KafkaUtils.createStream`` with the receiver WAL
   on and checkpointing, ``foreachRDD(rdd.count())``, from ``ssc.start()`` until every record has
   been counted in a batch (receive, WAL fsync, ZooKeeper commit, batch allocation, block read
   and msgpack + UTF-8 decode in the Python workers). Prints each rate and (b)/(a), twice:
   "cold" is the first stream of a fresh SparkContext, so it also pays for Spark's first job and
   for starting and importing the Python workers (~2 s on 2 cores); "warm" is the same run on a
   second backlog of ``--messages`` after the latency run, as a long-running job sees it. Over
   the same window (``ssc.start()`` until the last record is counted; the graceful stop after
   it is not counted): CPU seconds of the driver. "drv py" is ``getrusage(RUSAGE_SELF)`` user +
   system of THIS Python process only (every thread: the streaming scheduler, and in driver
   placement the receiver's consumers, block generator and WAL writer); it is the figure of the
   goal. "drv JVM" is the driver JVM (the child java process of this one that runs SparkSubmit,
   from ``/proc/<pid>/stat``): Spark's task scheduling and block manager, busy in both
   placements. "others" is every live process under the driver JVM (executor JVMs, Python
   workers), and on the hosts cluster every process of its hosts (workers, executors, Python
   workers), a lower bound (see proc_cpu.py). Also "rcv up", seconds from ``ssc.start()`` to the
   receiver's ReceiverStarted event (in executor placement: a Spark job, a Python worker on the
   executor, the tracker connection), "1st bat", seconds from ``ssc.start()`` until the first
   batch holding records started its jobs (time to first record: receiver launch, the first
   block's store, the batch boundary after it; the backlog waits in Kafka meanwhile), "1st rec",
   until that batch's output was done (its processing added: with a backlog of ``--messages``
   that batch holds most of it, so "1st bat" is the startup figure), and the number of
   non-empty batches, their median
   processing time and largest scheduling delay (a delay means batches queue up: the run is
   bound by processing, not by receiving). A backlog of 300,000 is received within one or two
   batches, so such a run times startup + one batch more than steady-state ingest: use
   ``--messages 1000000`` or more for that.
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
4. status page cost (``--ui-rounds N``, default 1; 0 skips it): after the warm run, in the same
   SparkContext, the warm throughput run again on fresh backlogs of ``--messages``, alternating
   the streaming status page off and on (``spark.streaming.ui.enabled``, port 0 = any free one)
   N times each. While the page is on, a client thread loads the page and ``/metrics`` once a
   second (a user and a Prometheus scrape); their response times are printed. Runs 1-3 keep the
   page off, so the warm run counts as one more "off" run: "off" is the warm run and the N off
   rounds, "on" the N on rounds. Each group prints its mean records/s, every run and its spread
   (max - min, in % of the mean), and the driver Python CPU per million records with the page
   client's own CPU taken out (``time.thread_time()`` of its thread; the server's rendering
   stays in, it is the cost measured). The difference of the means is called within noise when
   it is no larger than the larger spread of the two groups (with ``--ui-rounds 1`` the "on"
   group is one run, so that spread comes from the off runs alone: run more rounds to judge a
   small difference).

Delivery is checked in every streaming run of each placement: the Kafka offset ranges of
every block of every batch (block metadata from the driver's receiver tracker, the same in both
placements) must cover each partition's produced offsets exactly once, and the records counted
must equal the records produced. A lost or duplicated record makes the run exit with status 1
and say which offsets, after printing the figures (a number from a run that lost data is not a
result).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from pyspark import SparkConf, SparkContext, StorageLevel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from percentiles import percentile
from proc_cpu import CpuMeter, CpuUsage, driver_jvm_pid

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.dstream.functions import time_ms_of
from reliable_kafka.kafka.client.offset_range import offset_ranges_of_blocks
from reliable_kafka.local import LocalCluster
from reliable_kafka.local.spark_hosts import LocalSparkHosts
from reliable_kafka.scheduler.listener import (
    StreamingListener,
    StreamingListenerBatchCompleted,
    StreamingListenerBatchStarted,
    StreamingListenerReceiverStarted,
)
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.util.located_rdd import wait_for_executors
from reliable_kafka.util.worker_python import DAEMON_MODULE, DAEMON_MODULE_KEY
from tests.spark_backends import HOST_CORES, hosts_backend

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
                for r in offset_ranges_of_blocks([info]):
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


def create_stream(
    ssc: StreamingContext,
    cluster: LocalCluster,
    topic: str,
    group: str,
    # One copy in the block manager by default: the WAL is the other (Spark warns about _2 with a WAL).
    level: StorageLevel | str = StorageLevel.MEMORY_AND_DISK,
) -> Any:
    return KafkaUtils.createStream(
        ssc,
        cluster.zookeeper_connect,
        group,
        {topic: 1},
        {"auto.offset.reset": "smallest", **cluster.client_config()},
        storageLevel=level,
    )


def new_context(
    sc: SparkContext, checkpoint: Path, ui: bool = False, **overrides: dict[str, Any]
) -> StreamingContext:
    """The status page is off unless ``ui`` (it is on by default): only the status page rounds
    turn it on. Port 0: any free port. ``overrides``: settings sections, as StreamingSettings takes."""
    settings = StreamingSettings.from_spark_conf(sc, ui={"enabled": ui, "port": 0}, **overrides)
    ssc = StreamingContext(sc, BATCH_S, settings)
    ssc.checkpoint(str(checkpoint))
    return ssc


class PageClient:
    """Loads the status page and /metrics once a second, as a user and a Prometheus server would."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.page_ms: list[float] = []
        self.metrics_ms: list[float] = []
        self.errors: list[str] = []
        self.cpu_s = 0.0  # CPU of this client's own thread, not of the server answering it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="page-client", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(1.0):
                for path, times in (("", self.page_ms), ("metrics", self.metrics_ms)):
                    started = time.monotonic()
                    try:
                        with urllib.request.urlopen(self.url + path, timeout=60) as response:
                            response.read()
                    except OSError as exc:
                        self.errors.append(f"/{path}: {exc}")
                        continue
                    times.append((time.monotonic() - started) * 1000)
        finally:
            self.cpu_s = time.thread_time()

    def request_stop(self) -> None:
        self._stop.set()

    def join(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True)
class Throughput:
    """One backlog run: seconds from ``ssc.start()`` until every record was counted, the CPU of
    the driver's processes over that window, the batches it took and the delivery problems."""

    seconds: float
    receiver_start_s: float
    first_batch_s: float  # from ssc.start() until the first batch holding records started its jobs
    first_record_s: float  # from ssc.start() until a batch's output first held records
    cpu: CpuUsage
    batches: int
    median_batch_ms: float
    max_scheduling_delay_ms: int
    problems: list[str]
    ui: bool = False
    page_ms: tuple[float, ...] = ()  # status page load times while it was on
    metrics_ms: tuple[float, ...] = ()
    client_cpu_s: float = 0.0  # the page client's own thread, inside cpu.driver_python_s


def pipeline_throughput(
    sc: SparkContext,
    cluster: LocalCluster,
    topic: str,
    args: argparse.Namespace,
    checkpoint: Path,
    ui: bool = False,
    more_pids: Callable[[], list[int]] | None = None,
    group: str | None = None,
    wal: bool = True,
) -> Throughput:
    """``group``: the consumer group (default ``bench-pipeline-<topic>``), another one per run
    when several runs read the same topic from its start; ``wal``: the receiver write-ahead log."""
    ssc = new_context(sc, checkpoint, ui, **({} if wal else {"wal": {"enable": False}}))
    messages = args.messages
    done = threading.Event()
    stream = create_stream(ssc, cluster, topic, group or f"bench-pipeline-{topic}")
    check = DeliveryCheck(ssc, stream)
    listener = BatchTimes()
    ssc.addStreamingListener(listener)
    meter = CpuMeter(driver_jvm_pid(), more_pids)

    first_records: list[float] = []

    def count(batch_time: datetime, rdd: Any) -> None:
        check.add_batch(batch_time, rdd.count())
        if check.counted and not first_records:
            first_records.append(time.monotonic())
        if check.counted >= messages and not done.is_set():
            done.set()

    stream.foreachRDD(count)
    meter.start()
    started = time.monotonic()
    ssc.start()
    status_ui = ssc.status_ui
    url = status_ui.url if status_ui is not None else None
    if ui and url is None:
        raise SystemExit("FAILED: the status page did not start")
    client = PageClient(url) if ui and url is not None else None
    finished = done.wait(1800)
    if client is not None:
        client.request_stop()
    # Read at once: the graceful stop below (receivers, WAL, executors) is not part of the window.
    cpu = meter.stop()
    if client is not None:
        client.join()
        if client.errors:
            raise SystemExit(
                f"FAILED: the status page client got {len(client.errors)} errors: {client.errors[0]}"
            )
    if not finished:
        raise SystemExit(f"FAILED: only {check.counted:,} of {messages:,} records counted in 30 minutes")
    # Batches still running may add duplicates: wait for them before judging.
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    with listener.lock:
        busy = [(ms, delay) for records, ms, delay in listener.batches if records]
        receiver_at = listener.receiver_started_at
        first_batch_at = listener.first_batch_started_at
    return Throughput(
        seconds=cpu.wall_s,
        receiver_start_s=float("nan") if receiver_at is None else receiver_at - started,
        first_batch_s=float("nan") if first_batch_at is None else first_batch_at - started,
        first_record_s=first_records[0] - started if first_records else float("nan"),
        cpu=cpu,
        batches=len(busy),
        median_batch_ms=statistics.median(ms for ms, _ in busy) if busy else 0.0,
        max_scheduling_delay_ms=max((delay for _, delay in busy), default=0),
        problems=check.problems(per_partition(messages, args.partitions)),
        ui=ui,
        page_ms=tuple(client.page_ms) if client is not None else (),
        metrics_ms=tuple(client.metrics_ms) if client is not None else (),
        client_cpu_s=client.cpu_s if client is not None else 0.0,
    )


@dataclass(frozen=True)
class CopiesRun:
    """A backlog run without the WAL, the reliable receiver, blocks kept with ``copies`` copies."""

    copies: int
    seconds: float
    cpu: CpuUsage
    problems: list[str]


def copies_throughput(
    sc: SparkContext,
    cluster: LocalCluster,
    topics: list[str],
    args: argparse.Namespace,
    checkpoint: Path,
    copies: int,
    more_pids: Callable[[], list[int]] | None = None,
) -> CopiesRun:
    """Two receivers (a block's second copy goes to another receiver's executor: one receiver
    alone has no peer), WAL off and ``reliableWithoutWriteAheadLog``: offsets are committed once
    a block has its ``copies`` copies. Each topic holds half of ``--messages``."""
    ssc = new_context(sc, checkpoint, wal={"enable": False}, receiver={"reliable_without_wal": True})
    # By name: pyspark 3+ has no _SER levels, the package takes Spark's names.
    level = "MEMORY_AND_DISK_SER_2" if copies == 2 else "MEMORY_AND_DISK_SER"
    half = args.messages // 2
    checks: list[DeliveryCheck] = []
    done = threading.Event()
    for topic in topics:
        stream = create_stream(ssc, cluster, topic, f"bench-copies-{topic}", level)
        check = DeliveryCheck(ssc, stream)
        checks.append(check)

        def count(batch_time: datetime, rdd: Any, check: DeliveryCheck = check) -> None:
            check.add_batch(batch_time, rdd.count())
            if all(c.counted >= half for c in checks):
                done.set()

        stream.foreachRDD(count)
    meter = CpuMeter(driver_jvm_pid(), more_pids)
    meter.start()
    ssc.start()
    finished = done.wait(1800)
    cpu = meter.stop()
    if not finished:
        raise SystemExit(f"FAILED: the {copies}-copy run counted {sum(c.counted for c in checks):,} records")
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    problems = [
        f"{topic}: {problem}"
        for topic, check in zip(topics, checks, strict=True)
        for problem in check.problems(per_partition(half, args.partitions))
    ]
    return CopiesRun(copies, cpu.wall_s, cpu, problems)


def copies_topics(placement: str, copies: int) -> list[str]:
    return [f"copies{copies}-{placement}-{i}" for i in range(2)]


class BatchTimes(StreamingListener):
    """Processing time of every completed batch, with its record count; when the receiver started
    and when the first batch holding records started its jobs."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, int]] = []  # (records, processing ms, scheduling delay ms)
        self.receiver_started_at: float | None = None  # time.monotonic()
        self.first_batch_started_at: float | None = None  # time.monotonic()
        self.lock = threading.Lock()

    def onBatchStarted(self, batchStarted: StreamingListenerBatchStarted) -> None:
        if batchStarted.batchInfo.num_records:
            with self.lock:
                if self.first_batch_started_at is None:
                    self.first_batch_started_at = time.monotonic()

    def onReceiverStarted(self, receiverStarted: StreamingListenerReceiverStarted) -> None:
        with self.lock:
            if self.receiver_started_at is None:
                self.receiver_started_at = time.monotonic()

    def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
        info = batchCompleted.batchInfo
        if info.processing_delay_ms is not None:
            with self.lock:
                self.batches.append(
                    (info.num_records, info.processing_delay_ms, info.scheduling_delay_ms or 0)
                )


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
        empty = [ms for records, ms, _ in listener.batches[seen + 2 :] if records == 0]
    return latencies_ms, empty, check.problems(per_partition(sent, args.partitions))


@dataclass(frozen=True)
class PlacementResult:
    placement: str
    master: str
    executors: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    cold: Throughput
    warm: Throughput
    latencies_ms: list[float]
    empty_ms: list[int]
    latency_problems: list[str]
    ui_runs: list[Throughput]  # status page rounds: off, on, off, on, ...
    copies_runs: list[CopiesRun]  # WAL off: one copy, then two (executor placements, --replication)


def cluster_executors(master: str) -> int:
    """How many executors ``local-cluster[N,cores,mem]`` starts; 0 for other masters."""
    if not master.startswith("local-cluster["):
        return 0
    return int(master[len("local-cluster[") :].split(",", 1)[0])


def ui_topics(placement: str, rounds: int) -> list[tuple[str, bool]]:
    """The status page rounds' topics, in run order, with whether the page is on."""
    return [
        (f"ui-{placement}-{i}-{'on' if ui else 'off'}", ui) for i in range(rounds) for ui in (False, True)
    ]


@dataclass(frozen=True)
class Target:
    """Where a placement's runs go: ``name`` labels its topics and results; ``hosts`` is the
    executor placement on the several-hosts cluster (LocalSparkHosts) instead of local-cluster."""

    name: str
    master: str
    conf: tuple[str, ...] = ()
    executors: int | None = None  # None: as the master says (local-cluster[N,...])
    # Processes outside the driver JVM's tree that run this target's executors (the hosts').
    processes: Callable[[], list[int]] | None = None

    @property
    def receiver_placement(self) -> str:
        return "driver" if self.name == "driver" else "executors"


def run_placement(
    target: Target, cluster: LocalCluster, args: argparse.Namespace, work: Path
) -> PlacementResult:
    """Cold throughput, latency + empty batches, warm throughput, the status page rounds, on a
    SparkContext of its own.

    The py4j gateway (the driver JVM) outlives ``sc.stop()``, so both placements share one JVM
    process and its CPU is read from the same pid; only the SparkContext inside it is new."""
    placement, master = target.name, target.master
    load_before = os.getloadavg()
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName(f"pipeline-bench-{placement}")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
        # What docs/sizing.md recommends off local[N] (where a StreamingContext sets it itself): fresh
        # Python workers fork with the task code imported. --conf ...=pyspark.daemon: PySpark's own.
        .set(DAEMON_MODULE_KEY, DAEMON_MODULE)
        .set("spark.streaming.receiver.placement", target.receiver_placement)
        .set("spark.streaming.receiver.writeAheadLog.enable", "true")
    )
    for setting in (*target.conf, *args.conf):
        key, _, value = setting.partition("=")
        conf.set(key.strip(), value.strip())
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    wanted = cluster_executors(master) if target.executors is None else target.executors
    # Read before stop(): the workers' directory of this application, removed after it.
    worker_app_dir = None
    if wanted:
        spark_home = sc._jvm.java.lang.System.getenv("SPARK_HOME")
        if spark_home:
            worker_app_dir = Path(spark_home) / "work" / sc.applicationId
    try:
        if wanted:
            # Executor JVMs take seconds to register; the receiver would start on the first one
            # and the cold run would also time the second one's start.
            found = wait_for_executors(sc, wanted, 120)
            if len(found) < wanted:
                raise SystemExit(f"FAILED: {len(found)} of {wanted} executors registered on {master}")
        pids = target.processes
        cold = pipeline_throughput(
            sc, cluster, f"bench-{placement}", args, work / f"{placement}-cp1", more_pids=pids
        )
        latencies, empty, latency_problems = latency_and_empty_batches(
            sc, cluster, f"latency-{placement}", args, work / f"{placement}-cp2"
        )
        warm = pipeline_throughput(
            sc, cluster, f"warm-{placement}", args, work / f"{placement}-cp3", more_pids=pids
        )
        ui_runs = [
            pipeline_throughput(
                sc, cluster, topic, args, work / f"{placement}-cp-{topic}", ui=ui, more_pids=pids
            )
            for topic, ui in ui_topics(placement, args.ui_rounds)
        ]
        copies_runs = [
            copies_throughput(
                sc,
                cluster,
                copies_topics(placement, copies),
                args,
                work / f"{placement}-copies{copies}",
                copies,
                more_pids=pids,
            )
            for copies in copies_of(target, args)
        ]
    finally:
        sc.stop()
        if worker_app_dir is not None:
            # Only this run's application: other runs on the machine may use SPARK_HOME/work.
            shutil.rmtree(worker_app_dir, ignore_errors=True)
            # And SPARK_HOME/work itself once empty (rmdir refuses while another run's is there).
            with contextlib.suppress(OSError):
                worker_app_dir.parent.rmdir()
    return PlacementResult(
        placement,
        master,
        wanted,
        load_before,
        os.getloadavg(),
        cold,
        warm,
        latencies,
        empty,
        latency_problems,
        ui_runs,
        copies_runs,
    )


def copies_of(target: Target, args: argparse.Namespace) -> tuple[int, ...]:
    """The block copies of the replication runs: none in driver placement (no peer executor)."""
    return (1, 2) if args.replication and target.receiver_placement == "executors" else ()


def load_text(load: tuple[float, float, float]) -> str:
    return " ".join(f"{value:.2f}" for value in load)


def print_placement(
    result: PlacementResult, messages: int, raw_rate: float, args: argparse.Namespace
) -> None:
    where = f"{result.executors} executor JVMs" if result.executors else "driver JVM only"
    print(
        f"\n== placement {result.placement}: master {result.master} ({where}); "
        f"load average (1/5/15 min) {load_text(result.load_before)} before, "
        f"{load_text(result.load_after)} after"
    )
    print(
        f"{'run':<5} {'records/s':>10} {'vs raw':>6} {'secs':>6} {'rcv up':>6} {'1st bat':>7} {'1st rec':>7} "
        f"{'batches':>7} "
        f"{'med ms':>6} "
        f"{'max sched':>9} | {'CPU s: drv py':>13} {'drv JVM':>7} {'others':>6} "
        f"| {'CPU s / M records: drv py':>25} {'drv JVM':>7}"
    )
    per_million = 1e6 / messages
    for label, run in (("cold", result.cold), ("warm", result.warm)):
        rate = messages / run.seconds
        print(
            f"{label:<5} {rate:>10,.0f} {rate / raw_rate:>6.2f} {run.seconds:>6.1f} "
            f"{run.receiver_start_s:>6.1f} {run.first_batch_s:>7.1f} {run.first_record_s:>7.1f} "
            f"{run.batches:>7} "
            f"{run.median_batch_ms:>6.0f} "
            f"{run.max_scheduling_delay_ms:>9} | "
            # Two decimals: the driver's Python CPU in executor placement is a tenth of a second.
            f"{run.cpu.driver_python_s:>13.2f} {run.cpu.driver_jvm_s:>7.2f} {run.cpu.spark_others_s:>6.2f} "
            f"| {run.cpu.driver_python_s * per_million:>25.2f} {run.cpu.driver_jvm_s * per_million:>7.2f}"
        )
    latencies = result.latencies_ms
    if len(latencies) >= 2:
        print(
            f"latency at {args.latency_rate:,} msg/s ({len(latencies):,} records, batch {BATCH_S:g} s): "
            f"p50 {percentile(latencies, 50):.0f} ms, p99 {percentile(latencies, 99):.0f} ms, "
            f"max {max(latencies):.0f} ms"
        )
    if result.empty_ms:
        print(
            f"empty batch processing time ({len(result.empty_ms)} batches): "
            f"median {statistics.median(result.empty_ms):.0f} ms, max {max(result.empty_ms)} ms"
        )


def print_copies(result: PlacementResult, messages: int) -> None:
    """The cost of a second copy of each block, WAL off, reliable receiver, two receivers."""
    if not result.copies_runs:
        return
    print(f"\n-- {result.placement}: WAL off, reliable receiver, 2 receivers, blocks with 1 and 2 copies")
    print(
        f"{'copies':<6} {'records/s':>10} {'secs':>6} | "
        f"{'CPU s / M records: drv py':>25} {'drv JVM':>7} {'others':>6} {'all':>6}"
    )
    per_million = 1e6 / (messages // 2 * 2)
    rates: dict[int, float] = {}
    totals: dict[int, float] = {}
    for run in result.copies_runs:
        rates[run.copies] = messages // 2 * 2 / run.seconds
        cpu = run.cpu
        totals[run.copies] = (cpu.driver_python_s + cpu.driver_jvm_s + cpu.spark_others_s) * per_million
        print(
            f"{run.copies:<6} {rates[run.copies]:>10,.0f} {run.seconds:>6.1f} | "
            f"{cpu.driver_python_s * per_million:>25.2f} {cpu.driver_jvm_s * per_million:>7.2f} "
            f"{cpu.spark_others_s * per_million:>6.2f} {totals[run.copies]:>6.2f}"
        )
    if {1, 2} <= rates.keys():
        print(
            f"2 copies / 1 copy: records/s {rates[2] / rates[1]:.2f}, "
            f"CPU per M records (all processes) {totals[2] / totals[1]:.2f}"
        )


def spread_text(rates: list[float]) -> str:
    mean = statistics.mean(rates)
    runs = ", ".join(f"{rate:,.0f}" for rate in rates)
    return f"{mean:,.0f} records/s (mean of {len(rates)}: {runs}; spread {spread_pct(rates):.1f}%)"


def spread_pct(rates: list[float]) -> float:
    """max - min in % of the mean; 0 for one run."""
    return (max(rates) - min(rates)) / statistics.mean(rates) * 100


def print_status_page(result: PlacementResult, messages: int) -> None:
    """Status page off against on: records/s, driver Python CPU, the page's response times."""
    if not result.ui_runs:
        return
    off = [result.warm, *(run for run in result.ui_runs if not run.ui)]
    on = [run for run in result.ui_runs if run.ui]
    off_rates = [messages / run.seconds for run in off]
    on_rates = [messages / run.seconds for run in on]
    difference = (statistics.mean(on_rates) / statistics.mean(off_rates) - 1) * 100
    noise = max(spread_pct(off_rates), spread_pct(on_rates))
    verdict = "within noise" if abs(difference) <= noise else "NOT within noise"
    print(
        f"status page (off: the warm run + {len(off) - 1} off round(s); on: {len(on)} round(s), "
        "page + /metrics loaded every second):"
    )
    print(f"  status page off: {spread_text(off_rates)}")
    print(f"  status page on:  {spread_text(on_rates)}")
    print(f"  difference on vs off: {difference:+.1f}%; {verdict} (larger spread {noise:.1f}%)")
    per_million = 1e6 / messages
    for label, runs in (("off", off), ("on", on)):
        cpu = [(run.cpu.driver_python_s - run.client_cpu_s) * per_million for run in runs]
        client = sum(run.client_cpu_s for run in runs) / len(runs)
        taken_out = f"; page client's own CPU {client:.2f} s per run taken out" if label == "on" else ""
        print(
            f"  drv py CPU s / M records, page {label + ':':<4} mean {statistics.mean(cpu):.2f} "
            f"(runs: {', '.join(f'{value:.2f}' for value in cpu)}{taken_out})"
        )
    for what, times in (
        ("/", [ms for run in on for ms in run.page_ms]),
        ("/metrics", [ms for run in on for ms in run.metrics_ms]),
    ):
        if times:
            print(
                f"  {what} while running: {len(times)} loads, median {statistics.median(times):.0f} ms, "
                f"max {max(times):.0f} ms"
            )
        else:
            print(f"  {what} while running: no load completed (runs shorter than 1 s)")


def ratio_line(label: str, value: float, goal: str, met: bool) -> str:
    return f"{label:<58} {value:>6.2f}   goal {goal}: {'met' if met else 'NOT MET'}"


def print_ratios(executors: PlacementResult, driver: PlacementResult) -> None:
    print("\n== executors / driver")
    for label, e, d in (("warm", executors.warm, driver.warm), ("cold", executors.cold, driver.cold)):
        # Same --messages in both, so records/s and CPU per record divide as seconds and CPU.
        rate = d.seconds / e.seconds
        python = e.cpu.driver_python_s / d.cpu.driver_python_s
        both = (e.cpu.driver_python_s + e.cpu.driver_jvm_s) / (d.cpu.driver_python_s + d.cpu.driver_jvm_s)
        print(ratio_line(f"{label}: records/s", rate, ">= 0.8", rate >= 0.8))
        print(ratio_line(f"{label}: driver Python CPU per M records", python, "<= 0.2", python <= 0.2))
        print(f"{label}: (information) driver Python + JVM CPU per M records     {both:>6.2f}")


def print_hosts_ratio(hosts: PlacementResult, local: PlacementResult) -> None:
    """The several-hosts cluster against local-cluster, both executor placement: what blocks
    fetched across hosts and private block directories cost (information, no goal)."""
    print("\n== executors on two hosts / executors on local-cluster")
    for label, h, c in (("warm", hosts.warm, local.warm), ("cold", hosts.cold, local.cold)):
        print(f"{label}: records/s {c.seconds / h.seconds:>6.2f}")
    p99 = percentile(hosts.latencies_ms, 99), percentile(local.latencies_ms, 99)
    print(f"latency p99: {p99[0]:,.0f} ms on hosts, {p99[1]:,.0f} ms on local-cluster")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--placement",
        default="both",
        help="driver, executors (on local-cluster), hosts (executors on the several-hosts cluster, "
        "root), comma-separated; both: driver,executors; all: the three",
    )
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--latency-rate", type=int, default=5000, help="msg/s in the latency run")
    parser.add_argument("--latency-seconds", type=float, default=15.0)
    parser.add_argument("--empty-batches", type=int, default=10)
    parser.add_argument(
        "--ui-rounds",
        type=int,
        default=1,
        help="status page rounds: warm runs with the page off, then on, N times each (0 skips them)",
    )
    parser.add_argument(
        "--replication",
        action="store_true",
        help="in executor placements, also WAL-off runs of two receivers with blocks of 1 and 2 copies",
    )
    parser.add_argument("--master", default="local[2]", help="master of the driver placement")
    parser.add_argument(
        "--cluster-master", default="local-cluster[2,2,1024]", help="master of the executor placement"
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting for both placements (repeatable), e.g. spark.locality.wait=0",
    )
    args = parser.parse_args()
    if args.ui_rounds < 0:
        parser.error("--ui-rounds must be 0 or more")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    # Executors (and the driver's Python workers) run this interpreter, which has the package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    wanted_names = {
        "both": ("driver", "executors"),
        "all": ("driver", "executors", "hosts"),
    }.get(args.placement, tuple(name.strip() for name in args.placement.split(",")))
    if not set(wanted_names) <= {"driver", "executors", "hosts"}:
        parser.error(f"--placement {args.placement!r}: choose from driver, executors, hosts, both, all")
    print(f"load average (1/5/15 min) at start: {load_text(os.getloadavg())} on {os.cpu_count()} CPUs")
    if args.conf:
        print(f"extra Spark settings: {', '.join(args.conf)}")

    results: list[PlacementResult] = []
    with (
        tempfile.TemporaryDirectory(prefix="pipeline-bench-") as work_dir,
        LocalCluster(Path(work_dir) / "cluster") as cluster,
        contextlib.ExitStack() as stack,
    ):
        work = Path(work_dir)
        targets = [Target("driver", args.master), Target("executors", args.cluster_master)]
        if "hosts" in wanted_names:
            hosts = stack.enter_context(
                LocalSparkHosts(work / "spark-hosts", hosts=2, cores=HOST_CORES, memory_mb=1024)
            )
            backend = hosts_backend(hosts)
            targets.append(
                Target(
                    "hosts",
                    backend.master,
                    tuple(backend.conf),
                    executors=len(hosts.hosts),
                    processes=lambda: [pid for host in hosts.hosts for pid in host.processes()],
                )
            )
        placements = [target for target in targets if target.name in wanted_names]
        cluster.create_topic("raw", partitions=args.partitions)
        produce_backlog(cluster, "raw", args.partitions, args.messages, args.size)
        for target in placements:
            placement = target.name
            backlogs = [f"bench-{placement}", f"warm-{placement}"]
            backlogs += [topic for topic, _ in ui_topics(placement, args.ui_rounds)]
            halves = [t for copies in copies_of(target, args) for t in copies_topics(placement, copies)]
            for topic in (f"latency-{placement}", *backlogs, *halves):
                cluster.create_topic(topic, partitions=args.partitions)
            for topic in backlogs:
                produce_backlog(cluster, topic, args.partitions, args.messages, args.size)
            for topic in halves:
                produce_backlog(cluster, topic, args.partitions, args.messages // 2, args.size)
        raw_s = raw_consume(cluster, "raw", args.partitions, args.messages)
        for target in placements:
            print(f"running placement {target.name} on {target.master} ...", flush=True)
            results.append(run_placement(target, cluster, args, work))

    raw_rate = args.messages / raw_s
    print(f"\n(a) raw confluent-kafka consume: {raw_rate:,.0f} records/s ({raw_s:.1f} s)")
    for result in results:
        print_placement(result, args.messages, raw_rate, args)
        print_status_page(result, args.messages)
        print_copies(result, args.messages)
    by_placement = {result.placement: result for result in results}
    if {"executors", "driver"} <= by_placement.keys():
        print_ratios(by_placement["executors"], by_placement["driver"])
    if {"executors", "hosts"} <= by_placement.keys():
        print_hosts_ratio(by_placement["hosts"], by_placement["executors"])
    print(f"\nload average (1/5/15 min) at the end: {load_text(os.getloadavg())}")

    problems = [
        f"{result.placement} {run}: {problem}"
        for result in results
        for run, found in (
            ("cold throughput run", result.cold.problems),
            ("latency run", result.latency_problems),
            ("warm throughput run", result.warm.problems),
            *(
                (f"status page {'on' if run.ui else 'off'} run {i // 2 + 1}", run.problems)
                for i, run in enumerate(result.ui_runs)
            ),
            *((f"{run.copies}-copy run", run.problems) for run in result.copies_runs),
        )
        for problem in found
    ]
    if problems:
        print("FAILED: records lost or duplicated, the figures above are not valid:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        raise SystemExit(1)
    runs = sum(3 + len(result.ui_runs) + len(result.copies_runs) for result in results)
    print(f"delivery: every record exactly once in all {runs} streaming runs")


if __name__ == "__main__":
    main()

"""Ours against what a user would run instead: Spark's own JVM Kafka sources, a plain consumer and
Kafka's own consumer tool, on one topic, in one run.

    python benchmarks/peers.py [--messages 6000000] [--partitions 4] [--size 100] [--repeat 3]
        [--master local[2]] [--readers a,b,i,j,c,d,e,f,g,h] [--latency-rate 5000] [--latency-seconds 30]
        [--secure [MECHANISM]]

On a real local ZooKeeper + Kafka 3.9 (LocalCluster's default), one topic of ``--messages``
records of ``--size`` bytes on ``--partitions`` partitions is produced once; every reader reads all
of it from offset 0 (each with a group, checkpoint or assignment of its own), timed from its start
until every record was counted:

(a) Structured Streaming with Spark's JVM Kafka source (``spark-sql-kafka-0-10_2.13`` 4.2.0 in
    ``spark.jars``): ``CAST(value AS STRING)`` into the noop sink, ``trigger(availableNow=True)``,
    from ``start()`` until the query terminates; counted: the query's ``numInputRows`` summed over
    its progress updates.
(b) the same query with an Arrow-optimized Python UDF ``len(value)`` per record
    (``@udf(useArrow=True)``), summed per micro-batch in ``foreachBatch``; the sum must be
    ``messages x size`` too. Needs pyarrow and pandas (``pip install -e .[bench]``): skipped, with
    a message, without them.
(i) Structured Streaming with this project's source, ``format("reliable-kafka")``
    (``reliable_kafka.sql``, pyspark 4.2+: a Python data source reading Arrow record batches),
    the query of (a) otherwise: a consumer group of its own per repeat (so it starts from the
    earliest offsets), whose offsets it commits after each batch. Needs pyarrow.
(j) the query of (b) on (i)'s source. Needs pyarrow and pandas, as (b).
(c) Spark's JVM direct DStream (``spark-streaming-kafka-0-10_2.13`` 4.2.0):
    benchmarks/jvm/DirectKafkaCount.java as a ``spark-submit`` app on ``--master``, through
    direct_bench's ``jvm_direct_runs``, its batches counting records by reading them.
(d) ``KafkaUtils.createStream``, receiver write-ahead log on, ``foreachRDD(rdd.count())``
    (pipeline_bench's ``pipeline_throughput``); (e) the same with the write-ahead log off.
(f) ``KafkaUtils.createDirectStream``, ``foreachRDD(rdd.count())`` (direct_bench's).
(s) with ``--secure [MECHANISM]`` (default SCRAM-SHA-512; SSL: client certificates): (d) over
    SASL_SSL to a secured local cluster (``LocalCluster(secure=True)``, the same backlog produced
    to it; ZooKeeper over SASL), logged in as its granted user; it takes its turn after (d), and
    the ratio (s)/(d) is the cost of TLS to the whole application (the secured broker's own CPU is
    not counted, as no broker's is; ``receiver_bench.py --secure`` prints it).
(g) a plain confluent-kafka consumer, receiver_bench's fair baseline (the receiver's librdkafka
    settings, consume batches of 10,000, each value taken): in this process, no Spark.
(h) Kafka's ``ConsumerPerformance`` (``kafka-consumer-perf-test``) of Kafka 3.9's tools, a JVM of
    its own: the machine's consume ceiling. Its figure is its own window (after the JVM's start,
    group join included); its CPU is the whole JVM's, start-up included.

The readers take turns within each repeat (a, b, i, j, d, e, f, g, h), ``--repeat`` times, on one
SparkContext (``--master``, receivers in executor placement as Spark places them). (c) is the one
exception: a spark-submit app is a JVM of its own, so it runs after the other readers, with this
process's SparkContext stopped, one app reading the topic ``--repeat`` times in a row (a fresh
JVM per repeat would make every repeat cold). "cold" is each reader's first repeat, which also
pays for what runs once per process: (a)'s the SparkSession and Spark's first jobs, (b)'s the
Arrow workers' first imports, (d)'s the receivers' first launch, (c)'s its fresh JVM (JIT, class
loading; its own start-up is outside the window). "warm" is the median of the other repeats, with
their min-max spread; ratios compare warm medians (cold ones with ``--repeat 1``).

CPU seconds per million records are the whole application's over the reader's window: this Python
process, the driver JVM and the live processes under it (the Python workers; with ``local[N]``
the executors are the driver JVM), from proc_cpu.py; for (c) its JVM's own (every thread; it has
no Python); for (g) this process; for (h) the tool's JVM.

Latency (``--latency-rate`` msg/s for ``--latency-seconds``, 0 skips it), after the repeats, on
fresh topics: (a)'s source with a 1 s processing-time trigger, each micro-batch's values collected
in ``foreachBatch``, and (d) with 1 s batches (pipeline_bench's latency run). A record's latency
runs from the stamp taken before its ``produce`` to the moment its batch's ``collect()`` returned;
p50, p99 and max over every record.

Delivery: each reader's count must equal the records produced, and for (c), (d), (e), (f) the
batches' offset ranges must cover each partition's offsets exactly once (direct_bench's and
pipeline_bench's checks); (a)'s query must end at each partition's last offset. A reader that
fails its check has its figures printed as VOID, and the run exits 1 after the table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from direct_bench import direct_throughput, jvm_direct_runs
from percentiles import percentile
from pipeline_bench import (
    latency_and_empty_batches,
    per_partition,
    pipeline_throughput,
    produce_backlog,
    steady_producer,
)
from proc_cpu import CpuMeter, driver_jvm_pid
from receiver_bench import plain_consumer
from spark_kafka_jars import direct_kafka_count_jar, sql_kafka_jars

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.distribution import kafka_classpath, kafka_distribution
from reliable_kafka.local.java import find_java
from reliable_kafka.local.secured import MECHANISMS, Mechanism
from reliable_kafka.util.worker_python import DAEMON_MODULE, DAEMON_MODULE_KEY

# The tools are not in the broker's jars since Kafka 3.7: the tests fetch them once with mvn.
from tests.kafka.kafka_tools import _tools_libs

READERS: dict[str, str] = {
    "a": "SSS JVM source -> noop",
    "b": "SSS + Arrow UDF len(value)",
    "i": "reliable-kafka SSS -> noop",
    "j": "reliable-kafka SSS + Arrow UDF",
    "c": "JVM direct DStream",
    "d": "createStream, WAL on",
    "s": "createStream, WAL on, TLS",
    "e": "createStream, WAL off",
    "f": "createDirectStream",
    "g": "plain confluent-kafka",
    "h": "Kafka ConsumerPerformance",
}
OURS = ("d", "e", "f")
PEERS = ("a", "b", "c")
# The reliable-kafka source (i, j) over Spark's JVM source (a, b) in the same query.
SQL_PAIRS = (("i", "a"), ("j", "b"))
# Every reader but (c), in the order they take turns within a repeat.
IN_TURN = ("a", "b", "i", "j", "d", "s", "e", "f", "g", "h")
# Structured Streaming queries: (a) and (b) on Spark's JVM source, (i) and (j) on ours.
QUERIES = {
    "a": ("kafka", False),
    "b": ("kafka", True),
    "i": ("reliable-kafka", False),
    "j": ("reliable-kafka", True),
}
# (s) runs only with --secure, which adds it (and (d), its baseline).
DEFAULT_READERS = tuple(name for name in READERS if name != "s")
PLAIN_BATCH = 10_000
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
_WAIT_S = 1800


@dataclass(frozen=True)
class Run:
    """One reader's read of the whole topic."""

    reader: str
    repeat: int
    seconds: float
    records: int
    cpu_s: float | None = None  # the whole application's; None where not measurable
    problems: tuple[str, ...] = ()
    # The queries' (a, b, i, j) split of ``seconds``: from start() to the first batch's trigger,
    # and the batches' own time (Spark's triggerExecution, summed).
    first_batch_s: float | None = None
    batches_s: float | None = None

    @property
    def rate(self) -> float:
        return self.records / self.seconds


@dataclass(frozen=True)
class Summary:
    """A reader's runs: cold (its first), warm (the median of the rest, with min and max)."""

    reader: str
    cold: float
    warm: float | None
    warm_min: float | None
    warm_max: float | None
    cpu_per_million: float | None  # warm runs' median, cold's when there is no warm run
    void: bool

    @property
    def best_known(self) -> float:
        """The warm figure, or the cold one of a single-repeat run: what ratios compare."""
        return self.cold if self.warm is None else self.warm


def summarize(runs: Sequence[Run]) -> list[Summary]:
    """One summary per reader, in READERS' order; a reader with any delivery problem is void."""
    summaries = []
    for reader in READERS:
        mine = sorted((run for run in runs if run.reader == reader), key=lambda run: run.repeat)
        if not mine:
            continue
        warm_runs = mine[1:]
        rates = [run.rate for run in warm_runs]
        cpu_runs = warm_runs or mine[:1]
        cpus = [run.cpu_s / run.records * 1e6 for run in cpu_runs if run.cpu_s is not None]
        summaries.append(
            Summary(
                reader=reader,
                cold=mine[0].rate,
                warm=statistics.median(rates) if rates else None,
                warm_min=min(rates) if rates else None,
                warm_max=max(rates) if rates else None,
                cpu_per_million=statistics.median(cpus) if cpus else None,
                void=any(run.problems for run in mine),
            )
        )
    return summaries


def _figure(value: float | None, void: bool, spec: str) -> str:
    if void:
        return "VOID"
    return "-" if value is None else format(value, spec)


def table_lines(summaries: Sequence[Summary]) -> list[str]:
    """The table: records/s cold, warm median and spread, CPU s per million records."""
    lines = [
        f"{'reader':<31} {'cold rec/s':>11} {'warm rec/s':>11} {'warm min-max':>23} {'CPU s/M':>8}",
    ]
    for s in summaries:
        spread = "-"
        if s.void:
            spread = "VOID"
        elif s.warm_min is not None and s.warm_max is not None:
            spread = f"{s.warm_min:,.0f}-{s.warm_max:,.0f}"
        lines.append(
            f"({s.reader}) {READERS[s.reader]:<27} {_figure(s.cold, s.void, ',.0f'):>11} "
            f"{_figure(s.warm, s.void, ',.0f'):>11} {spread:>23} "
            f"{_figure(s.cpu_per_million, s.void, '.2f'):>8}"
        )
    return lines


def ratio_lines(summaries: Sequence[Summary]) -> list[str]:
    """Ours (d, e, f) over the peers (a, b, c): records/s (warm, cold when there is no warm run)
    and CPU per million records; VOID when either side failed its delivery check."""
    by_reader = {s.reader: s for s in summaries}
    lines = []
    for ours in OURS:
        if ours not in by_reader:
            continue
        mine = by_reader[ours]
        parts = []
        for peer in PEERS:
            if peer not in by_reader:
                continue
            other = by_reader[peer]
            if mine.void or other.void:
                parts.append(f"/ ({peer}) VOID")
                continue
            rate = mine.best_known / other.best_known
            cpu = "-"
            if mine.cpu_per_million is not None and other.cpu_per_million:
                cpu = f"{mine.cpu_per_million / other.cpu_per_million:.2f}"
            parts.append(f"/ ({peer}) records/s {rate:.2f} CPU/M {cpu}")
        if parts:
            lines.append(f"({ours}) " + "; ".join(parts))
    for ours, peer in SQL_PAIRS:
        if ours in by_reader and peer in by_reader:
            lines.append(_pair_ratio(by_reader[ours], by_reader[peer]))
    if "s" in by_reader and "d" in by_reader:
        lines.append(_tls_ratio(by_reader["s"], by_reader["d"]))
    return lines


def batch_rate_lines(runs: Sequence[Run]) -> list[str]:
    """(i) over (a), (j) over (b) within their batches (warm medians, cold with one repeat), and
    each query's start: what a long-running query sees, and what each new query pays once."""

    def medians(reader: str) -> tuple[float, float] | None:
        mine = sorted((r for r in runs if r.reader == reader and r.batches_s), key=lambda r: r.repeat)
        if not mine or any(r.problems for r in mine) or mine[0].first_batch_s is None:
            return None
        chosen = mine[1:] or mine
        return (
            statistics.median(r.records / (r.batches_s or 1) for r in chosen),
            statistics.median(r.first_batch_s or 0.0 for r in chosen),
        )

    lines = []
    for ours, peer in SQL_PAIRS:
        mine, other = medians(ours), medians(peer)
        if mine is None or other is None:
            continue
        lines.append(
            f"({ours}) / ({peer}) in batches: records/s {mine[0] / other[0]:.2f} "
            f"({mine[0]:,.0f} / {other[0]:,.0f}); first batch after {mine[1]:.1f} s / {other[1]:.1f} s"
        )
    return lines


def _pair_ratio(ours: Summary, peer: Summary) -> str:
    """(i) over (a), (j) over (b): the same query on our source and on Spark's."""
    if ours.void or peer.void:
        return f"({ours.reader}) / ({peer.reader}) VOID"
    cpu = "-"
    if ours.cpu_per_million is not None and peer.cpu_per_million:
        cpu = f"{ours.cpu_per_million / peer.cpu_per_million:.2f}"
    return f"({ours.reader}) / ({peer.reader}) records/s {ours.best_known / peer.best_known:.2f} CPU/M {cpu}"


def _tls_ratio(secured: Summary, plain: Summary) -> str:
    """(s) over (d): what TLS costs the same createStream."""
    if secured.void or plain.void:
        return "(s) / (d) VOID"
    cpu = "-"
    if secured.cpu_per_million is not None and plain.cpu_per_million:
        cpu = f"{secured.cpu_per_million / plain.cpu_per_million:.2f}"
    return f"(s) / (d) records/s {secured.best_known / plain.best_known:.2f} CPU/M {cpu}"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=6_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100, help="bytes per value (at least 24)")
    parser.add_argument("--repeat", type=int, default=3, help="reads of each reader; the first is cold")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--readers",
        default=",".join(DEFAULT_READERS),
        help="a subset of a-j, comma-separated (default: all); s comes with --secure",
    )
    parser.add_argument("--latency-rate", type=int, default=5000, help="msg/s of the latency runs")
    parser.add_argument(
        "--latency-seconds", type=float, default=30.0, help="length of the latency runs (0: none)"
    )
    parser.add_argument(
        "--secure",
        nargs="?",
        const="SCRAM-SHA-512",
        choices=MECHANISMS,
        help="(s): (d) over TLS to a secured cluster with this mechanism (default SCRAM-SHA-512; "
        "SSL: mTLS), beside (d) in the same run",
    )
    args = parser.parse_args(list(argv))
    readers = [name.strip().lower() for name in args.readers.split(",") if name.strip()]
    if unknown := sorted(set(readers) - set(DEFAULT_READERS)):
        parser.error(f"--readers: unknown {', '.join(unknown)}; choose from {', '.join(DEFAULT_READERS)}")
    if args.secure:
        readers += ["d", "s"]  # (d) is (s)'s baseline
    args.readers = tuple(name for name in READERS if name in readers)
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    # Each value starts with a nanosecond stamp (pipeline_bench's make_value): (b)'s sum of
    # lengths is messages x size only when the stamp fits.
    if args.size < 24:
        parser.error("--size must be at least 24 bytes")
    return args


def arrow_missing() -> str | None:
    """Why (b) cannot run here, or None."""
    missing = []
    for module in ("pyarrow", "pandas"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if not missing:
        return None
    return f"{' and '.join(missing)} not installed (pip install -e '.[bench]')"


def whole_application(cpu: Any) -> float:
    return float(cpu.driver_python_s + cpu.driver_jvm_s + cpu.spark_others_s)


def kafka_source(spark: Any, cluster: LocalCluster, topic: str) -> Any:
    """The whole topic through Spark's JVM Kafka source, from its earliest offsets: (a), (b) and
    (a)'s latency run read the same way."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def reliable_kafka_source(spark: Any, cluster: LocalCluster, topic: str, group: str) -> Any:
    """The whole topic through ``format("reliable-kafka")``: a new group, so from the earliest offsets."""
    return (
        spark.readStream.format("reliable-kafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("group.id", group)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def structured_streaming(
    reader: str,
    spark: Any,
    cluster: LocalCluster,
    topic: str,
    args: argparse.Namespace,
    checkpoint: Path,
    repeat: int,
) -> Run:
    """(a), (b), (i) or (j) (``QUERIES``): one availableNow query over the whole topic. From the
    second repeat on, (b)'s and (j)'s Python workers are started (pyarrow and pandas imported) by
    a tiny job before the window."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - pyspark.sql only for the queries
    from pyspark.sql.types import LongType  # noqa: PLC0415

    source, arrow_udf = QUERIES[reader]
    warm = repeat > 0
    frame = (
        kafka_source(spark, cluster, topic)
        if source == "kafka"
        else reliable_kafka_source(spark, cluster, topic, f"peers-{reader}-{repeat}")
    )
    values = frame.selectExpr("CAST(value AS STRING) AS value")
    lengths: list[int] = []
    if arrow_udf:

        @F.udf(returnType=LongType(), useArrow=True)
        def value_length(value: str) -> int:
            return len(value)

        def add_batch(batch: Any, _batch_id: int) -> None:
            total = batch.select(F.sum(value_length("value"))).first()[0]
            lengths.append(total or 0)

        writer = values.writeStream.foreachBatch(add_batch)
        if warm:
            # The DStream readers between two of (b)'s repeats use the workers in between: without
            # this, every repeat of (b) would time starting Arrow workers anew, not reading.
            sample = spark.range(0, 4, 1, 2).selectExpr("CAST(id AS STRING) AS value")
            sample.select(F.sum(value_length("value"))).first()
    else:
        writer = values.writeStream.format("noop")
    meter = CpuMeter(driver_jvm_pid())
    meter.start()
    started_at = time.time()
    query = writer.trigger(availableNow=True).option("checkpointLocation", str(checkpoint)).start()
    finished = query.awaitTermination(_WAIT_S)
    cpu = meter.stop()
    if not finished:
        query.stop()
        raise SystemExit(f"FAILED: ({reader}) did not end in {_WAIT_S} s")
    progress = query.recentProgress
    counted = sum(int(p["numInputRows"]) for p in progress)
    problems = []
    if counted != args.messages:
        problems.append(f"{counted:,} rows counted for {args.messages:,} produced")
    ends = [p["sources"][0]["endOffset"] for p in progress if p["sources"]]
    end = json.loads(ends[-1]).get(topic, {}) if ends else {}
    expected = {str(p): n for p, n in enumerate(per_partition(args.messages, args.partitions))}
    if end != expected:
        problems.append(f"the query ended at offsets {end}, the topic's end is {expected}")
    if arrow_udf and sum(lengths) != args.messages * args.size:
        problems.append(f"len(value) summed to {sum(lengths):,}, {args.messages * args.size:,} produced")
    first_batch_s, batches_s = query_split(progress, started_at)
    return Run(
        reader,
        0,
        cpu.wall_s,
        args.messages,
        whole_application(cpu),
        tuple(problems),
        first_batch_s,
        batches_s,
    )


def query_split(progress: Sequence[Mapping[str, Any]], started_at: float) -> tuple[float | None, float]:
    """From ``start()`` (``started_at``, epoch seconds) to the first batch's trigger, and the
    batches' own seconds (each progress's triggerExecution). A Python data source's query spends
    the first part starting the Python process of its driver-side reader."""
    batches_s = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    if not progress:
        return None, batches_s
    first = datetime.fromisoformat(progress[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    return max(0.0, first - started_at), batches_s


def consumer_performance(cluster: LocalCluster, topic: str, args: argparse.Namespace, repeat: int) -> Run:
    """(h): Kafka 3.9's ConsumerPerformance; its own figures, parsed from its output."""
    classpath = f"{_tools_libs(kafka_distribution('3.9'))}/*:{kafka_classpath('3.9')}"
    command = [
        *(find_java(), "-cp", classpath, CONSUMER_PERFORMANCE),
        *("--bootstrap-server", cluster.bootstrap_servers, "--topic", topic),
        *("--messages", str(args.messages), "--group", f"peers-perf-{repeat}", "--timeout", "60000"),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=_WAIT_S, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"FAILED: {CONSUMER_PERFORMANCE} exited {done.returncode}:\n{done.stderr[-3000:]}")
    figures = parse_consumer_performance(done.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    consumed = int(figures["data.consumed.in.nMsg"])
    rate = float(figures["nMsg.sec"])
    problems = () if consumed == args.messages else (f"{consumed:,} records for {args.messages:,} produced",)
    print(
        f"  (h) its JVM ran {wall:.1f} s; group join {figures.get('rebalance.time.ms', '?')} ms, "
        f"fetch rate without it {float(figures.get('fetch.nMsg.sec', 'nan')):,.0f} records/s",
        flush=True,
    )
    # Its own window; the whole process took ``wall`` (JVM start-up included).
    seconds = consumed / rate if rate > 0 else wall
    return Run("h", repeat, seconds, args.messages, cpu, problems)


def parse_consumer_performance(output: str) -> dict[str, str]:
    """ConsumerPerformance's header line and the line of figures after it, by column name."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for at, line in enumerate(lines[:-1]):
        if line.startswith("start.time"):
            names = [name.strip() for name in line.split(",")]
            values = [value.strip() for value in lines[at + 1].split(",")]
            return dict(zip(names, values, strict=False))
    raise SystemExit(f"FAILED: no figures in {CONSUMER_PERFORMANCE}'s output:\n{output[-2000:]}")


def plain(cluster: LocalCluster, topic: str, args: argparse.Namespace, repeat: int) -> Run:
    """(g): this process only; it counts until it has every record (a lost one never ends it)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    seconds = plain_consumer(cluster, topic, args.partitions, args.messages, PLAIN_BATCH)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run("g", repeat, seconds, args.messages, cpu)


@dataclass(frozen=True)
class Latency:
    """Per-record latencies of one reader at a fixed produce rate, and its delivery problems."""

    reader: str
    latencies_ms: tuple[float, ...]
    problems: tuple[str, ...] = ()


def latency_line(latency: Latency) -> str:
    name = f"({latency.reader}) {READERS[latency.reader]:<27}"
    if latency.problems:
        return f"{name} VOID ({'; '.join(latency.problems)})"
    values = list(latency.latencies_ms)
    if len(values) < 2:
        return f"{name} - ({len(values)} records)"
    return (
        f"{name} p50 {percentile(values, 50):,.0f} ms, p99 {percentile(values, 99):,.0f} ms, "
        f"max {max(values):,.0f} ms ({len(values):,} records)"
    )


def structured_streaming_latency(
    spark: Any, cluster: LocalCluster, topic: str, args: argparse.Namespace, checkpoint: Path
) -> Latency:
    """(a)'s source with a 1 s processing-time trigger at ``--latency-rate``: each batch's records
    collected to the driver in ``foreachBatch``, measured as pipeline_bench measures (d)'s: from
    the stamp taken before ``produce`` to the moment the batch's ``collect()`` returned."""
    latencies_ms: list[float] = []
    lock = threading.Lock()

    def measure(batch: Any, _batch_id: int) -> None:
        values = [row[0] for row in batch.selectExpr("CAST(value AS STRING)").collect()]
        now = time.time_ns()
        with lock:
            latencies_ms.extend((now - int(value.split(":", 1)[0])) / 1e6 for value in values)

    query = (
        kafka_source(spark, cluster, topic)
        .writeStream.foreachBatch(measure)
        .trigger(processingTime="1 second")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        # As for (d): the query is running before the first record's clock starts.
        time.sleep(3)
        sent = steady_producer(
            cluster, topic, args.partitions, args.latency_rate, args.latency_seconds, args.size
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with lock:
                if len(latencies_ms) >= sent:
                    break
            time.sleep(0.2)
        # One trigger more: a repeated batch would show as more records than were sent.
        time.sleep(2)
    finally:
        query.stop()
    with lock:
        found = tuple(latencies_ms)
    problems = () if len(found) == sent else (f"{len(found):,} records measured for {sent:,} produced",)
    return Latency("a", found, problems)


def latency_runs(
    spark: Any, sc: SparkContext, cluster: LocalCluster, args: argparse.Namespace, work: Path
) -> list[Latency]:
    """(a) and (d), each on a fresh topic, at ``--latency-rate`` for ``--latency-seconds``."""
    results = []
    if "a" in args.readers:
        cluster.create_topic("latency-a", args.partitions)
        results.append(structured_streaming_latency(spark, cluster, "latency-a", args, work / "cp-latency-a"))
        print(latency_line(results[-1]), flush=True)
    if "d" in args.readers:
        cluster.create_topic("latency-d", args.partitions)
        # pipeline_bench's run, without its empty batches after the records.
        quiet = argparse.Namespace(**{**vars(args), "empty_batches": 0})
        found, _, problems = latency_and_empty_batches(sc, cluster, "latency-d", quiet, work / "cp-latency-d")
        results.append(Latency("d", tuple(found), tuple(problems)))
        print(latency_line(results[-1]), flush=True)
    return results


def spark_conf(args: argparse.Namespace, sql_jars: list[Path]) -> SparkConf:
    conf = (
        SparkConf()
        .setMaster(args.master)
        .setAppName("peers")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.streaming.receiver.placement", "executors")
        .set("spark.streaming.receiver.writeAheadLog.enable", "true")
        .set(DAEMON_MODULE_KEY, DAEMON_MODULE)
        # Every progress update of a long query, for (a)'s and (b)'s counts (the default keeps 100).
        .set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    )
    if sql_jars:
        conf.set("spark.jars", ",".join(str(jar) for jar in sql_jars))
    return conf


def run_in_turn(
    sc: SparkContext,
    cluster: LocalCluster,
    topic: str,
    args: argparse.Namespace,
    work: Path,
    skip_b: bool,
    secured: SecuredLogin | None = None,
) -> tuple[list[Run], list[Latency]]:
    """Every reader but (c), taking turns, ``--repeat`` times; then the latency runs. (s) reads
    ``topic`` of the ``secured`` cluster."""
    spark = None
    if set(QUERIES) & set(args.readers):
        from pyspark.sql import SparkSession  # noqa: PLC0415 - only for the queries

        spark = SparkSession(sc)
    if {"i", "j"} & set(args.readers):
        import reliable_kafka.sql  # noqa: PLC0415 - pyspark 4.2+ only

        reliable_kafka.sql.register(spark)
    runs: list[Run] = []
    for repeat in range(args.repeat):
        for reader in IN_TURN:
            if reader not in args.readers or (reader in ("b", "j") and skip_b):
                continue
            checkpoint = work / f"cp-{repeat}-{reader}"
            if reader == "s":
                assert secured is not None, "(s) runs with --secure only"
                # A SecuredLogin stands in for the cluster: all that createStream reads of one.
                login: Any = secured
                run = receiver_run(sc, login, topic, args, checkpoint, repeat, wal=True)
            else:
                run = read_once(reader, repeat, spark, sc, cluster, topic, args, checkpoint)
            run = replace(run, repeat=repeat)
            runs.append(run)
            print_run(run)
    return runs, latency_runs(spark, sc, cluster, args, work) if args.latency_seconds > 0 else []


class SecuredLogin:
    """What pipeline_bench's createStream reads of a cluster, for a secured one: its ZooKeeper and
    the granted user's logins (Kafka with ``mechanism``, ZooKeeper over SASL), never its admin's."""

    def __init__(self, cluster: LocalCluster, mechanism: Mechanism) -> None:
        settings = cluster.secured
        self.zookeeper_connect = settings.zookeeper_connect
        self._params = {**settings.kafka_params(mechanism), **settings.zookeeper_params()}

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        return {**self._params, **overrides}


def read_once(
    reader: str,
    repeat: int,
    spark: Any,
    sc: SparkContext,
    cluster: LocalCluster,
    topic: str,
    args: argparse.Namespace,
    checkpoint: Path,
) -> Run:
    if reader in QUERIES:
        return structured_streaming(reader, spark, cluster, topic, args, checkpoint, repeat)
    if reader in ("d", "e"):
        return receiver_run(sc, cluster, topic, args, checkpoint, repeat, wal=reader == "d")
    if reader == "f":
        return direct_run(sc, cluster, topic, args, checkpoint)
    if reader == "g":
        return plain(cluster, topic, args, repeat)
    return consumer_performance(cluster, topic, args, repeat)


def receiver_run(
    sc: SparkContext,
    cluster: LocalCluster,
    topic: str,
    args: argparse.Namespace,
    checkpoint: Path,
    repeat: int,
    wal: bool,
) -> Run:
    """(d) or (e): a consumer group of its own, so that it reads the topic from its start."""
    reader = "d" if wal else "e"
    result = pipeline_throughput(
        sc, cluster, topic, args, checkpoint, group=f"peers-{reader}-{repeat}", wal=wal
    )
    return Run(
        reader, repeat, result.seconds, args.messages, whole_application(result.cpu), tuple(result.problems)
    )


def direct_run(
    sc: SparkContext, cluster: LocalCluster, topic: str, args: argparse.Namespace, checkpoint: Path
) -> Run:
    figures, problems = direct_throughput(sc, cluster, topic, args, checkpoint)
    cpu = figures.driver_python_s + figures.driver_jvm_s + figures.spark_others_s
    return Run("f", 0, figures.seconds, args.messages, cpu, tuple(problems))


def jvm_direct(
    cluster: LocalCluster, topic: str, args: argparse.Namespace, work: Path, app_jar: Path
) -> list[Run]:
    """(c): one spark-submit app reading the topic ``--repeat`` times in a row."""
    runs = []
    for figures, problems, jvm_up_s in jvm_direct_runs(app_jar, cluster, [topic] * args.repeat, args, work):
        run = Run("c", figures.round, figures.seconds, args.messages, figures.driver_jvm_s, tuple(problems))
        runs.append(run)
        print_run(run, f" (its JVM up {jvm_up_s:.1f} s at ssc.start())")
    return runs


def print_run(run: Run, note: str = "") -> None:
    verdict = "; ".join(run.problems) if run.problems else "delivery ok"
    cpu = "" if run.cpu_s is None else f", {run.cpu_s:.1f} CPU s"
    if run.first_batch_s is not None and run.batches_s:
        note = (
            f"; first batch {run.first_batch_s:.1f} s after start(), batches {run.batches_s:.1f} s "
            f"({run.records / run.batches_s:,.0f} records/s){note}"
        )
    print(
        f"repeat {run.repeat} ({run.reader}) {READERS[run.reader]:<27} {run.rate:>12,.0f} records/s "
        f"({run.seconds:.1f} s{cpu}); {verdict}{note}",
        flush=True,
    )


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    # Executors' Python workers run this interpreter, which has the package (and pyarrow for (b)).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    skip_b = False
    if {"b", "j"} & set(args.readers) and (why := arrow_missing()):
        print(f"(b) and (j) skipped: {why}")
        skip_b = True
    # Fetched and compiled before any broker starts: no mvn or javac inside a window.
    sql_jars = sql_kafka_jars() if {"a", "b"} & set(args.readers) else []
    app_jar = direct_kafka_count_jar() if "c" in args.readers else None
    print(
        f"{args.messages:,} x {args.size} B on {args.partitions} partitions, {args.master}, "
        f"{args.repeat} repeat(s), readers {','.join(args.readers)}; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs",
        flush=True,
    )
    runs: list[Run] = []
    latencies: list[Latency] = []
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="peers-") as tmp,
        LocalCluster(Path(tmp) / "cluster") as cluster,
        LocalCluster(Path(tmp) / "secured", secure=True) if args.secure else nullcontext() as secured,
    ):
        work = Path(tmp)
        topic = "peers"
        for each in (cluster, secured) if secured is not None else (cluster,):
            # Produced as the cluster's own admin (secured: over mTLS): the set-up is not measured.
            each.create_topic(topic, args.partitions)
            produce_backlog(each, topic, args.partitions, args.messages, args.size)
        login = SecuredLogin(secured, args.secure) if secured is not None else None
        if set(args.readers) - {"c"}:
            sc = SparkContext(conf=spark_conf(args, sql_jars))
            sc.setLogLevel("ERROR")
            try:
                turns, latencies = run_in_turn(sc, cluster, topic, args, work, skip_b, login)
                runs += turns
            finally:
                sc.stop()
        if app_jar is not None:
            runs += jvm_direct(cluster, topic, args, work, app_jar)
    summaries = summarize(runs)
    print(f"\n{args.messages:,} x {args.size} B on {args.partitions} partitions, {args.master}")
    print("\n".join(table_lines(summaries)))
    print("ratios of ours to the peers, and (s) to (d) (warm medians; cold with --repeat 1):")
    print("\n".join(ratio_lines(summaries)) or "(none: ours or the peers were not run)")
    if in_batches := batch_rate_lines(runs):
        print("the queries within their batches, and from start() to the first batch (medians):")
        print("\n".join(in_batches))
    if latencies:
        print(
            f"latency at {args.latency_rate:,} msg/s for {args.latency_seconds:g} s "
            "((a): 1 s processing-time trigger; (d): 1 s batches):"
        )
        print("\n".join(latency_line(latency) for latency in latencies))
    print(
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
        f"the whole run took {time.monotonic() - started:.0f} s"
    )
    problems = [f"({run.reader}) repeat {run.repeat}: {p}" for run in runs for p in run.problems]
    problems += [f"({latency.reader}) latency run: {p}" for latency in latencies for p in latency.problems]
    for problem in problems:
        print(f"DELIVERY: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

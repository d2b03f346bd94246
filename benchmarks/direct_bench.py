"""A direct stream beside ``createStream`` (WAL on), Spark's JVM direct stream and a plain consumer,
on one backlog shape.

    python benchmarks/direct_bench.py [--messages 300000] [--partitions 4] [--size 100]
        [--master local-cluster[2,2,1024]] [--rounds 2]

On a real local ZooKeeper + Kafka 3.9 (LocalCluster's default) and a real Spark (``--master``;
receivers in executor placement). Each round, on fresh topics of ``--messages`` records: (a) a
plain confluent-kafka consumer reads them all (the machine's consume figure); (b)
``KafkaUtils.createStream`` with the receiver WAL on and checkpointing, ``foreachRDD(rdd.count())``,
from ``ssc.start()`` until every record is counted; (c) ``KafkaUtils.createDirectStream`` with
``foreachRDD(rdd.count())`` over the same shape, no rate limit, from ``ssc.start()`` until every
record is counted. The readers run in turns within a round; the first round is cold (Spark's and
the Python workers' start-up counted), later rounds warm.

Then (d), Spark's own JVM direct stream (``spark-streaming-kafka-0-10_2.13`` 4.2.0, fetched once
with mvn), as a small JVM app: benchmarks/jvm/DirectKafkaCount.java, compiled with javac on first
use (benchmarks/spark_kafka_jars.py), run by pyspark's ``spark-submit --class DirectKafkaCount`` on
the same master after the other readers, with this process's SparkContext stopped. One
spark-submit reads a fresh topic of the same shape per round, in turn, each in a StreamingContext
of its own on the app's one SparkContext. A spark-submit app is a fresh JVM with fresh executors,
so its first round is cold the way no other reader's is (JIT, class loading, the executors' first
Kafka consumers, all inside the window) and only its later rounds are warm; the JVM's uptime at
each ``ssc.start()`` is printed beside (start-up outside the window: the app waits for its
executors first). Its ``foreachRDD`` counts each batch's records by reading them: a KafkaRDD's
own ``count()`` sums its offset ranges and reads nothing. Its window is the others': from its
``ssc.start()`` until the batch that counted the last record.

It prints, per reader and round, records/s and CPU seconds per million records of the driver (this
Python process, "drv py"; (d) has none) and of the driver JVM (PySpark's, from /proc; for (d) the
spark-submit JVM's own, from its OperatingSystemMXBean; with a ``local[N]`` master the executor
runs inside it), then the ratios of (c) to (b), (d) and (a) for the last round.

Delivery is checked for the three streams: each direct stream's batch ranges (``offsetRanges()``,
``HasOffsetRanges`` in the JVM) must cover each partition's produced offsets exactly once and its
batches count every record; ``createStream``'s blocks the same way (pipeline_bench's check). A run
that lost or repeated a record exits 1 after the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline_bench import (
    BATCH_S,
    cluster_executors,
    new_context,
    per_partition,
    pipeline_throughput,
    produce_backlog,
    raw_consume,
)
from proc_cpu import CpuMeter, driver_jvm_pid
from spark_kafka_jars import APP_CLASS, PYSPARK_HOME, SPARK_SUBMIT, direct_kafka_count_jar, kafka010_jars

from reliable_kafka import KafkaUtils
from reliable_kafka.local import LocalCluster


@dataclass(frozen=True)
class Figures:
    reader: str
    round: int
    seconds: float
    records: int
    driver_python_s: float = float("nan")
    driver_jvm_s: float = float("nan")
    # Live processes under the driver JVM (Python workers; executor JVMs off local[N]): see proc_cpu.
    spark_others_s: float = float("nan")

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    def per_million(self, cpu_s: float) -> float:
        return cpu_s / self.records * 1e6


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--master", default="local-cluster[2,2,1024]")
    parser.add_argument("--rounds", type=int, default=2, help="the first is cold")
    return parser.parse_args(argv)


def direct_throughput(
    sc: SparkContext, cluster: LocalCluster, topic: str, args: argparse.Namespace, checkpoint: Path
) -> tuple[Figures, list[str]]:
    ssc = new_context(sc, checkpoint)
    stream = KafkaUtils.createDirectStream(
        ssc, [topic], {"metadata.broker.list": cluster.bootstrap_servers, "auto.offset.reset": "smallest"}
    )
    lock = threading.Lock()
    counted: list[int] = []
    spans: dict[int, list[tuple[int, int]]] = {}
    done = threading.Event()

    def count(rdd: Any) -> None:
        n = rdd.count()
        with lock:
            counted.append(n)
            for r in rdd.offsetRanges():
                if r.count():
                    spans.setdefault(r.partition, []).append((r.fromOffset, r.untilOffset))
            if sum(counted) >= args.messages:
                done.set()

    stream.foreachRDD(count)
    meter = CpuMeter(driver_jvm_pid())
    meter.start()
    ssc.start()
    finished = done.wait(1800)
    cpu = meter.stop()
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    if not finished:
        raise SystemExit(f"FAILED: only {sum(counted):,} of {args.messages:,} records counted in 30 minutes")
    figures = Figures(
        "direct", 0, cpu.wall_s, args.messages, cpu.driver_python_s, cpu.driver_jvm_s, cpu.spark_others_s
    )
    return figures, range_problems("direct", spans, sum(counted), args)


def jvm_direct_runs(
    app_jar: Path, cluster: LocalCluster, topics: list[str], args: argparse.Namespace, work: Path
) -> list[tuple[Figures, list[str], float]]:
    """Spark's JVM direct stream over ``topics`` in turn: benchmarks/jvm/DirectKafkaCount.java in
    one spark-submit JVM. Per topic, its figures, its delivery problems and the JVM's uptime at
    its ``ssc.start()``."""
    report = work / "jvm-direct.jsonl"
    command = [
        *(str(SPARK_SUBMIT), "--class", APP_CLASS, "--master", args.master),
        *("--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false"),
        *("--jars", ",".join(str(jar) for jar in kafka010_jars()), str(app_jar)),
        *(cluster.bootstrap_servers, ",".join(topics), str(args.partitions), str(args.messages)),
        *(str(round(BATCH_S * 1000)), str(report), str(cluster_executors(args.master))),
    ]
    # pyspark's own Spark, whatever SPARK_HOME this shell has.
    env = {**os.environ, "SPARK_HOME": str(PYSPARK_HOME)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False, env=env)
    lines = report.read_text().splitlines() if report.is_file() else []
    if done.returncode != 0 or len(lines) != len(topics):
        raise SystemExit(
            f"FAILED: spark-submit --class {APP_CLASS} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    results = []
    for line in lines:
        run = json.loads(line)
        if not run["finished"]:
            raise SystemExit(
                f"FAILED: Spark's JVM direct stream counted only {run['records']:,} of "
                f"{args.messages:,} records in 30 minutes"
            )
        spans: dict[int, list[tuple[int, int]]] = {}
        for partition, start, until in run["ranges"]:
            spans.setdefault(partition, []).append((start, until))
        figures = Figures(
            "jvm-direct", len(results), run["seconds"], args.messages, driver_jvm_s=run["driver_jvm_s"]
        )
        results.append((figures, range_problems("jvm-direct", spans, run["records"], args), run["jvm_up_s"]))
    return results


def range_problems(
    reader: str, spans: dict[int, list[tuple[int, int]]], counted: int, args: argparse.Namespace
) -> list[str]:
    """The batches' ``(from, until)`` spans per partition must cover its produced offsets exactly
    once, and the batches must have counted every record."""
    problems = []
    for partition, produced in enumerate(per_partition(args.messages, args.partitions)):
        expected = 0
        for start, until in sorted(spans.get(partition, [])):
            if start != expected:
                problems.append(f"{reader}: partition {partition} jumps from {expected} to {start}")
            expected = until
        if expected != produced:
            problems.append(f"{reader}: partition {partition} read to {expected}, {produced} produced")
    if counted != args.messages:
        problems.append(f"{reader}: {counted:,} records counted for {args.messages:,} produced")
    return problems


def backlog(cluster: LocalCluster, reader: str, round_: int, args: argparse.Namespace) -> str:
    """A fresh topic of the run's shape, its records produced."""
    topic = f"direct-bench-{round_}-{reader}"
    cluster.create_topic(topic, args.partitions)
    produce_backlog(cluster, topic, args.partitions, args.messages, args.size)
    return topic


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    app_jar = direct_kafka_count_jar()  # before any broker starts: no javac, no run
    conf = (
        SparkConf()
        .setMaster(args.master)
        .setAppName("direct-bench")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.streaming.receiver.placement", "executors")
        .set("spark.streaming.receiver.writeAheadLog.enable", "true")
        .set("spark.python.daemon.module", "reliable_kafka.util.worker_daemon")
    )
    results: list[Figures] = []
    problems: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="direct-bench-") as tmp,
        LocalCluster(Path(tmp) / "cluster") as cluster,
    ):
        work = Path(tmp)
        sc = SparkContext(conf=conf)
        sc.setLogLevel("ERROR")
        try:
            for round_ in range(args.rounds):
                for reader in ("plain", "createStream", "direct"):
                    topic = backlog(cluster, reader, round_, args)
                    if reader == "plain":
                        seconds = raw_consume(cluster, topic, args.partitions, args.messages)
                        results.append(Figures(reader, round_, seconds, args.messages))
                    elif reader == "createStream":
                        run = pipeline_throughput(sc, cluster, topic, args, work / f"cp-{round_}-{reader}")
                        problems += [f"createStream: {p}" for p in run.problems]
                        results.append(
                            Figures(
                                reader,
                                round_,
                                run.seconds,
                                args.messages,
                                run.cpu.driver_python_s,
                                run.cpu.driver_jvm_s,
                            )
                        )
                    else:
                        figures, found = direct_throughput(sc, cluster, topic, args, work / f"cp-{round_}")
                        problems += found
                        results.append(dataclasses.replace(figures, round=round_))
                    latest = results[-1]
                    print(f"round {round_} {reader:<13} {latest.rate:>12,.0f} records/s", flush=True)
        finally:
            sc.stop()
        # Spark's JVM direct stream last, one spark-submit app over a topic per round, with this
        # process's SparkContext stopped (no idle executors of ours beside its own).
        topics = [backlog(cluster, "jvm", round_, args) for round_ in range(args.rounds)]
        for figures, found, jvm_up_s in jvm_direct_runs(app_jar, cluster, topics, args, work):
            problems += found
            results.append(figures)
            print(
                f"round {figures.round} {'jvm-direct':<13} {figures.rate:>12,.0f} records/s "
                f"(its JVM up {jvm_up_s:.1f} s at ssc.start())",
                flush=True,
            )
    print_table(results, args)
    for problem in problems:
        print(f"DELIVERY: {problem}")
    return 1 if problems else 0


def print_table(results: list[Figures], args: argparse.Namespace) -> None:
    print(f"\n{args.messages:,} x {args.size} B on {args.partitions} partitions, {args.master}")
    print(f"{'reader':<13} {'round':>5} {'records/s':>12} {'drv py s/M':>11} {'drv JVM s/M':>12}")
    for f in results:
        print(
            f"{f.reader:<13} {('cold' if f.round == 0 else 'warm'):>5} {f.rate:>12,.0f} "
            f"{f.per_million(f.driver_python_s):>11.2f} {f.per_million(f.driver_jvm_s):>12.2f}"
        )
    last = max(f.round for f in results)
    warm = {f.reader: f for f in results if f.round == last}
    direct, receiver, plain, jvm = warm["direct"], warm["createStream"], warm["plain"], warm["jvm-direct"]
    print(
        f"ratios ({'warm' if last else 'cold'}): direct / createStream records/s "
        f"{direct.rate / receiver.rate:.2f}, driver Python CPU per million "
        f"{direct.driver_python_s / receiver.driver_python_s:.2f}; direct / Spark's JVM direct stream "
        f"records/s {direct.rate / jvm.rate:.2f}, driver JVM CPU per million "
        f"{direct.driver_jvm_s / jvm.driver_jvm_s:.2f}; direct / plain consumer "
        f"{direct.rate / plain.rate:.2f}"
    )
    loads = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average {loads} (a busy machine makes these noisy: run twice)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Counts words from Kafka with no data loss: the README's main command.

    python -m reliable_kafka.examples.wordcount [--seconds 20] [--rate 50] [--partitions 2] [--kafka 3.9]

Starts a real ZooKeeper and Kafka (3.9 by default, or 0.9) on 127.0.0.1 (``LocalCluster``), creates
a topic, and produces
lines of words for ``--seconds`` while a Spark streaming job counts them, as pyspark's
``kafka_wordcount.py`` did: ``createStream -> flatMap(split) -> map((w, 1)) -> reduceByKey -> pprint``,
with the receiver write-ahead log and checkpointing on. After every batch it prints the offsets
the receiver committed to ZooKeeper (``/consumers/<group>/offsets/<topic>/<partition>``). Then it
waits for the receiver to have stored everything, stops gracefully and checks that the words
counted are the words produced: exit status 0 if so, 1 if not.
"""

from __future__ import annotations

import argparse
import logging
import operator
import os
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from pyspark import RDD, SparkConf, SparkContext, StorageLevel

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.examples.line_producer import LineProducer
from reliable_kafka.kafka.zk_paths import TopicAndPartition, offset_path
from reliable_kafka.local import LocalCluster

logger = logging.getLogger("reliable_kafka.examples.wordcount")

TOPIC = "words"
GROUP = "wordcount"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m reliable_kafka.examples.wordcount", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to produce (default 20)")
    parser.add_argument("--rate", type=int, default=50, help="lines produced per second (default 50)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the topic (default 2)")
    parser.add_argument("--batch-duration", type=float, default=1.0, help="seconds per batch (default 1)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    # Not 4: its KRaft broker has no ZooKeeper, and this receiver keeps its group in ZooKeeper.
    parser.add_argument("--kafka", default="3.9", choices=("3.9", "0.9"), help="broker version (default 3.9)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log at INFO")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rate <= 0 or args.partitions < 1 or args.batch_duration <= 0:
        parser.error("--seconds, --rate, --partitions and --batch-duration must be positive")
    return args


class CommittedOffsets:
    """Reads what the receiver committed, as Kafka 0.8's ConsumerOffsetChecker would."""

    def __init__(self, zookeeper: KazooClient, topic: str, partitions: int) -> None:
        self._zookeeper = zookeeper
        self._paths = {p: offset_path(GROUP, TopicAndPartition(topic, p)) for p in range(partitions)}

    def read(self) -> dict[int, int]:
        offsets: dict[int, int] = {}
        for partition, path in self._paths.items():
            try:
                data, _ = self._zookeeper.get(path)
            except NoNodeError:
                continue
            offsets[partition] = int(data.decode("utf-8"))
        return offsets

    def describe(self) -> str:
        offsets = self.read()
        parts = [f"{p}={offsets.get(p, '-')}" for p in self._paths]
        return f"committed offsets /consumers/{GROUP}/offsets/{TOPIC}/<partition>: {' '.join(parts)}"


class WordTally:
    """Words counted over all batches so far (foreachRDD runs on the driver)."""

    def __init__(self, offsets: CommittedOffsets) -> None:
        self._offsets = offsets
        self._lock = threading.Lock()
        self.total = 0

    def add_batch(self, time: datetime, rdd: RDD[tuple[str, int]]) -> None:
        batch_total = sum(count for _, count in rdd.collect())
        with self._lock:
            self.total += batch_total
            total = self.total
        print(f"[{time:%H:%M:%S}] {batch_total} words this batch, {total} so far; {self._offsets.describe()}")
        print(flush=True)


def build_stream(ssc: StreamingContext, cluster: LocalCluster, tally: WordTally) -> None:
    lines = KafkaUtils.createStream(
        ssc,
        cluster.zookeeper_connect,
        GROUP,
        {TOPIC: 1},
        # Read the topic from its start: the producer may be ahead of the receiver's first rebalance.
        {"auto.offset.reset": "smallest", **cluster.client_config()},
        # The write-ahead log is the second copy; pyspark's default (_2) would only warn about it.
        storageLevel=StorageLevel.MEMORY_AND_DISK,
    ).map(lambda kv: kv[1])
    counts = lines.flatMap(lambda line: line.split(" ")).map(lambda word: (word, 1)).reduceByKey(operator.add)
    counts.cache()  # pprint and the tally read the same batch; compute it once
    counts.pprint()
    counts.foreachRDD(tally.add_batch)


def wait_until_stored(offsets: CommittedOffsets, end_offsets: dict[int, int], timeout_s: float) -> bool:
    """Committed == log end: the receiver has stored (block manager + WAL) every message."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        committed = offsets.read()
        if all(committed.get(p, 0) >= end for p, end in end_offsets.items()):
            return True
        time.sleep(0.2)
    return False


def spark_conf(master: str) -> SparkConf:
    return (
        SparkConf()
        .setMaster(master)
        .setAppName("KafkaWordCount")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.streaming.receiver.writeAheadLog.enable", "true")
        .set("spark.streaming.blockInterval", "200ms")
    )


def run(args: argparse.Namespace, work_dir: Path) -> bool:
    with LocalCluster(work_dir / "cluster", kafka=args.kafka) as cluster:
        print(
            f"Kafka {cluster.distribution.version} at {cluster.bootstrap_servers}, "
            f"ZooKeeper at {cluster.zookeeper_connect}",
            flush=True,
        )
        cluster.create_topic(TOPIC, partitions=args.partitions)
        zookeeper = cluster.zookeeper_client()
        sc = SparkContext(conf=spark_conf(args.master))
        sc.setLogLevel("ERROR")
        try:
            offsets = CommittedOffsets(zookeeper, TOPIC, args.partitions)
            tally = WordTally(offsets)
            ssc = StreamingContext(sc, args.batch_duration)
            ssc.checkpoint(str(work_dir / "checkpoint"))
            build_stream(ssc, cluster, tally)
            producer = LineProducer(cluster.client_config(), TOPIC, args.seconds, args.rate)
            ssc.start()
            producer.start()
            producer.join()
            stored = wait_until_stored(offsets, producer.end_offsets, timeout_s=60)
            if not stored:
                logger.error("the receiver did not store every message within 60 s")
            ssc.stop(stopSparkContext=False, stopGraceFully=True)
            print(
                f"produced {producer.words_acked} words in {producer.lines_acked} lines; "
                f"counted {tally.total} words; {offsets.describe()}"
            )
            return stored and not producer.errors and tally.total == producer.words_acked
        finally:
            sc.stop()
            zookeeper.stop()
            zookeeper.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Connection noise from the servers starting and stopping under kazoo's feet.
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    # Spark's Python workers must run this interpreter, which has this package installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="kafka-wordcount-") as work_dir:
        ok = run(args, Path(work_dir))
    print("OK: every word produced was counted" if ok else "FAILED: counted words != produced words")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

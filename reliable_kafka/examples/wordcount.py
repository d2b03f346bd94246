"""Counts words from Kafka with no data loss: the README's main command.

    python -m reliable_kafka.examples.wordcount [--duration 20] [--rate 50] [--partitions 2] [--kafka 3.9]
    python -m reliable_kafka.examples.wordcount --secure [--mechanism SCRAM-SHA-512] [--kafka 3.9]
    python -m reliable_kafka.examples.wordcount [--zookeeper HOST:2181] --bootstrap-servers HOST:9092 \
        [--topic words] [--duration 20] [--master yarn] [--checkpoint hdfs://NAMENODE:8020/wordcount]

Starts a real ZooKeeper and Kafka (3.9 by default, 0.9, or 4 without ZooKeeper) on 127.0.0.1
(``LocalCluster``), or, with ``--bootstrap-servers``, uses that cluster instead (creating the topic
if it is missing, and starting the group at the topic's end, so that only this run's words count).
With a ZooKeeper (``--zookeeper``, or a local 3.9 or 0.9) the receiver's group and its offsets live
there, as Kafka 0.8's consumers kept them; without one (Kafka 4) in Kafka's group coordinator.
Brokers older than 0.10 are recognised from their ZooKeeper registrations.
With ``--secure`` the local cluster is a secured one (``LocalCluster(secure=True)``: TLS, SASL,
client certificates, ACLs, a SASL ZooKeeper) and the job, the producer and the offset reader log
in as its user ``alice`` with ``--mechanism`` (``SSL``: her client certificate; 0.9 has only that).
It produces lines of words for ``--duration`` seconds while a Spark streaming job counts them, as pyspark's
``kafka_wordcount.py`` did: ``createStream -> flatMap(split) -> map((w, 1)) -> reduceByKey -> pprint``,
with the receiver write-ahead log and checkpointing on. After every batch it prints the batch's
time (what the job counted: the data received up to it) beside the clock time of the print, how
many tasks read the batch's input, and the offsets
the receiver committed (``/consumers/<group>/offsets/<topic>/<partition>`` in ZooKeeper, or the
group's offsets in Kafka). Then it
waits for the receiver to have stored everything, stops gracefully and checks that the words
counted are the words produced: exit status 0 if so, 1 if not. Its last lines also give the
batches' processing time (p50, p99 and max over the batches with records) and their largest
scheduling delay, from the streaming listener's batch-completed events: whether the job kept up.
"""

from __future__ import annotations

import argparse
import logging
import math
import operator
import os
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from pyspark import RDD, SparkConf, SparkContext
from tenacity import retry, retry_if_exception, stop_after_delay, wait_fixed

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.examples.line_producer import LineProducer
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.broker_discovery import broker_registrations, legacy_protocol_config
from reliable_kafka.kafka.client.zk.paths import offset_path
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.store import REFUSED
from reliable_kafka.local import LocalCluster
from reliable_kafka.local.cluster import create_topic_in_zookeeper
from reliable_kafka.local.secured import MECHANISMS
from reliable_kafka.scheduler.listener import StreamingListener, StreamingListenerBatchCompleted
from reliable_kafka.util.kafka_errors import kafka_error_of
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from reliable_kafka.util.librdkafka_log import with_logger

logger = logging.getLogger("reliable_kafka.examples.wordcount")

TOPIC = "words"
GROUP = "wordcount"
# Spark's console log for the driver this example starts (see the file).
_LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
# The options that point the example at an existing cluster also come from the environment.
ENV_PREFIX = "RELIABLE_KAFKA_EXAMPLE_"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m reliable_kafka.examples.wordcount", description=__doc__.split("\n\n")[0]
    )
    env = os.environ.get
    parser.add_argument(
        "--duration",
        "--seconds",
        dest="seconds",
        type=float,
        default=float(env(f"{ENV_PREFIX}DURATION", "20")),
        help=f"seconds to produce for (default 20; ${ENV_PREFIX}DURATION)",
    )
    parser.add_argument(
        "--zookeeper",
        default=env(f"{ENV_PREFIX}ZOOKEEPER"),
        help=(
            "ZooKeeper of an existing cluster, host:port[,...], where the group lives; without it, "
            f"the group lives in Kafka (${ENV_PREFIX}ZOOKEEPER)"
        ),
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=env(f"{ENV_PREFIX}BOOTSTRAP_SERVERS"),
        help=f"brokers of an existing cluster, host:port[,...]: start none (${ENV_PREFIX}BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--topic",
        default=env(f"{ENV_PREFIX}TOPIC", TOPIC),
        help=f"topic to produce to and count, created if missing (default {TOPIC}; ${ENV_PREFIX}TOPIC)",
    )
    parser.add_argument("--rate", type=int, default=50, help="lines produced per second (default 50)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the topic (default 2)")
    parser.add_argument("--batch-duration", type=float, default=1.0, help="seconds per batch (default 1)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--checkpoint",
        help=(
            "checkpoint directory, where the receiver's write-ahead log lives too (default: a temporary "
            "directory); on a cluster, storage every executor reaches, e.g. hdfs://namenode:8020/wordcount"
        ),
    )
    parser.add_argument(
        "--kafka", default="3.9", choices=("3.9", "4", "0.9"), help="local broker version (default 3.9)"
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="start a secured local cluster (TLS, SASL, client certificates, ACLs, a SASL ZooKeeper)",
    )
    parser.add_argument(
        "--mechanism",
        choices=MECHANISMS,
        help="with --secure: how the job logs in (default SCRAM-SHA-512; SSL, a client certificate, on 0.9)",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="log at INFO")
    args = parser.parse_args(argv)
    if args.secure and args.bootstrap_servers:
        parser.error(
            "--secure starts a secured local cluster; for an existing one, put its security settings "
            "in kafkaParams as the README's 'Secured clusters' shows"
        )
    if args.mechanism and not args.secure:
        parser.error("--mechanism goes with --secure")
    if args.secure and args.mechanism is None:
        args.mechanism = "SSL" if args.kafka == "0.9" else "SCRAM-SHA-512"
    if args.seconds <= 0 or args.rate <= 0 or args.partitions < 1 or args.batch_duration <= 0:
        parser.error("--duration, --rate, --partitions and --batch-duration must be positive")
    if args.zookeeper and not args.bootstrap_servers:
        # The producer needs the brokers: a ZooKeeper alone would quietly mix an existing cluster
        # with a local one.
        parser.error("--zookeeper needs --bootstrap-servers (the brokers of the same cluster)")
    return args


class CommittedOffsets(Protocol):
    """What the receiver's group committed, per partition."""

    def read(self) -> dict[int, int]: ...

    def describe(self) -> str: ...

    def start_at(self, offsets: Mapping[int, int]) -> None:
        """Commit ``offsets`` for the group before its receiver starts."""


class ZooKeeperOffsets:
    """Reads what the receiver committed to ZooKeeper, as Kafka 0.8's ConsumerOffsetChecker would."""

    def __init__(self, zookeeper: KazooClient, topic: str, partitions: int) -> None:
        self._zookeeper = zookeeper
        self._topic = topic
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
        return f"committed offsets /consumers/{GROUP}/offsets/{self._topic}/<partition>: {' '.join(parts)}"

    def start_at(self, offsets: Mapping[int, int]) -> None:
        for partition, offset in offsets.items():
            self._zookeeper.ensure_path(self._paths[partition])
            self._zookeeper.set(self._paths[partition], str(offset).encode("utf-8"))


class KafkaOffsets:
    """Reads what the receiver committed to Kafka's group coordinator, as
    ``kafka-consumer-groups --describe`` would: the project's Kafka offset store with a consumer
    of the group that never joins it (it retries a coordinator that is still loading)."""

    def __init__(self, client_config: Mapping[str, str | int | bool], topic: str, partitions: int) -> None:
        self._topic = topic
        self._partitions = [TopicAndPartition(topic, p) for p in range(partitions)]
        self._store = KafkaOffsetStore.standalone(client_config, GROUP, owns=lambda _tp: True)

    def read(self) -> dict[int, int]:
        fetched = self._store.fetch(self._partitions)
        return {tp.partition: offset for tp, offset in fetched.items() if offset is not None}

    def describe(self) -> str:
        offsets = self.read()
        parts = [f"{tp.partition}={offsets.get(tp.partition, '-')}" for tp in self._partitions]
        return f"committed offsets of group {GROUP} in Kafka, {self._topic}/<partition>: {' '.join(parts)}"

    def start_at(self, offsets: Mapping[int, int]) -> None:
        results = self._store.commit({TopicAndPartition(self._topic, p): o for p, o in offsets.items()})
        refused = {str(tp): result.value for tp, result in results.items() if result in REFUSED}
        if refused:
            raise RuntimeError(f"group {GROUP} could not start at the log end: {refused}")

    def close(self) -> None:
        self._store.close()


class WordTally:
    """Words counted over all batches so far (foreachRDD runs on the driver)."""

    def __init__(self, offsets: CommittedOffsets) -> None:
        self._offsets = offsets
        self._lock = threading.Lock()
        self.total = 0
        # Tasks that read each batch's input, by batch time (note_input runs first in a batch).
        self._input_tasks: dict[datetime, int] = {}

    def note_input(self, time: datetime, rdd: RDD[tuple[bytes | None, str]]) -> None:
        # Partitions are known on the driver: no Spark job.
        with self._lock:
            self._input_tasks[time] = rdd.getNumPartitions()

    def add_batch(self, time: datetime, rdd: RDD[tuple[str, int]]) -> None:
        batch_total = sum(count for _, count in rdd.collect())
        with self._lock:
            self.total += batch_total
            total = self.total
            tasks = self._input_tasks.pop(time, None)
        read_by = "" if tasks is None else f" (input read by {tasks} task{'' if tasks == 1 else 's'})"
        # The batch time names the data (received up to then); the clock says when it got printed,
        # which is later by the batch's processing and any backlog of batches ahead of it.
        print(
            f"batch {time:%H:%M:%S} (printed at {datetime.now():%H:%M:%S}): {batch_total} words in this "
            f"batch{read_by}, {total} so far; {self._offsets.describe()}"
        )
        print(flush=True)


class BatchTimes(StreamingListener):
    """Each completed batch's processing time and scheduling delay, from the listener's events
    (what Spark's streaming tab shows): the job keeps up while batches take less than their
    interval, and then the scheduling delay stays bounded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._processing_ms: list[int] = []
        self._max_scheduling_delay_ms = 0
        self._batches = 0

    def on_batch_completed(self, event: StreamingListenerBatchCompleted) -> None:
        info = event.batch_info
        processing, scheduling = info.processing_delay_ms, info.scheduling_delay_ms
        with self._lock:
            self._batches += 1
            if scheduling is not None:
                self._max_scheduling_delay_ms = max(self._max_scheduling_delay_ms, scheduling)
            # Batches with records: the empty ones after the producer stops would pull p50 down.
            if processing is not None and info.num_records > 0:
                self._processing_ms.append(processing)

    def summary(self, interval_s: float) -> str:
        with self._lock:
            processing = sorted(self._processing_ms)
            batches, max_delay = self._batches, self._max_scheduling_delay_ms
        if not processing:
            return f"batches: {batches}, none with records"
        return (
            f"batches: {batches}, {len(processing)} with records; processing time p50 "
            f"{percentile(processing, 50)} ms, p99 {percentile(processing, 99)} ms, max {processing[-1]} ms "
            f"(interval {interval_s * 1000:.0f} ms); scheduling delay max {max_delay} ms"
        )


def percentile(ordered: list[int], p: int) -> int:
    """The inclusive ``p``-th percentile of sorted values (nearest rank)."""
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def build_stream(
    ssc: StreamingContext,
    zookeeper_connect: str | None,
    client_config: Mapping[str, str | int | bool],
    topic: str,
    tally: WordTally,
    *,
    zookeeper_params: Mapping[str, str] | None = None,
) -> None:
    """``zookeeper_params``: the group's ZooKeeper login (``zookeeper.sasl.*``), for the receiver
    only: ``client_config`` also goes to the producer, whose librdkafka knows no such keys."""
    messages = KafkaUtils.createStream(
        ssc,
        zookeeper_connect,
        GROUP,
        {topic: 1},
        # Without a committed offset, read the topic from its start: the producer may be ahead of
        # the receiver's first rebalance.
        {"auto.offset.reset": "smallest", **client_config, **(zookeeper_params or {})},
    )
    messages.foreachRDD(tally.note_input)
    lines = messages.map(lambda kv: kv[1])
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


def spark_conf(master: str, seconds: float) -> SparkConf:
    return (
        SparkConf()
        .setMaster(master)
        .setAppName("KafkaWordCount")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.streaming.receiver.writeAheadLog.enable", "true")
        .set("spark.streaming.blockInterval", "200ms")
        # A graceful stop waits for every batch up to the stop to be processed. On local[2] the
        # receiver holds one core and each batch's jobs share the other, so batches can fall
        # behind the clock for the whole run; Spark's default (10 batch durations, 10 s here)
        # then expires while the backlog drains, and the rest of the backlog has only
        # spark.streaming.stopTimeout more. The backlog is at most the run's batches: allow
        # that, plus a minute.
        .set("spark.streaming.gracefulStopTimeout", f"{int(seconds) + 60}s")
        .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_LOG4J2_CONFIG.as_uri()}")
    )


def ensure_topic(
    client_config: Mapping[str, str | int | bool],
    topic: str,
    partitions: int,
    legacy_zookeeper: KazooClient | None = None,
) -> int:
    """The partition count of ``topic`` on an existing cluster, creating it with ``partitions``
    partitions first if it is missing, and once every partition has a leader. Brokers before
    0.10.1 have no CreateTopics: with ``legacy_zookeeper`` the topic is written into ZooKeeper,
    as their own tools did."""
    admin = AdminClient(with_logger(dict(client_config)))
    # All topics, not list_topics(topic=...): asking for one by name auto-creates it on brokers
    # with auto.create.topics.enable, with the broker's partition count instead of ours.
    if topic not in admin.list_topics(timeout=30).topics:
        if legacy_zookeeper is not None:
            first_broker = min(broker_registrations(legacy_zookeeper), key=int)
            create_topic_in_zookeeper(legacy_zookeeper, topic, partitions, int(first_broker))
        else:
            create_topic_with_admin(admin, topic, partitions)
        print(f"created topic {topic} with {partitions} partitions", flush=True)
    deadline = time.monotonic() + 60
    while True:
        info = admin.list_topics(timeout=30).topics.get(topic)
        if info is not None and info.error is None and info.partitions:
            if all(p.leader >= 0 for p in info.partitions.values()) or time.monotonic() > deadline:
                return len(info.partitions)
        elif time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic!r} did not appear within 60 s")
        time.sleep(0.2)


def create_topic_with_admin(admin: AdminClient, topic: str, partitions: int) -> None:
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions)], request_timeout=30)[topic]
    try:
        future.result(timeout=60)
    except Exception as exc:
        error = kafka_error_of(exc)
        if error is None or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another creator won
            raise


def start_group_at_log_end(
    offsets: CommittedOffsets, client_config: Mapping[str, str | int | bool], topic: str, partitions: int
) -> None:
    """Commit each partition's log end for the example's group, so that the receiver reads only
    what this run produces: an existing topic may hold earlier runs' words, which would make the
    count differ from what was produced."""
    consumer = Consumer(with_logger({**client_config, "group.id": GROUP, "enable.auto.commit": False}))
    try:
        ends = {p: log_end(consumer, TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()
    offsets.start_at(ends)


# A topic just created on a KRaft broker has a leader in its metadata a moment before that
# leader answers for it.
_LEADERSHIP_SETTLING = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
)


def _leadership_settling(exc: BaseException) -> bool:
    error = kafka_error_of(exc) if isinstance(exc, KafkaException) else None
    return error is not None and (error.code() in _LEADERSHIP_SETTLING or error.retriable())


@retry(
    retry=retry_if_exception(_leadership_settling),
    stop=stop_after_delay(60),
    wait=wait_fixed(0.2),
    reraise=True,
)
def log_end(consumer: Consumer, partition: TopicPartition) -> int:
    return consumer.get_watermark_offsets(partition, timeout=30)[1]


def run(args: argparse.Namespace, work_dir: Path) -> bool:
    if args.bootstrap_servers:
        return run_on_existing_cluster(args, work_dir)
    with LocalCluster(work_dir / "cluster", kafka=args.kafka, secure=args.secure) as cluster:
        where = f"ZooKeeper at {cluster.zookeeper_connect}" if cluster.has_zookeeper else "no ZooKeeper"
        print(f"Kafka {cluster.distribution.version} at {cluster.bootstrap_servers}, {where}", flush=True)
        cluster.create_topic(args.topic, partitions=args.partitions)
        client_config: dict[str, str | int | bool] = dict(cluster.client_config())
        zookeeper_params: dict[str, str] = {}
        if args.secure:
            secured = cluster.secured
            client_config = dict(secured.kafka_params(args.mechanism))
            zookeeper_params = secured.zookeeper_params() if cluster.has_zookeeper else {}
            with_zookeeper = ", ZooKeeper over SASL (DIGEST-MD5)" if zookeeper_params else ""
            print(
                f"secured: the job logs in as alice over {client_config['security.protocol']} "
                f"({args.mechanism}) at {client_config['bootstrap.servers']}{with_zookeeper}",
                flush=True,
            )
        if not cluster.has_zookeeper:
            return count_words_in_kafka_group(args, work_dir, client_config, args.partitions)
        zookeeper = cluster.zookeeper_client()
        try:
            return count_words(
                args,
                work_dir,
                offsets=ZooKeeperOffsets(zookeeper, args.topic, args.partitions),
                zookeeper_connect=cluster.zookeeper_connect,
                client_config=client_config,
                partitions=args.partitions,
                zookeeper_params=zookeeper_params,
            )
        finally:
            stop_kazoo(zookeeper)


def run_on_existing_cluster(args: argparse.Namespace, work_dir: Path) -> bool:
    client_config: dict[str, str | int | bool] = {"bootstrap.servers": args.bootstrap_servers}
    where = f"ZooKeeper at {args.zookeeper}" if args.zookeeper else "its group in Kafka"
    print(f"Using the cluster at {args.bootstrap_servers}, {where}", flush=True)
    if not args.zookeeper:
        partitions = ensure_topic(client_config, args.topic, args.partitions)
        return count_words_in_kafka_group(args, work_dir, client_config, partitions, start_at_log_end=True)
    zookeeper = kazoo_client(args.zookeeper, timeout=10.0)
    zookeeper.start(timeout=15.0)
    try:
        # Brokers before 0.10 answer no ApiVersionRequest: their registrations say how to talk to them.
        legacy = legacy_protocol_config(zookeeper, client_config)
        client_config.update(legacy)
        partitions = ensure_topic(client_config, args.topic, args.partitions, zookeeper if legacy else None)
        offsets = ZooKeeperOffsets(zookeeper, args.topic, partitions)
        start_group_at_log_end(offsets, client_config, args.topic, partitions)
        return count_words(
            args,
            work_dir,
            offsets=offsets,
            zookeeper_connect=args.zookeeper,
            client_config=client_config,
            partitions=partitions,
        )
    finally:
        stop_kazoo(zookeeper)


def count_words_in_kafka_group(
    args: argparse.Namespace,
    work_dir: Path,
    client_config: Mapping[str, str | int | bool],
    partitions: int,
    *,
    start_at_log_end: bool = False,
) -> bool:
    offsets = KafkaOffsets(client_config, args.topic, partitions)
    try:
        if start_at_log_end:
            start_group_at_log_end(offsets, client_config, args.topic, partitions)
        return count_words(
            args,
            work_dir,
            offsets=offsets,
            zookeeper_connect=None,
            client_config=client_config,
            partitions=partitions,
        )
    finally:
        offsets.close()


def count_words(
    args: argparse.Namespace,
    work_dir: Path,
    *,
    offsets: CommittedOffsets,
    zookeeper_connect: str | None,
    client_config: Mapping[str, str | int | bool],
    partitions: int,
    zookeeper_params: Mapping[str, str] | None = None,
) -> bool:
    sc = SparkContext(conf=spark_conf(args.master, args.seconds))
    sc.setLogLevel("ERROR")
    try:
        tally = WordTally(offsets)
        batch_times = BatchTimes()
        ssc = StreamingContext(sc, args.batch_duration)
        ssc.addStreamingListener(batch_times)
        ssc.checkpoint(args.checkpoint or str(work_dir / "checkpoint"))
        build_stream(
            ssc, zookeeper_connect, client_config, args.topic, tally, zookeeper_params=zookeeper_params
        )
        producer = LineProducer(client_config, args.topic, args.seconds, args.rate)
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
        print(batch_times.summary(args.batch_duration), flush=True)
        return stored and not producer.errors and tally.total == producer.words_acked
    finally:
        sc.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Spark's Python workers must run this interpreter, which has this package installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.master.startswith("local"):
        # Every part of a local master runs on this machine: bind Spark to loopback, as the local
        # cluster is, rather than have Spark warn that the host name resolves to loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="kafka-wordcount-") as work_dir:
        ok = run(args, Path(work_dir))
    print("OK: every word produced was counted" if ok else "FAILED: counted words != produced words")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

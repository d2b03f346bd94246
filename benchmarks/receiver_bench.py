"""Receiver throughput against a plain consumer, on a local ZooKeeper + Kafka 3.9, LocalCluster's default.

    python benchmarks/receiver_bench.py [--messages 6000000] [--partitions 4] [--size 100] [--repeat 3]
    python benchmarks/receiver_bench.py --partitions 4,64,256 [--messages 2000000]   (the sweep)
    python benchmarks/receiver_bench.py --wal-url s3a://bucket/bench [--spark-conf FILE] [--messages 1000000]
    python benchmarks/receiver_bench.py --replication [--messages 2000000] [--repeat 3]
    python benchmarks/receiver_bench.py --secure [MECHANISM] [--kafka 3.9] [--messages 2000000] [--repeat 3]

With ``--replication`` only (r1) and (r2) run, alternating, the best of each counting: the reliable
receiver with the write-ahead log off, its blocks in an executor block store (as on an executor),
(r1) with MEMORY_AND_DISK_SER (one copy), (r2) with MEMORY_AND_DISK_SER_2, each block's second
copy kept by a peer's block server on another loopback address (127.0.0.2) before the block is
reported and its offsets committed. Both commit to ZooKeeper. The peer runs in this process, so
the CPU figure includes the peer's work of keeping the copy; printed: records/s, CPU per million
and the ratio (r2)/(r1).

With ``--secure`` (a mechanism of ``reliable_kafka.local.secured``; default SCRAM-SHA-512) only
(a) and (b) run, each over two transports in the same run, alternating which goes first: PLAINTEXT
to a plain local cluster and SASL_SSL with the mechanism (SSL: mTLS) to a secured one
(``LocalCluster(secure=True)``, logged in as its granted user), the same backlog produced to both.
(b) keeps its group and offsets in Kafka here (no ZooKeeper: a secured ZooKeeper's SASL would be
a second cost, and Kafka 4 has none). Printed: records/s, this process's CPU per million and the
broker's, and the ratio secured/PLAINTEXT of each: what TLS (and the SASL login) cost.

With ``--wal-url`` (a checkpoint-style URL: hdfs://, s3a://...; reached with the spark.hadoop.*
keys of ``--spark-conf``, a spark-defaults style properties file, see ``wal_url.py``) only (a),
(a'), (w) and (b) with ZooKeeper offsets run, (w) and (b) twice per run: with the write-ahead log
on local disk and at the URL, in alternating order. It prints each one's records/s, remote/local,
and the ratio to the plain consumer. A remote log writes each block as one whole object.

With several partition counts (the sweep), each count gets its own topic and only (a) and (b)
with ZooKeeper offsets run, interleaved, each run in a child process of its own (an allocator
keeps what a run freed, so runs in one process would hide each other's peaks). Each child
reports its records/s, CPU seconds, its peak RSS (the kernel's VmHWM), its RSS before the run
and its peak thread count (sampled every 20 ms, the sampler's own thread not counted): what a
receiver's memory and threads do as its partitions grow, beside a plain consumer's.

(a) a plain confluent-kafka consumer: one Consumer assigned to every partition, as a typical
    application reads. The baseline is fair: it runs with the very librdkafka configuration the
    receiver's consumers get (``KafkaParams.consumer_config``: ``fetch.queue.backoff.ms=20``, no
    auto commit, no partition EOF events), fetches the topic's metadata before assign() as they do
    (so neither waits out librdkafka's 500 ms offset-query timer), and does the least a real
    consumer does per record: it takes the record's value bytes. Consume batches of 200 (the
    receiver's) and of 10,000 are both tried; the faster counts.
(a') the same, with one consumer and one thread per partition, as the receiver reads; printed for
    comparison, the ratio is against (a) or (a'), whichever is faster.
(c) (a') whose threads read as the receiver's consumer threads do and nothing after it: with
    packed fetch (``reliable_kafka/kafka/client/packed_fetch.py``) the C extension takes each batch and
    packs it; without, confluent-kafka's Messages are packed in Python. What (b) costs beyond (c)
    is the block generator, the write-ahead log, the block store and the commits.
(w) the write-ahead log alone: the same number of records, packed as the receiver packs them, in
    blocks of 200,000 records (what a 200 ms block interval cuts at 1M records/s), written with
    an fsync per block from one thread: the disk's ceiling for (b), which writes them all.
(b) ReliableKafkaReceiver under a ReceiverSupervisor with the write-ahead log on (fsync per
    block) and offset commits after every stored block, once per offset store: ZooKeeper
    (offsets.storage=zookeeper), Kafka's group coordinator (offsets.storage=kafka) and both
    (dual.commit.enabled).
(p) (b) with ZooKeeper offsets and packed fetch turned off (``RELIABLE_KAFKA_PACKED_FETCH=0``):
    the receiver as it was before packed fetch, for comparison.
All read the same topic from offset 0, each after ``os.sync()`` (so that no run's fsyncs wait for
the writeback of what earlier runs wrote); each clock runs from start until the last message is
counted (a, c) or stored and reported (b, p), start-up included: the receiver's start (ZooKeeper
registration, rebalance, offsets: 0.1-0.2 s) and the store of its last block (up to a block
interval plus a WAL write) are fixed costs, which is why the default run is 6M records (a few
seconds) rather than a 1-second one they would dominate. The runs alternate (a), (a'), (c), (b)
per store, (p), ... ``--repeat`` times and the best of each counts, since other work on the
machine only ever slows a run down. Goal: (b) >= 0.8 x the faster of (a) and (a') for every store.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from proc_cpu import process_cpu_s

from reliable_kafka.kafka import ReliableKafkaReceiver, parse_kafka_params
from reliable_kafka.kafka.client import packed_fetch
from reliable_kafka.kafka.client.packed_fetch import SWITCH_ENV, PackedFetch
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.local import LocalCluster
from reliable_kafka.local.distribution import DEFAULT_KAFKA
from reliable_kafka.local.secured import MECHANISMS, Mechanism
from reliable_kafka.receiver import (
    ReceivedBlockInfo,
    ReceiverControl,
    ReceiverSupervisor,
    create_receiver_write_ahead_log,
)
from reliable_kafka.receiver.block_replicator import BlockReplicator
from reliable_kafka.receiver.receiver_task import replica_keeper
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.rpc import new_secret
from reliable_kafka.settings import ReceiverSettings, StreamingSettings, WriteAheadLogSettings
from reliable_kafka.storage import BlockManager, StorageLevel, StreamBlockId, encode_chunks, pack_chunk
from reliable_kafka.storage.block_server import BlockFetcher, BlockServer
from reliable_kafka.storage.block_store import BlockStore
from reliable_kafka.storage.executor_block_store import ExecutorBlockStore
from reliable_kafka.util.filesystems import FilesystemOptions


def produce(cluster: LocalCluster, topic: str, partitions: int, messages: int, size: int) -> None:
    producer = Producer(
        cluster.client_config(
            **{"linger.ms": 50, "batch.num.messages": 10000, "queue.buffering.max.messages": 500000}
        )
    )
    value = b"x" * size
    started = time.monotonic()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError("not every message was acknowledged")
    print(f"produced {messages:,} x {size} B in {time.monotonic() - started:.1f} s")


def plain_config(cluster: LocalCluster, group: str) -> dict[str, Any]:
    """The librdkafka configuration the receiver's consumers run with, for the same cluster."""
    params = parse_kafka_params(
        {**cluster.client_config(), "auto.offset.reset": "smallest"},
        zookeeper_connect=cluster.zookeeper_connect,
        group_id=group,
    )
    return params.consumer_config(str(params.bootstrap_servers))


def take_values(messages: list[Message]) -> int:
    """What a plain application does at the least: take each record's value bytes."""
    return len(list(map(Message.value, messages)))


def take_as_receiver(messages: list[Message]) -> int:
    """The receiver consumer thread's per-batch work without packed fetch (partition_consumer.py),
    without the block generator, the write-ahead log and the commits: an error check, then the
    columns, packed."""
    if not messages or any(map(Message.error, messages)):
        return 0
    offsets = list(map(Message.offset, messages))
    keys, values = list(map(Message.key, messages)), list(map(Message.value, messages))
    pack_chunk(messages[0].topic() or "", messages[0].partition() or 0, keys, values, offsets)
    return len(offsets)


Take = Callable[[list[Message]], int]


def consume_all(consumer: Consumer, tps: list[TopicPartition], messages: int, batch: int, take: Take) -> None:
    """Reads ``messages`` records from ``tps``, handing each batch to ``take``."""
    # As the receiver's consumers do: with the leader known before assign(), librdkafka
    # resolves OFFSET_BEGINNING at once instead of after its 500 ms retry timer.
    consumer.list_topics(tps[0].topic, timeout=5)
    consumer.assign(tps)
    consume = consumer.consume
    count = 0
    while count < messages:
        count += take(consume(batch, 1.0))


def plain_consumer(
    cluster: LocalCluster, topic: str, partitions: int, messages: int, batch: int, take: Take = take_values
) -> float:
    """(a): one consumer assigned to every partition; seconds to read ``messages``."""
    config = plain_config(cluster, "bench-plain")
    started = time.monotonic()
    consumer = Consumer(config)
    tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    consume_all(consumer, tps, messages, batch, take)
    elapsed = time.monotonic() - started
    consumer.close()
    return elapsed


ReadPartition = Callable[[Consumer, TopicPartition, int], None]


def per_partition(
    cluster: LocalCluster, topic: str, partitions: int, messages: int, read: ReadPartition
) -> float:
    """One consumer and thread per partition, each ``read``ing its share of ``messages`` from the
    partition's start, as the receiver reads; seconds until all are read."""
    config = plain_config(cluster, "bench-plain")
    share = [messages // partitions + (p < messages % partitions) for p in range(partitions)]
    started = time.monotonic()
    consumers = [Consumer(config) for _ in range(partitions)]
    threads = [
        threading.Thread(target=read, args=(consumer, TopicPartition(topic, p, OFFSET_BEGINNING), share[p]))
        for p, consumer in enumerate(consumers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    for consumer in consumers:
        consumer.close()
    return elapsed


def plain_consumer_per_partition(
    cluster: LocalCluster, topic: str, partitions: int, messages: int, batch: int, take: Take = take_values
) -> float:
    """(a'): one consumer and thread per partition, as the receiver reads; seconds to read ``messages``."""

    def read(consumer: Consumer, tp: TopicPartition, share: int) -> None:
        consume_all(consumer, [tp], share, batch, take)

    return per_partition(cluster, topic, partitions, messages, read)


def packed_consume_all(consumer: Consumer, tp: TopicPartition, messages: int, batch: int) -> None:
    """Reads ``messages`` records of ``tp`` as a receiver consumer thread with packed fetch does."""
    consumer.list_topics(tp.topic, timeout=5)
    fetch = PackedFetch.attach(consumer, TopicAndPartition(tp.topic, tp.partition))
    assert fetch is not None
    consumer.assign([tp])
    count, events_due = 0, 0.0
    try:
        while count < messages:
            if time.monotonic() >= events_due:
                events_due = time.monotonic() + 0.1
                fetch.serve_events()
            chunk = fetch.fetch(batch, 1.0).chunk
            count += chunk.num_records if chunk is not None else 0
    finally:
        fetch.close()


def receiver_reading(cluster: LocalCluster, topic: str, partitions: int, messages: int, batch: int) -> float:
    """(c): one consumer and thread per partition reading as the receiver's do (packed fetch when
    it is on, else Python packing); seconds to read ``messages``."""
    if not packed_fetch_on():
        return plain_consumer_per_partition(cluster, topic, partitions, messages, batch, take_as_receiver)

    def read(consumer: Consumer, tp: TopicPartition, share: int) -> None:
        packed_consume_all(consumer, tp, share, batch)

    return per_partition(cluster, topic, partitions, messages, read)


def packed_fetch_on() -> bool:
    return not isinstance(packed_fetch._librdkafka(), str)


@contextlib.contextmanager
def packed_fetch_off() -> Iterator[None]:
    """The receivers pack in Python meanwhile, as with ``RELIABLE_KAFKA_PACKED_FETCH=0``."""
    os.environ[SWITCH_ENV] = "0"
    packed_fetch._librdkafka.cache_clear()
    try:
        yield
    finally:
        del os.environ[SWITCH_ENV]
        packed_fetch._librdkafka.cache_clear()


class CountingTracker:
    """Counts stored records; drops each block once reported, as a completed batch would."""

    def __init__(self, block_manager: BlockStore, expected: int, replicas: BlockStore | None = None) -> None:
        self.block_manager = block_manager
        self.replicas = replicas
        self.expected = expected
        self.records = 0
        self.blocks = 0
        self.done = threading.Event()
        self.lock = threading.Lock()

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        return True

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        self.block_manager.remove(info.block_id)
        if self.replicas is not None:
            self.replicas.remove(info.block_id)
        with self.lock:
            self.records += info.num_records or 0
            self.blocks += 1
            if self.records >= self.expected:
                self.done.set()
        return True

    def report_error(self, stream_id: int, message: str, error: str) -> None:
        print(f"receiver error: {message}\n{error}", file=sys.stderr)

    def deregister_receiver(self, stream_id: int, message: str, error: str, *, fatal: bool = False) -> bool:
        return True


# kafkaParams per offset store; ZooKeeper membership in all three.
STORE_PARAMS: dict[str, dict[str, str]] = {
    "zookeeper": {"offsets.storage": "zookeeper"},
    "kafka": {"offsets.storage": "kafka", "dual.commit.enabled": "false"},
    "dual": {"offsets.storage": "kafka", "dual.commit.enabled": "true"},
}


def write_ahead_log_alone(
    directory: str,
    messages: int,
    size: int,
    block_records: int,
    filesystem_options: FilesystemOptions | None = None,
) -> float:
    """(w): seconds to write ``messages`` records' blocks to a receiver write-ahead log (fsync per
    block) in ``directory`` (a path or a URL) from one thread with nothing else running: the
    storage's share of (b)'s floor."""
    chunk_records = 200
    values: list[bytes | None] = [b"x" * size] * chunk_records
    keys: list[bytes | None] = [None] * chunk_records
    chunks = [
        pack_chunk("bench", 0, keys, values, list(range(start, start + chunk_records)))
        for start in range(0, block_records, chunk_records)
    ]
    log = create_receiver_write_ahead_log(directory, 0, fsync=True, filesystem_options=filesystem_options)
    started = time.monotonic()
    for _ in range(0, messages, block_records):
        log.write(encode_chunks(chunks), int(time.time() * 1000))
    elapsed = time.monotonic() - started
    log.close()
    return elapsed


def reliable_receiver(
    cluster: LocalCluster,
    topic: str,
    messages: int,
    checkpoint: str,
    group: str,
    store: str,
    batch_size: int | None = None,
    filesystem_options: FilesystemOptions | None = None,
) -> tuple[float, int]:
    """(b): seconds until ``messages`` records are stored and reported, and the blocks they made;
    the WAL in ``checkpoint`` (a path or a URL reached with ``filesystem_options``)."""
    receiver = ReliableKafkaReceiver(
        cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**cluster.client_config(), "auto.offset.reset": "smallest", **STORE_PARAMS[store]},
        StorageLevel.MEMORY_AND_DISK_SER,
        **({"consume_batch_size": batch_size} if batch_size else {}),
    )
    receiver.set_receiver_id(0)
    block_manager = BlockManager()
    tracker = CountingTracker(block_manager, messages)
    settings = StreamingSettings(
        receiver=ReceiverSettings(), wal=WriteAheadLogSettings(enable=True, fsync=True)
    )
    supervisor = ReceiverSupervisor(
        receiver,
        tracker,
        block_manager,
        settings=settings,
        checkpoint_dir=checkpoint,
        filesystem_options=filesystem_options,
    )
    started = time.monotonic()
    supervisor.start()
    if not tracker.done.wait(600):
        raise RuntimeError(f"only {tracker.records:,} of {messages:,} records stored")
    elapsed = time.monotonic() - started
    supervisor.stop("benchmark done")
    return elapsed, tracker.blocks


def replicated_receiver(
    cluster: LocalCluster, topic: str, messages: int, work: Path, group: str, replicate: bool
) -> tuple[float, int, int]:
    """(r1)/(r2): seconds until ``messages`` records are stored (twice with ``replicate``) and
    reported, the blocks they made, and how many of those had a second copy."""
    level = StorageLevel.MEMORY_AND_DISK_SER_2 if replicate else StorageLevel.MEMORY_AND_DISK_SER
    receiver = ReliableKafkaReceiver(
        cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**cluster.client_config(), "auto.offset.reset": "smallest", **STORE_PARAMS["zookeeper"]},
        level,
    )
    receiver.set_receiver_id(0)
    for name in ("own", "peer"):
        (work / name).mkdir(parents=True, exist_ok=True)
    own = ExecutorBlockStore(f"bench-own-{group}", local_dir=work / "own")
    peer = ExecutorBlockStore(f"bench-peer-{group}", local_dir=work / "peer")
    secret = new_secret()
    server = BlockServer(
        lambda name: peer.get(StreamBlockId.parse(name)),
        secret,
        host="127.0.0.2",
        keep_replica=replica_keeper(peer),
    ).start()
    client = BlockFetcher(secret)
    replicas = 0

    class Counting(CountingTracker):
        def add_block(self, info: ReceivedBlockInfo) -> bool:
            nonlocal replicas
            replicas += info.block_store_result.replica is not None
            return super().add_block(info)

    tracker = Counting(own, messages, peer)
    peer_location = BlockLocation("127.0.0.2", "peer", None, server.address[1])
    supervisor = ReceiverSupervisor(
        receiver,
        tracker,
        own,
        settings=StreamingSettings(receiver=ReceiverSettings(), wal=WriteAheadLogSettings(enable=False)),
        block_replicator=BlockReplicator(0, "127.0.0.1", lambda: [peer_location], client),
    )
    try:
        started = time.monotonic()
        supervisor.start()
        if not tracker.done.wait(600):
            raise RuntimeError(f"only {tracker.records:,} of {messages:,} records stored")
        elapsed = time.monotonic() - started
        supervisor.stop("benchmark done")
    finally:
        client.close()
        server.stop()
        own.close()
        peer.close()
    return elapsed, tracker.blocks, replicas


def replication_cost(args: argparse.Namespace) -> None:
    """(r1) against (r2), alternating, in one run: what the second copy costs."""
    runs: dict[str, list[tuple[float, float]]] = {"(r1)": [], "(r2)": []}
    with backlog(args) as (work, cluster, topic):
        for run in range(args.repeat):
            line = f"run {run + 1}:"
            for label, replicate in (("(r1)", False), ("(r2)", True)):
                settle()
                cpu = cpu_seconds()
                seconds, blocks, replicas = replicated_receiver(
                    cluster,
                    topic,
                    args.messages,
                    work / f"{label}-{run}",
                    f"bench-{label}-{run}",
                    replicate,
                )
                rate, cpu = args.messages / seconds, cpu_seconds() - cpu
                runs[label].append((rate, cpu))
                line += f" {label} {rate:10,.0f} records/s, {cpu:5.2f} s CPU, {blocks} blocks"
                line += f", {replicas} with a second copy |"
            print(line.rstrip(" |"), flush=True)
    best = {label: max(results) for label, results in runs.items()}
    names = {"(r1)": "one copy (MEMORY_AND_DISK_SER)", "(r2)": "two copies (MEMORY_AND_DISK_SER_2)"}
    for label, (rate, cpu) in best.items():
        print(
            f"{label} reliable receiver, WAL off, {names[label]:<35}: {rate:12,.0f} records/s "
            f"(best of {args.repeat}), {cpu / args.messages * 1e6:.2f} s CPU per million"
        )
    print(f"ratio (r2)/(r1): {best['(r2)'][0] / best['(r1)'][0]:.2f}")


# The baseline gets its best batch size: small batches keep fewer GC-tracked Message objects
# alive (less collection work), large ones make fewer calls. 200 is the receiver's.
PLAIN_BATCHES = (200, 10_000)
# (a) and (a') are the baseline; (c) splits the receiver's cost: its consumer threads' own work
# against everything after them (block generator, WAL, block store, commits).
PLAIN_READERS: dict[str, Callable[..., float]] = {
    "(a)  one consumer, all partitions": plain_consumer,
    "(a') one consumer per partition": plain_consumer_per_partition,
    "(c)  (a') reading as the receiver": receiver_reading,
}
BASELINES = ("(a)  one consumer, all partitions", "(a') one consumer per partition")
# (w)'s blocks: what a 200 ms block interval cuts at 1M records/s.
WAL_ALONE_BLOCK = 200_000


def settle() -> None:
    """Before each run: the dirty pages earlier runs left (their WAL segments, the topic's log)
    are written out now, not during this run's fsyncs, which would wait for them."""
    os.sync()


def process_status() -> dict[str, int]:
    """This process's VmRSS, VmHWM (bytes) and Threads, from /proc/self/status."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {
        "rss": int(fields["VmRSS"].split()[0]) * 1024,
        "hwm": int(fields["VmHWM"].split()[0]) * 1024,
        "threads": int(fields["Threads"]),
    }


class ThreadPeak:
    """This process's peak thread count while the block runs, its own sampling thread not counted."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, process_status()["threads"] - 1)

    def __enter__(self) -> ThreadPeak:
        self.peak = process_status()["threads"]
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


class ClusterAddress:
    """What a sweep child knows of the parent's cluster: enough for plain_config and the receiver."""

    def __init__(self, zookeeper_connect: str, client: dict[str, Any]) -> None:
        self.zookeeper_connect = zookeeper_connect
        self._client = client

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        return {**self._client, **overrides}


def sweep_child(spec: dict[str, Any]) -> None:
    """One sweep run in this (child) process; prints one JSON line of its figures."""
    cluster: Any = ClusterAddress(spec["zookeeper"], spec["client"])
    before = process_status()
    cpu = cpu_seconds()
    with ThreadPeak() as threads:
        if spec["reader"] == "(a)":
            elapsed = plain_consumer(
                cluster, spec["topic"], spec["partitions"], spec["messages"], spec["batch"]
            )
        else:
            elapsed, _ = reliable_receiver(
                cluster,
                spec["topic"],
                spec["messages"],
                spec["checkpoint"],
                spec["group"],
                "zookeeper",
                spec["receiver_batch"],
            )
    cpu = cpu_seconds() - cpu
    after = process_status()
    figures = {"seconds": elapsed, "cpu": cpu, "rss_before": before["rss"], "hwm": after["hwm"]}
    print(json.dumps({**figures, "threads": threads.peak}), flush=True)


def run_sweep_child(spec: dict[str, Any]) -> dict[str, Any]:
    answer = subprocess.run(
        [sys.executable, __file__, "--sweep-child", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if answer.returncode != 0:
        raise RuntimeError(f"sweep child {spec['reader']} failed:\n{answer.stderr[-4000:]}")
    return json.loads(answer.stdout.strip().splitlines()[-1])


def partition_sweep(args: argparse.Namespace, counts: list[int]) -> None:
    """(a) against (b) with ZooKeeper offsets, per partition count, each run in a child process:
    records/s, CPU per million, peak RSS, RSS growth and peak threads."""
    # (records/s, CPU s, peak RSS MiB, growth MiB, threads) per (count, reader) and run.
    results: dict[tuple[int, str], list[tuple[float, float, float, float, int]]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="receiver-bench-") as work,
        LocalCluster(Path(work) / "cluster") as cluster,
    ):
        base = {
            "zookeeper": cluster.zookeeper_connect,
            "client": cluster.client_config(),
            "messages": args.messages,
            "receiver_batch": args.batch,
        }
        for count in counts:
            topic = f"bench-{count}"
            cluster.create_topic(topic, count)
            produce(cluster, topic, count, args.messages, args.size)
            for run in range(args.repeat):
                # The baseline gets its best consume batch, as in the single-count mode.
                for reader, batch in (("(a)", PLAIN_BATCHES[0]), ("(a)", PLAIN_BATCHES[1]), ("(b)", 0)):
                    settle()
                    spec = {
                        **base,
                        "reader": reader,
                        "batch": batch,
                        "topic": topic,
                        "partitions": count,
                        "checkpoint": str(Path(work) / f"checkpoint-{count}-{run}"),
                        "group": f"bench-sweep-{count}-{run}",
                    }
                    got = run_sweep_child(spec)
                    row = (
                        args.messages / got["seconds"],
                        got["cpu"],
                        got["hwm"] / (1 << 20),
                        (got["hwm"] - got["rss_before"]) / (1 << 20),
                        got["threads"],
                    )
                    results.setdefault((count, reader), []).append(row)
                    print(
                        f"{count} partitions, run {run + 1}, {reader} batch {batch}: "
                        f"{row[0]:10,.0f} records/s, {row[1]:5.2f} s CPU, "
                        f"peak RSS {row[2]:5.0f} MiB (+{row[3]:.0f}), {row[4]} threads",
                        flush=True,
                    )
    print(f"\nbest of {args.repeat} by records/s, each from its own child process; RSS is that run's VmHWM")
    header = ("partitions", "reader", "records/s", "CPU s/M", "peak RSS", "growth", "threads", "ratio")
    print("{:>10} | {:<28} | {:>11} | {:>7} | {:>8} | {:>6} | {:>7} | {}".format(*header))
    for count in counts:
        plain_rate = max(results[(count, "(a)")])[0]
        for reader, name in (("(a)", "plain consumer (baseline)"), ("(b)", "receiver, WAL + ZooKeeper")):
            rate, cpu, hwm, growth, threads = max(results[(count, reader)])
            print(
                f"{count:>10} | {name:<28} | {rate:11,.0f} | {cpu / args.messages * 1e6:7.2f} | "
                f"{hwm:8.0f} | {growth:6.0f} | {threads:>7} | {rate / plain_rate:.2f}"
            )


def best_plain(cluster: LocalCluster, topic: str, args: argparse.Namespace) -> float:
    """The baseline's records/s: the faster of (a) and (a'), each with its best consume batch."""
    rates = []
    for name in BASELINES:
        for batch in PLAIN_BATCHES:
            settle()
            seconds = PLAIN_READERS[name](cluster, topic, args.partitions, args.messages, batch)
            rates.append(args.messages / seconds)
    return max(rates)


def wal_at(
    cluster: LocalCluster,
    topic: str,
    args: argparse.Namespace,
    base: str,
    group: str,
    options: FilesystemOptions,
) -> tuple[float, float, int]:
    """(w) and (b) with ZooKeeper offsets, their WALs under ``base``: records/s of each, and
    (b)'s blocks."""
    settle()
    wal_s = write_ahead_log_alone(f"{base}/wal-alone", args.messages, args.size, WAL_ALONE_BLOCK, options)
    settle()
    reliable_s, blocks = reliable_receiver(
        cluster, topic, args.messages, f"{base}/checkpoint", group, "zookeeper", args.batch, options
    )
    return args.messages / wal_s, args.messages / reliable_s, blocks


def remote_wal(args: argparse.Namespace) -> None:
    """The plain consumer against (w) and (b) with ZooKeeper offsets, each with its WAL on local
    disk and at ``--wal-url``: records/s, remote/local, ratio to plain."""
    from wal_url import filesystem_options, remove, run_directory, where  # noqa: PLC0415 - only here

    options = filesystem_options(args.spark_conf)
    places = ("local", where(args.wal_url))
    plain: list[float] = []
    # (w) records/s, (b) records/s, (b) blocks, per place and run.
    runs: dict[str, list[tuple[float, float, int]]] = {place: [] for place in places}
    with backlog(args) as (work, cluster, topic):
        print(f"WAL on local disk ({work}) and at {args.wal_url}")
        for run in range(args.repeat):
            plain.append(best_plain(cluster, topic, args))
            line = f"run {run + 1}: plain {plain[-1]:10,.0f} records/s"
            # Each goes first in every other run: neither always finds the machine as the other left it.
            for place in places if run % 2 == 0 else places[::-1]:
                if place == "local":
                    base = str(work / f"local-{run}")
                else:
                    base = run_directory(args.wal_url, "receiver-bench")
                try:
                    runs[place].append(wal_at(cluster, topic, args, base, f"bench-{place}-{run}", options))
                finally:
                    remove(base, options)
                rate_w, rate_b, blocks = runs[place][-1]
                line += f" | {place}: (w) {rate_w:10,.0f}, (b) {rate_b:10,.0f} records/s, {blocks} blocks"
            print(line, flush=True)

    baseline = max(plain)
    local_w = max(w for w, _, _ in runs["local"])
    local_b = max(b for _, b, _ in runs["local"])
    print(f"\nbest of {args.repeat}; plain consumer, the faster of (a) and (a'): {baseline:12,.0f} records/s")
    for place in places:
        rate_w = max(w for w, _, _ in runs[place])
        rate_b, blocks = max((b, n) for _, b, n in runs[place])
        print(
            f"(w) WAL alone, {place:<6}: {rate_w:12,.0f} records/s, {rate_w / local_w:5.2f} x local, "
            f"ratio to plain {rate_w / baseline:.2f}"
        )
        print(
            f"(b) receiver,  {place:<6}: {rate_b:12,.0f} records/s, {rate_b / local_b:5.2f} x local, "
            f"ratio to plain {rate_b / baseline:.2f} ({blocks} blocks)"
        )


class Transport:
    """One way to reach a backlog, for the readers of ``--secure``: the client settings (which
    name the protocol and the login), the topic, and the broker's pid for its CPU figure."""

    def __init__(self, label: str, client: dict[str, Any], topic: str, broker_pid: int | None) -> None:
        self.label = label
        self._client = client
        self.topic = topic
        self.broker_pid = broker_pid
        # The receiver keeps its group in Kafka (STORE_PARAMS["kafka"] without ZooKeeper).
        self.zookeeper_connect: str | None = None

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        return {**self._client, **overrides}

    @classmethod
    def plaintext(cls, cluster: LocalCluster, topic: str) -> Transport:
        return cls("PLAINTEXT", cluster.client_config(), topic, cluster.broker.pid)

    @classmethod
    def secured(cls, cluster: LocalCluster, topic: str, mechanism: Mechanism) -> Transport:
        """``cluster``'s granted user (never its admin) logged in with ``mechanism``."""
        params = cluster.secured.kafka_params(mechanism)
        label = "SSL (mTLS)" if mechanism == "SSL" else f"SASL_SSL {mechanism}"
        return cls(label, params, topic, cluster.broker.pid)


# records/s, this process's CPU seconds, the broker's CPU seconds (None: not measurable).
TransportRun = tuple[float, float, float | None]


def _measured(transport: Transport, messages: int, read: Callable[[], float]) -> TransportRun:
    settle()
    cpu, broker = cpu_seconds(), _broker_cpu_s(transport)
    seconds = read()
    broker_after = _broker_cpu_s(transport)
    broker_used = None if broker is None or broker_after is None else broker_after - broker
    return messages / seconds, cpu_seconds() - cpu, broker_used


def _rate(run: TransportRun) -> float:
    return run[0]


def _broker_cpu_s(transport: Transport) -> float | None:
    return None if transport.broker_pid is None else process_cpu_s(transport.broker_pid)


def _read_over(
    transport: Transport, args: argparse.Namespace, run: int, work: Path
) -> tuple[TransportRun, TransportRun]:
    """(a) with its better consume batch, then (b), over ``transport``."""
    plain = max(
        (
            _measured(
                transport,
                args.messages,
                functools.partial(
                    plain_consumer, transport, transport.topic, args.partitions, args.messages, batch
                ),
            )
            for batch in PLAIN_BATCHES
        ),
        key=_rate,
    )
    group = f"bench-{transport.label.split()[0].lower()}-{run}-{os.getpid()}"

    def receive() -> float:
        seconds, _ = reliable_receiver(
            transport,  # stands in for the cluster: all that the receiver reads of one
            transport.topic,
            args.messages,
            str(work / f"checkpoint-{group}"),
            group,
            "kafka",
            args.batch,
        )
        return seconds

    return plain, _measured(transport, args.messages, receive)


def transport_cost(
    args: argparse.Namespace, plaintext: Transport, secured: Transport, work: Path
) -> dict[str, dict[str, TransportRun]]:
    """(a) and (b) over ``plaintext`` and ``secured`` (each's topic holding ``args.messages``
    records on ``args.partitions`` partitions), alternating which goes first, ``args.repeat``
    times; prints each run, then the best of each and the ratios secured/PLAINTEXT. Returns the
    best runs by reader and transport label."""
    runs: dict[tuple[str, str], list[TransportRun]] = {}
    for run in range(args.repeat):
        line = f"run {run + 1}:"
        # Each transport goes first in every other run: neither always finds the machine as the other left it.
        for transport in (plaintext, secured) if run % 2 == 0 else (secured, plaintext):
            plain, receiver = _read_over(transport, args, run, work)
            runs.setdefault(("(a)", transport.label), []).append(plain)
            runs.setdefault(("(b)", transport.label), []).append(receiver)
            line += f" {transport.label}: (a) {plain[0]:10,.0f}, (b) {receiver[0]:10,.0f} records/s |"
        print(line.rstrip(" |"), flush=True)

    best = {key: max(results, key=_rate) for key, results in runs.items()}
    per_million = 1e6 / args.messages
    names = {"(a)": "plain consumer", "(b)": "receiver, WAL + Kafka offsets"}
    print(
        f"\nbest of {args.repeat} by records/s; CPU per million records: this process (client) "
        "and the broker's JVM"
    )
    for reader, name in names.items():
        for transport in (plaintext, secured):
            rate, cpu, broker = best[(reader, transport.label)]
            broker_text = "-" if broker is None else f"{broker * per_million:.2f}"
            print(
                f"{reader} {name:<30} {transport.label:<22}: {rate:12,.0f} records/s, "
                f"{cpu * per_million:.2f} s CPU per million (broker {broker_text})"
            )
    for reader, name in names.items():
        base_rate, base_cpu, base_broker = best[(reader, plaintext.label)]
        rate, cpu, broker = best[(reader, secured.label)]
        broker_ratio = "-" if broker is None or not base_broker else f"{broker / base_broker:.2f}"
        cpu_ratio = f"{cpu / base_cpu:.2f}" if base_cpu else "-"
        print(
            f"ratio {secured.label}/PLAINTEXT {reader} {name}: records/s {rate / base_rate:.2f}, "
            f"CPU per million {cpu_ratio} (broker {broker_ratio})"
        )
    return {
        reader: {label: figures for (name, label), figures in best.items() if name == reader}
        for reader in names
    }


def secured_against_plaintext(args: argparse.Namespace) -> None:
    """``--secure``: a plain and a secured local cluster, the same backlog on each, then
    :func:`transport_cost`."""
    with (
        tempfile.TemporaryDirectory(prefix="receiver-bench-") as work,
        LocalCluster(Path(work) / "plain", kafka=args.kafka) as plain,
        LocalCluster(Path(work) / "secured", kafka=args.kafka, secure=True) as secured,
    ):
        for cluster in (plain, secured):
            # Produced as the cluster's own admin: the set-up is not measured.
            cluster.create_topic("bench", args.partitions)
            produce(cluster, "bench", args.partitions, args.messages, args.size)
        print(
            f"Kafka {plain.kafka}, {args.messages:,} x {args.size} B on {args.partitions} partitions; "
            f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs",
            flush=True,
        )
        transport_cost(
            args,
            Transport.plaintext(plain, "bench"),
            Transport.secured(secured, "bench", args.secure),
            Path(work),
        )
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def cpu_seconds() -> float:
    # This process's user + system time, as os.times() gives it, but not in 10 ms clock ticks: a
    # small run's reader can take less than one.
    return time.process_time()


@contextlib.contextmanager
def backlog(args: argparse.Namespace) -> Iterator[tuple[Path, LocalCluster, str]]:
    """A work directory and a local cluster whose topic holds the run's ``--messages``."""
    with (
        tempfile.TemporaryDirectory(prefix="receiver-bench-") as work,
        LocalCluster(Path(work) / "cluster") as cluster,
    ):
        topic = "bench"
        cluster.create_topic(topic, args.partitions)
        produce(cluster, topic, args.partitions, args.messages, args.size)
        yield Path(work), cluster, topic


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=6_000_000)
    parser.add_argument(
        "--partitions", default="4", help="partitions of the topic; several, comma-separated: the sweep"
    )
    parser.add_argument("--size", type=int, default=100, help="message value size in bytes")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, interleaved; the best counts")
    parser.add_argument("--batch", type=int, default=None, help="the receiver's consume batch size")
    parser.add_argument(
        "--stores", default=",".join(STORE_PARAMS), help="offset stores to measure, comma-separated"
    )
    parser.add_argument(
        "--wal-url", help="(b) with its WAL at this URL (hdfs://, s3a://...) and on local disk"
    )
    parser.add_argument("--spark-conf", help="properties file with the spark.hadoop.* keys for --wal-url")
    parser.add_argument(
        "--replication",
        action="store_true",
        help="only (r1) and (r2): the cost of a second copy of each block",
    )
    parser.add_argument(
        "--secure",
        nargs="?",
        const="SCRAM-SHA-512",
        choices=MECHANISMS,
        help="only (a) and (b), over PLAINTEXT and over a secured cluster with this mechanism "
        "(default SCRAM-SHA-512; SSL: mTLS), in the same run: the cost of TLS",
    )
    parser.add_argument("--kafka", default=DEFAULT_KAFKA, help="the local clusters' Kafka (with --secure)")
    parser.add_argument("--sweep-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sweep_child:
        logging.basicConfig(level=logging.ERROR)
        sweep_child(json.loads(args.sweep_child))
        return
    counts = [int(count) for count in args.partitions.split(",")]
    logging.basicConfig(level=logging.ERROR)
    if len(counts) > 1:
        partition_sweep(args, counts)
        return
    if args.wal_url:
        args.partitions = counts[0]
        remote_wal(args)
        return
    if args.replication:
        args.partitions = counts[0]
        replication_cost(args)
        return
    if args.secure:
        args.partitions = counts[0]
        secured_against_plaintext(args)
        return
    args.partitions = counts[0]
    stores = args.stores.split(",")
    if unknown := set(stores) - set(STORE_PARAMS):
        parser.error(f"unknown offset stores: {', '.join(sorted(unknown))}")
    logging.basicConfig(level=logging.ERROR)

    # (records/s, CPU seconds, consume batch) per plain reader; (records/s, CPU seconds) per store.
    plain: dict[str, list[tuple[float, float, int]]] = {name: [] for name in PLAIN_READERS}
    # (label, offset store, packed fetch): (b) per store, then (p) when packed fetch is on.
    receivers = [(store, store, True) for store in stores]
    if packed_fetch_on():
        receivers.append(("python-packing", "zookeeper", False))
    reliable: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in receivers}
    with backlog(args) as (work, cluster, topic):
        wal_alone: list[float] = []
        for run in range(args.repeat):
            line = f"run {run + 1}:"
            settle()
            wal_dir = str(work / f"wal-alone-{run}")
            wal_s = write_ahead_log_alone(wal_dir, args.messages, args.size, WAL_ALONE_BLOCK)
            wal_alone.append(args.messages / wal_s)
            line += f" (w) {wal_alone[-1]:10,.0f} records/s |"
            for name, read in PLAIN_READERS.items():
                for batch in PLAIN_BATCHES:
                    settle()
                    cpu = cpu_seconds()
                    plain_s = read(cluster, topic, args.partitions, args.messages, batch)
                    plain[name].append((args.messages / plain_s, cpu_seconds() - cpu, batch))
                best_run = max(plain[name][-len(PLAIN_BATCHES) :])
                line += f" {name.split()[0]} {best_run[0]:10,.0f} records/s, {best_run[1]:5.2f} s CPU |"
            for label, store, packed in receivers:
                settle()
                cpu = cpu_seconds()
                with contextlib.nullcontext() if packed else packed_fetch_off():
                    reliable_s, blocks = reliable_receiver(
                        cluster,
                        topic,
                        args.messages,
                        str(work / f"checkpoint-{label}-{run}"),
                        f"bench-{label}-{run}",
                        store,
                        args.batch,
                    )
                rate, cpu = args.messages / reliable_s, cpu_seconds() - cpu
                reliable[label].append((rate, cpu))
                line += f" {label} {rate:10,.0f} records/s, {cpu:5.2f} s CPU, {blocks} blocks |"
            print(line.rstrip(" |"), flush=True)

    best = f"best of {args.repeat}"
    for name, runs in plain.items():
        rate, cpu, batch = max(runs)
        print(
            f"{name:<40}: {rate:12,.0f} records/s ({best}, consume batch {batch}), "
            f"{cpu / args.messages * 1e6:.2f} s CPU per million"
        )
    baseline = max(max(plain[name])[0] for name in BASELINES)
    print(
        f"{'(w)  write-ahead log alone':<40}: {max(wal_alone):12,.0f} records/s ({best}, blocks of "
        f"200,000 records, fsync each); ratio (w)/plain {max(wal_alone) / baseline:.2f}"
    )
    print(f"packed fetch: {'on' if packed_fetch_on() else 'off'}")
    for label, runs in reliable.items():
        rate, cpu = max(runs)
        name = (
            f"(b)  receiver, WAL + {label:<9} offsets  "
            if label in STORE_PARAMS
            else "(p)  (b) zookeeper, Python packing   "
        )
        print(
            f"{name}: {rate:12,.0f} records/s ({best}), {cpu / args.messages * 1e6:.2f} s CPU per million; "
            f"ratio to plain {rate / baseline:.2f}" + (" (goal >= 0.80)" if label in STORE_PARAMS else "")
        )


if __name__ == "__main__":
    main()

"""A receiver's memory and threads do not grow with its partitions (real Kafka 3.9, one receiver in
a child process, tests/kafka/memory_child.py): a 256-partition topic holding more than the
receiver's memory bound, 1 KB records, the receiver rate-limited; then the same with its
write-ahead log stalled for 10 s mid-stream. Every record arrives once, in order per partition."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reliable_kafka.kafka.client.shared_client import receiver_memory_bound
from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.support import read_json_lines, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 256
PER_PARTITION = 300  # x 1 KB x 256 partitions: ~77 MB, over twice the bound below
RECORD = 1000
PREFETCH = 16 << 20
# The producers' record batches: Java's default batch.size (a fetch returns whole batches).
PRODUCER_BATCH = 16 << 10
MAX_BUFFERED = 8 << 20
RATE = 15_000  # records/s: ~5 s for the backlog, while librdkafka could fetch it all at once
# Beyond the bound: the interpreter's own allocations while running (thread stacks touched,
# allocator slack). Not a timing: a size; peak growth measured here: 39 MiB against a 44 MiB bound.
SLACK = 16 << 20
# Threads beyond one per partition: librdkafka's (main, one per broker, internal), the block
# generator's, the supervisor's, the WAL's, ZooKeeper's, this child's own.
THREADS_BEYOND_PARTITIONS = 40


def produce_backlog(cluster: LocalCluster, topic: str) -> int:
    producer = Producer(cluster.client_config(**{"linger.ms": 50, "batch.size": PRODUCER_BATCH}))
    value = b"x" * RECORD
    for offset in range(PER_PARTITION):
        for partition in range(PARTITIONS):
            producer.produce(topic, value=value, key=b"%d" % offset, partition=partition)
            producer.poll(0)
    assert producer.flush(120) == 0
    return PARTITIONS * PER_PARTITION


@dataclass
class Child:
    process: subprocess.Popen[str]
    out: Path
    before_rss: int = 0
    samples: list[tuple[int, int, bool]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            words = line.split()
            if words[:2] == ["before", "rss"]:
                self.before_rss = int(words[2])
            elif words[:1] == ["rss"]:
                with self.lock:
                    self.samples.append((int(words[1]), int(words[3]), words[5] == "1"))

    def ranges(self) -> list[tuple[str, int, int, int]]:
        return [tuple(r) for rows in read_json_lines(self.out) for r in rows]

    def received(self) -> int:
        return sum(until - start for _, _, start, until in self.ranges())


@pytest.fixture
def child(local_cluster: LocalCluster, tmp_path: Path) -> Iterator[tuple[Child, str]]:
    topic = unique_name("memory-bound")
    local_cluster.create_topic(topic, PARTITIONS)
    params = {
        "auto.offset.reset": "smallest",
        "receiver.prefetch.bytes": PREFETCH,
        **local_cluster.client_config(),
    }
    out = tmp_path / "blocks.jsonl"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.kafka.memory_child", local_cluster.zookeeper_connect),
            *(unique_name("memory-group"), topic, str(tmp_path / "checkpoint"), str(RATE)),
            *(str(MAX_BUFFERED), json.dumps(params), str(out)),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    running = Child(process, out)
    try:
        yield running, topic
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def run(local_cluster: LocalCluster, child: Child, topic: str, *, stall: bool) -> None:
    total = produce_backlog(local_cluster, topic)  # before the receiver reads: a backlog
    reader = threading.Thread(target=child.read, daemon=True)
    reader.start()
    if stall:
        wait_until(lambda: child.received() > total // 4, 120, "a quarter of the backlog")
        child.process.send_signal(signal.SIGUSR1)
        wait_until(lambda: any(stalled for _, _, stalled in child.samples), 30, "the stall")
    wait_until(lambda: child.received() >= total, 300, "every record of the backlog")
    child.process.send_signal(signal.SIGTERM)
    assert child.process.wait(120) == 0
    reader.join(10)

    ranges = child.ranges()
    by_partition: dict[int, list[tuple[int, int]]] = {}
    for t, partition, start, until in ranges:
        assert t == topic
        by_partition.setdefault(partition, []).append((start, until))
    assert sorted(by_partition) == list(range(PARTITIONS))
    for partition, spans in by_partition.items():
        # In order and once: each block of a partition starts where the one before ended.
        assert spans[0][0] == 0, partition
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans)), (partition, spans)
        assert spans[-1][1] == PER_PARTITION, partition

    bound = receiver_memory_bound(
        PREFETCH,
        MAX_BUFFERED,
        brokers=1,
        partitions=PARTITIONS,
        record_bytes=RECORD,
        producer_batch_bytes=PRODUCER_BATCH,
    )
    peak_rss = max(rss for rss, _, _ in child.samples)
    peak_threads = max(threads for _, threads, _ in child.samples)
    growth = peak_rss - child.before_rss
    print(
        f"rss before {child.before_rss >> 20} MiB, peak growth {growth >> 20} MiB (bound {bound >> 20} MiB), "
        f"peak threads {peak_threads}, stall seen {any(s for _, _, s in child.samples)}"
    )
    assert growth <= bound + SLACK, f"RSS grew by {growth >> 20} MiB, bound {bound >> 20} MiB"
    assert peak_threads <= PARTITIONS + THREADS_BEYOND_PARTITIONS


def test_a_256_partition_backlog_stays_within_the_receivers_memory_bound(
    local_cluster: LocalCluster, child: tuple[Child, str]
) -> None:
    running, topic = child
    run(local_cluster, running, topic, stall=False)


def test_the_bound_holds_through_a_write_ahead_log_stall(
    local_cluster: LocalCluster, child: tuple[Child, str]
) -> None:
    running, topic = child
    run(local_cluster, running, topic, stall=True)


# Records written one at a time to partitions spread over the topic, once every partition is idle.
LATENCY_PROBES = 16
# Far below a round of turns through idle partitions (256 / 3 slots x 0.6 s: ~50 s, before idle
# partitions waited out of turn), far above the ~0.5 s expected (the 0.2 s watch, a slot, a
# 200 ms block, the write-ahead log).
LATENCY_BOUND_S = 5.0


def test_a_record_on_an_idle_partition_does_not_wait_for_a_round_of_turns(
    local_cluster: LocalCluster, child: tuple[Child, str]
) -> None:
    running, topic = child
    reader = threading.Thread(target=running.read, daemon=True)
    reader.start()
    producer = Producer(local_cluster.client_config(**{"linger.ms": 0}))
    for partition in range(PARTITIONS):  # every partition read once: all of them caught up after
        producer.produce(topic, value=b"first", partition=partition)
    assert producer.flush(30) == 0
    wait_until(lambda: running.received() >= PARTITIONS, 120, "a record of every partition")
    latencies = []
    for probe in range(LATENCY_PROBES):
        partition = (probe * 97 + 13) % PARTITIONS  # spread over the topic
        expected = running.received() + 1
        started = time.monotonic()
        producer.produce(topic, value=b"probe", partition=partition)
        assert producer.flush(30) == 0
        wait_until(lambda n=expected: running.received() >= n, 60, f"the probe on partition {partition}")
        latencies.append(time.monotonic() - started)
    running.process.send_signal(signal.SIGTERM)
    assert running.process.wait(120) == 0
    reader.join(10)
    median = sorted(latencies)[len(latencies) // 2]
    print(f"probe latencies: median {median:.2f} s, max {max(latencies):.2f} s")
    spans = {(p, start, until) for _, p, start, until in running.ranges()}
    assert sum(until - start for _, start, until in spans) == PARTITIONS + LATENCY_PROBES  # each once
    assert max(latencies) < LATENCY_BOUND_S, latencies

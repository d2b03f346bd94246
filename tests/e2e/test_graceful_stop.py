"""A graceful stop processes everything received: what was committed is exactly what was output,
the next run picks up from there, and at the end the committed offsets are the log end."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Producer

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets
from tests.support import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 2


class SteadyProducer(threading.Thread):
    """Sends ``value-<n>`` round-robin over the partitions, ``per_tick`` every 100 ms, until stopped."""

    def __init__(self, cluster: LocalCluster, topic: str, per_tick: int = 20) -> None:
        super().__init__(name="steady-producer", daemon=True)
        self._producer = Producer(cluster.client_config(**{"linger.ms": 5}))
        self._topic = topic
        self._per_tick = per_tick
        self._stop_sending = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self._stop_sending.wait(0.1):
            for _ in range(self._per_tick):
                self._producer.produce(
                    self._topic, f"value-{self.sent}".encode(), partition=self.sent % PARTITIONS
                )
                self.sent += 1
            self._producer.poll(0)

    def finish(self) -> None:
        self._stop_sending.set()
        self.join()
        assert self._producer.flush(60) == 0


def run_stream(
    ssc: StreamingContext, cluster: LocalCluster, topic: str, group: str
) -> list[tuple[int, int, str]]:
    """Start a stream of (partition, offset, value) into a list the caller watches."""
    stream = KafkaUtils.createStream(
        ssc,
        cluster.zookeeper_connect,
        group,
        {topic: 1},
        {"auto.offset.reset": "smallest", **cluster.client_config()},
        messageHandler=lambda m: (m.partition, m.offset, m.message),
    )
    out: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def keep(rdd: Any) -> None:
        batch = rdd.collect()
        with lock:
            out.extend(batch)

    stream.foreachRDD(keep)
    ssc.start()
    return out


def assert_exactly_offsets(
    records: list[tuple[int, int, str]], start: dict[int, int], end: dict[int, int]
) -> None:
    counts = Counter((p, o) for p, o, _ in records)
    duplicated = [key for key, n in counts.items() if n > 1]
    assert not duplicated, f"duplicates after a graceful stop: {duplicated[:10]}"
    for p in range(PARTITIONS):
        got = sorted(o for q, o in counts if q == p)
        assert got == list(range(start.get(p, 0), end.get(p, 0))), f"partition {p}: {got[:5]}...{got[-5:]}"


def test_graceful_stop_loses_nothing_and_commits_to_the_log_end(
    local_cluster: LocalCluster, make_ssc: Any
) -> None:
    topic, group = unique_name("graceful"), unique_name("group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    producer = SteadyProducer(local_cluster, topic)
    producer.start()
    try:
        # Run 1: stopped gracefully while messages are still flowing in.
        first = run_stream(make_ssc(wal=True), local_cluster, topic, group)
        wait_until(lambda: len(first) >= 300, timeout_s=120, what="the first run to process 300 records")
        StreamingContext.getActive().stop(stopSparkContext=False, stopGraceFully=True)  # type: ignore[union-attr]
        after_first = committed_offsets(local_cluster, group, topic, PARTITIONS)
        assert_exactly_offsets(first, {}, after_first)
    finally:
        producer.finish()
    assert producer.sent > sum(after_first.values()), "the first run was meant to stop mid-stream"

    # Run 2: same group, picks up at the committed offsets and drains the topic.
    second = run_stream(make_ssc(wal=True), local_cluster, topic, group)
    wait_until(
        lambda: len(first) + len(second) >= producer.sent, timeout_s=120, what="every record processed"
    )
    StreamingContext.getActive().stop(stopSparkContext=False, stopGraceFully=True)  # type: ignore[union-attr]

    assert_exactly_offsets(second, after_first, log_end_offsets(local_cluster, topic, PARTITIONS))
    assert committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end_offsets(
        local_cluster, topic, PARTITIONS
    )
    values = sorted(int(v.removeprefix("value-")) for _, _, v in first + second)
    assert values == list(range(producer.sent))

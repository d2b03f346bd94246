"""Streaming dynamic allocation on a real standalone cluster (``scheduler/executor_allocation_manager.py``),
the application in a child process (tests/e2e/cluster_child.py) against the real local Kafka.

``local-cluster[2,2,1024]`` with ``spark.executor.cores=1`` and 512 MB executors: two workers of
two cores host four one-core executors, which the master starts at once (a standalone
application's executor limit is unbounded until it asks for a total). One receiver holds one of
them. The replicated level with the write-ahead log off: an executor keeping the only other copy
of a block not yet processed must not go.

One run, both phases, each on short scaling intervals:

1. Idle: nothing produced, every batch empty: executors are removed one per interval down to
   ``minExecutors`` (2), never the receiver's (asserted from the receiver events and the
   decisions the listener heard).
2. Surge: a slow sink (50 ms per record in the tasks) makes processing exceed the batch: more
   executors are asked for within two scaling intervals of the first slow batch (the surge ends
   there), and come.

Nothing is lost: every acknowledged record is in the output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.kill_harness import ChildApp
from tests.e2e.placement_app import (
    PARTITIONS,
    drain_and_stop,
    of_kind,
    read_output,
    start_app,
    start_producers,
)
from tests.spark_backends import SparkBackend
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INTERVAL_MS = 4000
MIN_EXECUTORS = 2
CLUSTER = SparkBackend(
    "local-cluster",
    "local-cluster[2,2,1024]",
    # No locality wait: a block's holder is the receiver's executor, whose one core the receiver
    # holds, so a batch task waiting for it there would wait the whole 3 s for nothing.
    ["spark.executor.cores=1", "spark.executor.memory=512m", "spark.locality.wait=0"],
)
ALLOCATION = {
    "spark.streaming.dynamicAllocation.enabled": "true",
    "spark.streaming.dynamicAllocation.scalingInterval": f"{INTERVAL_MS}ms",
    "spark.streaming.dynamicAllocation.minExecutors": str(MIN_EXECUTORS),
    "spark.streaming.dynamicAllocation.maxExecutors": "4",
}


def decisions(output: Path, action: str | None = None) -> list[dict[str, Any]]:
    found = of_kind(read_output(output), "scaling")
    return [d for d in found if action is None or d["action"] == action]


def test_executors_follow_the_load_never_the_receivers_and_nothing_is_lost(
    local_cluster: LocalCluster, tmp_path: Path, applications: list[ChildApp]
) -> None:
    topic = unique_name("allocation")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    child, output, _ = start_app(
        local_cluster,
        tmp_path,
        [topic],
        started=applications,
        wal=False,
        storage_level="MEMORY_AND_DISK_SER_2",
        spark=CLUSTER,
        conf=ALLOCATION,
        extra_args=("--sink-ms-per-record", "50", "--allocation-events"),
    )

    # 1. Idle: down to the minimum, one executor per interval. The four executors register at
    # their own pace on a loaded machine; the receiver's may be any of them.
    wait_until(
        lambda: (
            child.check_alive()
            and bool(decisions(output, "down"))
            and decisions(output)[-1]["reason"] == f"at minExecutors ({MIN_EXECUTORS})"
        ),
        timeout_s=300,
        what="idle executors removed down to minExecutors",
    )
    (receiver,) = of_kind(read_output(output), "receiver_started")
    removed = [d["executor_id"] for d in decisions(output, "down")]
    assert receiver["executor_id"] not in removed, (receiver, removed)
    assert all(d["executors"] - 1 == d["target"] >= MIN_EXECUTORS for d in decisions(output, "down"))

    # 2. Surge: batches slower than the batch interval; an executor asked for within two intervals.
    # The surge ends there, so that the backlog the slow sink then drains stays small.
    producers = start_producers(local_cluster, [topic])
    try:
        wait_until(
            lambda: child.check_alive() and bool(decisions(output, "up")),
            timeout_s=180,
            what="a scale-up decision",
        )
    finally:
        for producer in producers.values():
            producer.finish()
    entries = read_output(output)
    (first, *_) = [b for b in of_kind(entries, "begin") if b["blocks"]]  # the surge's first batch
    (up, *_) = decisions(output, "up")
    # Within two intervals of the first slow batch's start: the first may average it with idle
    # batches, or end before it does (then the batches waiting behind it count).
    assert up["time_ms"] / 1000 - first["time"] <= 2 * INTERVAL_MS / 1000 + 1, (up, first)
    assert up["basis"] in ("processing time", "waiting batches") and up["ratio"] >= 0.9
    assert up["target"] > up["executors"] >= MIN_EXECUTORS
    # The executor comes (a JVM start: slow on a loaded machine).
    wait_until(
        lambda: (
            child.check_alive()
            and any(d["executors"] > MIN_EXECUTORS for d in decisions(output) if d["time_ms"] > up["time_ms"])
        ),
        timeout_s=240,
        what="the executor asked for to register",
    )
    expected, entries = drain_and_stop(child, output, producers)
    assert expected, "nothing was produced"
    # The sink was slow indeed: a batch of the surge took longer than the batch interval.
    assert max(b["processing_ms"] for b in of_kind(entries, "batch_done")) > 1000
    # The receiver ran where it started throughout: its executor was never taken.
    assert len(of_kind(entries, "receiver_started")) == 1, of_kind(entries, "receiver_started")
    assert not of_kind(entries, "receiver_error"), of_kind(entries, "receiver_error")
    assert all(d["executor_id"] != receiver["executor_id"] for d in decisions(output, "down"))

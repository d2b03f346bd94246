"""Streaming dynamic allocation on a real standalone cluster (``scheduler/executor_allocation_manager.py``),
the application in a child process (tests/e2e/cluster_child.py) against the real local Kafka.

The several-hosts standalone cluster (``--spark hosts``, the default as root: two workers, each a
host of its own) or ``local-cluster[2,2,1024]``, with ``spark.executor.cores=1`` and 512 MB
executors: the two workers host four one-core executors, which the master starts at once (a standalone
application's executor limit is unbounded until it asks for a total). Two receivers (one
``createStream`` per topic) hold two of them; ``minExecutors`` is 3, which leaves one task slot for
the batches.

The replicated level with the write-ahead log off: each receiver keeps the second copy of its
blocks in the other receiver's block store (the only place our block store keeps one: a Python
process lives on an executor only inside a task, and the receivers' tasks are the long-running
ones). So every copy of every block is on a receiver's executor, which is never removed: no block
can be lost by a removal, asserted from the tracker's block locations.

One run, both phases, each on short scaling intervals:

1. Idle: nothing produced, every batch empty: an executor is removed, down to ``minExecutors``
   (3), never a receiver's (asserted from the receiver events and the decisions the listener
   heard).
2. Surge: a slow sink (100 ms per record in the tasks) makes processing exceed the batch: more
   executors are asked for within two scaling intervals of the first batch that took 0.9 of the
   batch interval (the surge ends there), and come.

Nothing is lost: every acknowledged record is in the output, each block read had its second copy
on the other receiver's executor, and no copy of any block was on an executor removed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.kill_harness import ChildApp
from tests.e2e.placement_app import (
    PARTITIONS,
    SURGE_SINK_MS_PER_RECORD,
    await_first_slow_batch,
    await_scheduling_delay_back,
    drain_and_stop,
    of_kind,
    read_output,
    start_app,
    start_producers,
    surge_timeline,
)
from tests.spark_backends import SparkBackend
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INTERVAL_MS = 4000
MIN_EXECUTORS = 3  # two receivers and a task slot for the batches
# One-core executors of 512 MB: two per worker (local-cluster's two, or the two hosts' of the
# several-hosts cluster, each of 1024 MB), four in all, which a standalone master starts at once.
# No locality wait: a block's holders are the receivers' executors, whose one core each receiver
# holds, so a batch task waiting for one there would wait the whole 3 s for nothing.
EXECUTOR_CONF = ["spark.executor.cores=1", "spark.executor.memory=512m", "spark.locality.wait=0"]


def allocation_cluster(spark_backend: SparkBackend) -> SparkBackend:
    """The run's standalone cluster with one-core executors: on the several hosts, the
    application waits for all four (so that the two receivers start on two of them, as
    Spark schedules receivers over the executors registered at the start)."""
    if spark_backend.hosts is None:
        return SparkBackend("local-cluster", "local-cluster[2,2,1024]", EXECUTOR_CONF)
    hosts_conf = [
        "spark.cores.max=4",
        "spark.driver.host=127.0.0.1",
        "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime=60s",
    ]
    return SparkBackend("hosts", spark_backend.master, EXECUTOR_CONF + hosts_conf, spark_backend.hosts)


ALLOCATION = {
    "spark.streaming.dynamicAllocation.enabled": "true",
    "spark.streaming.dynamicAllocation.scalingInterval": f"{INTERVAL_MS}ms",
    "spark.streaming.dynamicAllocation.minExecutors": str(MIN_EXECUTORS),
    "spark.streaming.dynamicAllocation.maxExecutors": "4",
}


def decisions(output: Path, action: str | None = None, after_ms: float = 0) -> list[dict[str, Any]]:
    """The decisions so far (of ``action``, taken after ``after_ms``): the first batches, slow
    while Python workers start, may have asked for executors before the test's surge."""
    found = of_kind(read_output(output), "scaling")
    return [d for d in found if (action is None or d["action"] == action) and d["time_ms"] > after_ms]


def test_executors_follow_the_load_never_the_receivers_and_nothing_is_lost(
    local_cluster: LocalCluster, tmp_path: Path, spark_backend: SparkBackend, applications: list[ChildApp]
) -> None:
    topic, peer_topic = unique_name("allocation"), unique_name("allocation-peer")
    for name in (topic, peer_topic):
        local_cluster.create_topic(name, partitions=PARTITIONS)
    child, output, _ = start_app(
        local_cluster,
        tmp_path,
        [topic, peer_topic],
        started=applications,
        wal=False,
        storage_level="MEMORY_AND_DISK_SER_2",
        spark=allocation_cluster(spark_backend),
        conf=ALLOCATION,
        extra_args=("--sink-ms-per-record", str(SURGE_SINK_MS_PER_RECORD), "--allocation-events"),
    )

    # 1. Idle: down to the minimum. The four executors register at their own pace on a loaded
    # machine; the receivers' may be any of them.
    wait_until(
        lambda: (
            child.check_alive()
            and bool(decisions(output, "down"))
            and decisions(output)[-1]["reason"] == f"at minExecutors ({MIN_EXECUTORS})"
            and len(of_kind(read_output(output), "receiver_started")) == 2
        ),
        timeout_s=300,
        what="idle executors removed down to minExecutors",
    )
    receivers = {r["stream"]: r["executor_id"] for r in of_kind(read_output(output), "receiver_started")}
    assert len(receivers) == 2 and len(set(receivers.values())) == 2, receivers
    removed = [d["executor_id"] for d in decisions(output, "down")]
    assert not set(receivers.values()) & set(removed), (receivers, removed)
    assert all(d["executors"] - 1 == d["target"] >= MIN_EXECUTORS for d in decisions(output, "down"))

    # 2. Surge, on the first topic only: batches slower than the batch interval; an executor asked
    # for within two intervals. The surge ends there, so that the backlog the slow sink then
    # drains stays small.
    surge_ms = time.time() * 1000
    producers = start_producers(local_cluster, [topic])
    try:
        wait_until(
            lambda: child.check_alive() and bool(decisions(output, "up", after_ms=surge_ms)),
            timeout_s=180,
            what="a scale-up decision",
        )
    finally:
        for producer in producers.values():
            producer.finish()
    first = await_first_slow_batch(output, after_ms=surge_ms)
    entries = read_output(output)
    timeline = surge_timeline(entries, surge_ms)
    (up, *_) = decisions(output, "up", after_ms=surge_ms)
    # Within two intervals of the first slow batch's start: the first may average too little of
    # its time so far with the idle batches completed before it; the next counts it whole, or
    # as far as it ran.
    assert up["time_ms"] / 1000 - first["time"] <= 2 * INTERVAL_MS / 1000 + 1, timeline
    assert up["basis"] in ("processing time", "processing time, running batches so far")
    assert up["ratio"] >= 0.9
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
    # The backlog the surge built drains: the scheduling delay falls back under the batch interval.
    peak_delay_ms, back_delay_ms = await_scheduling_delay_back(output, surge_ms, up["time_ms"])
    expected, entries = drain_and_stop(child, output, producers)
    assert expected, "nothing was produced"
    # The sink was slow indeed: a batch of the surge took longer than the batch interval.
    assert max(b["processing_ms"] for b in of_kind(entries, "batch_done")) > 1000
    # The receivers ran where they started throughout: their executors were never taken.
    assert len(of_kind(entries, "receiver_started")) == 2, of_kind(entries, "receiver_started")
    assert not of_kind(entries, "receiver_error"), of_kind(entries, "receiver_error")
    removed = [d["executor_id"] for d in decisions(output, "down")]
    assert not set(receivers.values()) & set(removed), (receivers, removed)
    # Replicated with the WAL off: each block read (the tracker's locations, as each batch began)
    # was on its receiver's executor and had its second copy on the other receiver's; neither
    # copy of any block was on an executor removed, during the run or since.
    blocks = [block for entry in of_kind(entries, "begin") for block in entry["blocks"]]
    assert blocks, "no block was read"
    for block in blocks:
        stream = int(block["id"].split("-")[1])
        (peer,) = set(receivers) - {stream}
        assert (block["executor"], block["replica"]) == (receivers[stream], receivers[peer]), receivers
    holders = {b["executor"] for b in blocks} | {b["replica"] for b in blocks}
    assert not holders & set(removed), (holders, removed)
    print(
        f"dynamic allocation: executor(s) {', '.join(removed)} removed idle; asked for more "
        f"{up['time_ms'] / 1000 - first['time']:.1f} s after the first slow batch began (load "
        f"{up['ratio']:.2f}, {up['basis']}); scheduling "
        f"delay {peak_delay_ms / 1000:.1f} s at most, back to {back_delay_ms} ms; "
        f"{len(expected)} records, none lost"
    )

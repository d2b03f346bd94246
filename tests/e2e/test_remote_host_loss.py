"""A receiver's host lost while its write-ahead log is on HDFS, as on a real cluster: the
checkpoint directory (and the receiver WAL under it) on the session's real store, the receivers on
executors of different hosts (LocalSparkHosts, where it runs). The lost host's executor, Python
workers and block files are gone; the batches of the blocks it held read them from the remote
write-ahead log, and nothing is lost.

One stream is enough: the unioned streams, the hostile client and the driver kills are proven
on local disk (test_executor_placement, test_kill_recovery); here what changes is where the only
surviving copy of a block lives.

HDFS only: on S3, a batch task reading a block from the write-ahead log because no executor has it
is what every restart of test_remote_kill_recovery[s3-...] does (the restarted application's
executors hold none of the blocks begun before the kill); what a host loss adds, the block
manager's lost locations and the task's fallback, does not depend on the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets
from tests.e2e.kill_harness import ChildApp
from tests.e2e.placement_app import (
    PARTITIONS,
    drain_and_stop,
    lose_receivers_host,
    of_kind,
    read_output,
    received,
    start_app,
    start_producers,
)
from tests.e2e.remote_stores import RemoteStore, remote_store
from tests.spark_backends import SparkBackend
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(params=["hdfs"])
def store(request: pytest.FixtureRequest) -> RemoteStore:
    return remote_store(request, request.param)


@pytest.mark.brokers("3.9")
def test_a_lost_hosts_blocks_are_read_from_the_remote_wal(
    local_cluster: LocalCluster,
    tmp_path: Path,
    host_loss_backend: SparkBackend,
    store: RemoteStore,
    applications: list[ChildApp],
) -> None:
    topic = unique_name("remote-host-loss")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    child, output, group = start_app(
        local_cluster,
        tmp_path,
        [topic],
        started=applications,
        wal=True,
        storage_level="MEMORY_AND_DISK_SER",
        spark=host_loss_backend,
        checkpoint=store.checkpoint,
        conf=store.spark_conf,
    )
    producers = start_producers(local_cluster, [topic])
    session = child.process.pid
    try:
        wait_until(
            lambda: bool(of_kind(read_output(output), "receiver_started")), timeout_s=120, what="the receiver"
        )
        (first,) = of_kind(read_output(output), "receiver_started")
        assert first["executor_id"] != "driver", first
        wait_until(lambda: len(received(read_output(output))) > 30, timeout_s=120, what="records")
        (tracker,) = of_kind(read_output(output), "tracker")
        killed_at = lose_receivers_host(
            host_loss_backend, session, first["executor_id"], first["host"], tracker["app_id"], output
        )["killed_at"]
        logs = host_loss_backend.executor_logs(tracker["app_id"])
    finally:
        for producer in producers.values():
            producer.finish()
    expected, entries = drain_and_stop(child, output, producers)
    assert not of_kind(entries, "job_error"), of_kind(entries, "job_error")[0]["error"][-1500:]
    lost = expected - set(received(entries))
    assert not lost, f"lost {sorted(lost)[:10]}"
    # Blocks the lost executor stored, read by batches that began after it was gone: their only
    # copy was the write-ahead log record on the remote store (no re-read from Kafka happened).
    orphans = [
        block
        for entry in of_kind(entries, "begin")
        if entry["time"] > killed_at
        for block in entry["blocks"]
        if block["executor"] == first["executor_id"]
    ]
    assert orphans, "no batch read a block of the lost executor after the loss"
    assert all(block["wal"] is not None for block in orphans), orphans
    assert "reading it again from its source" not in logs, logs[-3000:]
    assert "Could not compute split" not in logs
    assert store.fs().exists(f"{store.path()}/receivedData/0"), store.checkpoint
    assert committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end_offsets(
        local_cluster, topic, PARTITIONS
    )

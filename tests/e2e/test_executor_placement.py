"""Receivers on Spark executors, on a real Spark cluster (``local-cluster[2,2,1024]``: two executor
JVMs with their own Python workers), against the real local ZooKeeper + Kafka.

The user application runs in a child process (tests/e2e/cluster_child.py): one process holds one
SparkContext, and a kill must be able to take an executor JVM (and its Python workers) alone.
"""

from __future__ import annotations

import os
import re
import socket
import struct
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from reliable_kafka.rpc import AuthenticationError, connect, new_secret
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, delete_records, log_end_offsets
from tests.e2e.kill_harness import ChildApp
from tests.e2e.placement_app import (
    PARTITIONS,
    RELAUNCH_BOUND_S,
    assert_duplicates_within_one_block,
    drain_and_stop,
    lose_receivers_host,
    of_kind,
    read_output,
    received,
    start_app,
    start_producers,
)
from tests.e2e.processes import session_processes
from tests.spark_backends import SparkBackend
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def abuse_tracker_socket(host: str, port: int) -> None:
    """A client with a wrong secret, garbage, and a 2 GB length prefix: each must be refused and
    close that connection only."""
    with pytest.raises(AuthenticationError):
        connect(host, port, new_secret(), timeout_s=10)
    for payload in (
        os.urandom(512),  # garbage where the handshake answer should be
        struct.pack(">I", 2**31) + b"x" * 16,  # a 2 GB frame announced
    ):
        with socket.create_connection((host, port), timeout=10) as conn:
            conn.settimeout(10)
            try:
                conn.recv(4096)  # the server's challenge
                conn.sendall(payload)
                # The server closes the connection: recv returns b"" (or the reset raises).
                while conn.recv(4096):
                    pass
            except OSError:
                pass


# Kafka 4 too: issue 23's acceptance (the WAL-on, `_2` asked bullet) is on both brokers.
@pytest.mark.brokers("3.9", "4")
def test_receivers_on_executors_with_the_wal(
    local_cluster: LocalCluster, tmp_path: Path, spark_backend: SparkBackend, applications: list[ChildApp]
) -> None:
    """Two unioned streams on two executors; a hostile client; an executor's host lost; graceful stop."""
    topics = [unique_name("exec-a"), unique_name("exec-b")]
    for topic in topics:
        local_cluster.create_topic(topic, partitions=PARTITIONS)
    child, output, group = start_app(
        local_cluster,
        tmp_path,
        topics,
        started=applications,
        wal=True,
        storage_level="MEMORY_AND_DISK_SER_2",
        spark=spark_backend,
    )
    producers = start_producers(local_cluster, topics)
    session = child.process.pid
    try:
        # 1. Both receivers registered, from two different executors, and records flow.
        wait_until(
            lambda: len(of_kind(read_output(output), "receiver_started")) >= 2,
            timeout_s=120,
            what="two receivers",
        )
        started = of_kind(read_output(output), "receiver_started")
        executors = {e["stream"]: e["executor_id"] for e in started}
        hosts = {e["stream"]: e["host"] for e in started}
        assert len(executors) == 2 and len(set(executors.values())) == 2, started
        assert "driver" not in executors.values(), started
        if spark_backend.hosts is not None:  # one executor per host: the receivers spread over hosts
            assert len(set(hosts.values())) == 2, started
        # From both streams, not 30 from one: losing receiver 0's host below needs blocks it stored.
        wait_until(
            lambda: (
                {topic for topic, _, _ in received(read_output(output))} == set(topics)
                and len(received(read_output(output))) > 30
            ),
            timeout_s=120,
            what="records from both streams",
        )

        # 2. A hostile client cannot disturb the receivers.
        (tracker,) = of_kind(read_output(output), "tracker")
        before = len(received(read_output(output)))
        abuse_tracker_socket(tracker["host"], tracker["port"])
        wait_until(
            lambda: len(received(read_output(output))) > before + 30,
            timeout_s=120,
            what="records after the abuse",
        )
        assert not of_kind(read_output(output), "receiver_stopped"), "a receiver stopped: bad connections"
        # Exactly once so far: no fault has happened yet.
        assert max(received(read_output(output)).values()) == 1

        # 3. The host of receiver 0's executor is lost: its JVM and Python workers SIGKILLed, its
        # block files gone with it. The batches of those blocks read them from the WAL.
        victim = executors[0]
        relaunched = lose_receivers_host(spark_backend, session, victim, hosts[0], tracker["app_id"], output)
        assert relaunched["executor_id"] != victim
        assert relaunched["time"] - relaunched["killed_at"] <= RELAUNCH_BOUND_S, relaunched
        logs = spark_backend.executor_logs(tracker["app_id"])
    finally:
        for producer in producers.values():
            producer.finish()

    # 4. Everything produced arrives; a graceful stop processes every record received.
    expected, entries = drain_and_stop(child, output, producers)
    counts = received(entries)
    assert expected == set(counts), f"lost {sorted(expected - set(counts))[:10]}"
    assert_duplicates_within_one_block(entries, counts, topics[0])
    # The receivers' WAL writes and commits, done on the executors, reached the driver's metrics.
    (figures,) = of_kind(entries, "instruments")
    assert figures["wal_writes"] > 0 and figures["commits"] > 0, figures
    # The driver never shipped block bytes.
    assert all(batch["driver_bytes"] == 0 for batch in of_kind(entries, "batch"))
    assert sum(batch["partitions"] for batch in of_kind(entries, "batch")) > 0
    assert not of_kind(entries, "job_error"), of_kind(entries, "job_error")[:2]
    # MEMORY_AND_DISK_SER_2 with the WAL on: one copy (the WAL is the second), and Spark's warning
    # (SPARK-4671) once as each receiver launch starts, not once per block (the lost host's
    # launch may have taken its log with it).
    assert all(block["replica"] is None for entry in of_kind(entries, "begin") for block in entry["blocks"])
    warned = logs.count("Storage level replication 2 is unnecessary when write ahead log is enabled")
    assert 1 <= warned <= len(of_kind(entries, "receiver_started")), warned
    assert "stored with 1 copy instead of" not in logs
    for topic in topics:
        assert committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end_offsets(
            local_cluster, topic, PARTITIONS
        )
    # Nothing of the application is left running: no JVM, no Python worker.
    wait_until(lambda: not session_processes(session), timeout_s=60, what="no process left")


# Kafka 3.9 only: what a lost host costs is Spark's and the receiver's, the same on any broker;
# Kafka 4's offsets and group in executor placement are proven by the driver kill test and the
# fault campaign on Kafka 4, and its host loss by the test with the write-ahead log above.
@pytest.mark.brokers("3.9")
def test_receivers_on_executors_without_the_wal(
    local_cluster: LocalCluster, tmp_path: Path, host_loss_backend: SparkBackend, applications: list[ChildApp]
) -> None:
    """MEMORY_AND_DISK_SER, no WAL: blocks read where they are kept, or fetched from the holder;
    then the host of a receiver's executor is lost (its JVM SIGKILLed and its block files gone):
    the blocks it held and no batch had read yet are read again from Kafka, for their exact
    offset ranges, so no batch fails and nothing is lost (Spark fails those batches)."""
    topics = [unique_name("nowal-a"), unique_name("nowal-b")]
    for topic in topics:
        local_cluster.create_topic(topic, partitions=PARTITIONS)
    child, output, _ = start_app(
        local_cluster,
        tmp_path,
        topics,
        started=applications,
        wal=False,
        storage_level="MEMORY_AND_DISK_SER",
        probe_fetch=True,
        spark=host_loss_backend,
    )
    producers = start_producers(local_cluster, topics)
    session = child.process.pid
    try:
        wait_until(
            lambda: len(of_kind(read_output(output), "receiver_started")) >= 2,
            timeout_s=120,
            what="two receivers",
        )
        started = of_kind(read_output(output), "receiver_started")
        executors = {e["stream"]: e["executor_id"] for e in started}
        hosts = {e["stream"]: e["host"] for e in started}
        assert len(set(executors.values())) == 2, executors
        # A batch task on the executor that does not hold the block, with no file to read, fetches it.
        wait_until(
            lambda: bool(of_kind(read_output(output), "forced_fetch")), timeout_s=120, what="the forced fetch"
        )
        (fetch,) = of_kind(read_output(output), "forced_fetch")
        assert fetch["ran_on"] != fetch["holder"] and fetch["records"] == fetch["expected"] > 0, fetch
        # Through the holder's block server (no file of another host), counted in the driver's metrics.
        assert fetch["served_reported"] >= 1, fetch
        wait_until(lambda: len(received(read_output(output))) > 60, timeout_s=120, what="records")
        assert not of_kind(read_output(output), "job_error")
        # Exactly once while nothing fails: read locally or fetched, no record twice.
        assert max(received(read_output(output)).values()) == 1

        (tracker,) = of_kind(read_output(output), "tracker")
        lose_receivers_host(host_loss_backend, session, executors[0], hosts[0], tracker["app_id"], output)
        # Batches run in order: those with the lost host's blocks are done. Read now, before the
        # stop: local-cluster deletes its workers' directories when the application ends.
        logs = host_loss_backend.executor_logs(tracker["app_id"])
    finally:
        for producer in producers.values():
            producer.finish()
    # Every acknowledged record output before the stop: a graceful stop processes what the
    # receivers hold, not what is still in Kafka (stopping at once lost the last records a
    # relaunched receiver had not fetched yet, in a parallel run).
    _, entries = drain_and_stop(child, output, producers)
    assert not of_kind(entries, "job_error"), of_kind(entries, "job_error")[0]["error"][-1500:]
    # The lost host's unread blocks were read again from Kafka by the batch tasks.
    assert "reading it again from its source" in logs, logs[-3000:]
    assert "Could not compute split" not in logs


@pytest.mark.brokers("3.9")  # the broker changes nothing here: see the test above
def test_records_kafka_no_longer_has_fail_their_batch_naming_them(
    local_cluster: LocalCluster, tmp_path: Path, host_loss_backend: SparkBackend, applications: list[ChildApp]
) -> None:
    """WAL off, one copy of each block: the host holding a waiting batch's block is lost, and
    retention has removed the block's records from Kafka meanwhile. Nothing can serve them: the
    batch fails, its error naming the lost topic, partitions and offset ranges."""
    topics = [unique_name("gone-a"), unique_name("gone-b")]
    for topic in topics:
        local_cluster.create_topic(topic, partitions=PARTITIONS)
    release = tmp_path / "release"
    child, output, _ = start_app(
        local_cluster,
        tmp_path,
        topics,
        started=applications,
        wal=False,
        storage_level="MEMORY_AND_DISK_SER",
        spark=host_loss_backend,
        extra_args=("--hold-until", str(release)),
    )
    producers = start_producers(local_cluster, topics)
    session = child.process.pid
    try:
        wait_until(
            lambda: len(of_kind(read_output(output), "receiver_started")) >= 2,
            timeout_s=120,
            what="two receivers",
        )
        wait_until(
            lambda: bool(of_kind(read_output(output), "held")),
            timeout_s=120,
            what="a batch held before its reads",
        )
        entries = read_output(output)
        (held,) = of_kind(entries, "held")
        (begin,) = [e for e in of_kind(entries, "begin") if e["batch"] == held["batch"]]
        blocks = [block for block in begin["blocks"] if block["id"].startswith("input-0-")]
        (holder,) = {block["executor"] for block in blocks}
        (host,) = {e["host"] for e in of_kind(entries, "receiver_started") if e["executor_id"] == holder}
        (tracker,) = of_kind(entries, "tracker")
        host_loss_backend.lose_host_of(session, holder, host, tracker["app_id"], 0)
        for producer in producers.values():
            producer.finish()
        low = delete_records(local_cluster, topics[0], PARTITIONS)
        assert all(
            low[partition] >= until for block in blocks for _, partition, _, until in block["ranges"]
        ), (low, blocks)
        release.touch()
        wait_until(
            lambda: any(e["batch"] == held["batch"] for e in of_kind(read_output(output), "job_error")),
            timeout_s=120,
            what="the held batch's failure",
        )
    finally:
        for producer in producers.values():
            if producer.is_alive():
                producer.finish()
    (failure,) = [e for e in of_kind(read_output(output), "job_error") if e["batch"] == held["batch"]]
    # Spark reports the first failed task's error: one of the lost blocks, each of its ranges.
    named = " ".join(failure["lost"])
    assert any(
        all(f"{t}/{p} [{start}, {until})" in named for t, p, start, until in block["ranges"] if until > start)
        for block in blocks
    ), (blocks, failure["lost"])


@pytest.mark.brokers("3.9")  # the broker changes nothing here: see the test above
def test_replicated_blocks_without_the_wal_survive_the_loss_of_a_receivers_host(
    local_cluster: LocalCluster, tmp_path: Path, host_loss_backend: SparkBackend, applications: list[ChildApp]
) -> None:
    """MEMORY_AND_DISK_SER_2, no WAL, the reliable receiver: each block is kept by its receiver and
    by the other receiver (on the other host) before it is reported and its offsets committed.
    The host of receiver 0 is lost: the blocks it held and no batch had read yet are read from
    their second copies (not re-read from Kafka), no batch fails, nothing acknowledged is lost,
    and records come again at most one block per partition."""
    topics = [unique_name("repl-a"), unique_name("repl-b")]
    for topic in topics:
        local_cluster.create_topic(topic, partitions=PARTITIONS)
    child, output, group = start_app(
        local_cluster,
        tmp_path,
        topics,
        started=applications,
        wal=False,
        storage_level="MEMORY_AND_DISK_SER_2",
        spark=host_loss_backend,
        conf={"spark.streaming.receiver.reliableWithoutWriteAheadLog": "true"},
    )
    producers = start_producers(local_cluster, topics)
    session = child.process.pid
    try:
        wait_until(
            lambda: len(of_kind(read_output(output), "receiver_started")) >= 2,
            timeout_s=120,
            what="two receivers",
        )
        started = of_kind(read_output(output), "receiver_started")
        executors = {e["stream"]: e["executor_id"] for e in started}
        hosts = {e["stream"]: e["host"] for e in started}
        assert len(set(executors.values())) == 2, started
        if host_loss_backend.hosts is not None:
            assert len(set(hosts.values())) == 2, started
        assert all(e["name"].startswith("ReliableKafkaReceiver-") for e in started), started

        def replicated(stream_id: int) -> list[dict]:
            return [
                block
                for entry in of_kind(read_output(output), "begin")
                for block in entry["blocks"]
                if block["id"].startswith(f"input-{stream_id}-") and block["replica"] is not None
            ]

        # Both receivers' blocks get their second copy on the other receiver's executor.
        wait_until(lambda: replicated(0) and replicated(1), timeout_s=120, what="blocks with a second copy")
        assert all(block["replica"] == executors[1] for block in replicated(0)), replicated(0)[:3]
        assert all(block["replica"] == executors[0] for block in replicated(1)), replicated(1)[:3]
        wait_until(lambda: len(received(read_output(output))) > 60, timeout_s=120, what="records")
        assert max(received(read_output(output)).values()) == 1  # no fault yet: exactly once

        (tracker,) = of_kind(read_output(output), "tracker")
        lose_receivers_host(host_loss_backend, session, executors[0], hosts[0], tracker["app_id"], output)
        # Read now, before the stop: local-cluster deletes its workers' directories at the end.
        logs = host_loss_backend.executor_logs(tracker["app_id"])
    finally:
        for producer in producers.values():
            producer.finish()
    expected, entries = drain_and_stop(child, output, producers)
    assert not of_kind(entries, "job_error"), of_kind(entries, "job_error")[0]["error"][-1500:]
    counts = received(entries)
    assert expected == set(counts), f"lost {sorted(expected - set(counts))[:10]}"
    # The lost host's unread blocks came from their second copies, by the read path's own line.
    # Only blocks stored with one copy were read again from Kafka: those a receiver stored before
    # any other receiver had registered (or after the loss, until one had on another executor).
    assert "read from its second copy on executor" in logs, logs[-3000:]
    reread = set(
        re.findall(r"block (input-\d+-\d+): it was kept on [^\n]*reading it again from its source", logs)
    )
    single = {
        block["id"]
        for entry in of_kind(entries, "begin")
        for block in entry["blocks"]
        if not block["replica"]
    }
    assert reread <= single, sorted(reread - single)
    assert "Could not compute split" not in logs
    assert_duplicates_within_one_block(entries, counts, topics[0])
    for topic in topics:
        assert committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end_offsets(
            local_cluster, topic, PARTITIONS
        )

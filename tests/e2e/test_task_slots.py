"""Receivers never starve batches of task slots silently (see reliable_kafka.scheduler.task_slots),
on a real Spark against the real local ZooKeeper + Kafka, the application in a child process
(tests/e2e/cluster_child.py: one ``createStream`` per topic, unioned).

- ``local[2]`` with three streams: one receiver runs as a task, two in the driver process, one slot
  stays for batches; every record is delivered and a graceful stop ends the run.
- ``local-cluster[2,1,1024]`` (two one-core executors) with three streams: ``start()`` refuses.
- The same cluster with dynamic allocation on (executors may come, so a WARNING only): one receiver
  job stays queued, batches starve; the watch reports it once to the listeners, and a graceful
  stop returns on its own, the queued receiver job cancelled.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.kill_harness import ChildApp
from tests.e2e.placement_app import acked, of_kind, read_output, received, start_producers
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHILD = "tests.e2e.cluster_child"
TOPICS = 3


def child_args(
    cluster: LocalCluster, tmp_path: Path, topics: list[str], master: str, *extra: str
) -> list[str]:
    group = unique_name("slots-group")
    return [
        *("--zk", cluster.zookeeper_connect, "--group", group, "--topics", ",".join(topics)),
        *("--checkpoint", str(tmp_path / "checkpoint"), "--output", str(tmp_path / "output.jsonl")),
        *("--master", master, "--wal", "on", "--storage-level", "MEMORY_AND_DISK_SER"),
        *("--kafka-params", json.dumps(cluster.client_config())),
        *extra,
    ]


def new_topics(cluster: LocalCluster) -> list[str]:
    topics = [unique_name(f"slots-{i}") for i in range(TOPICS)]
    for topic in topics:
        cluster.create_topic(topic, partitions=2)
    return topics


def test_three_streams_on_local_2_deliver_every_record(local_cluster: LocalCluster, tmp_path: Path) -> None:
    topics = new_topics(local_cluster)
    child = ChildApp(0, child_args(local_cluster, tmp_path, topics, "local[2]"), tmp_path, module=CHILD)
    producers = start_producers(local_cluster, topics)
    try:
        child.wait_started()
        output = tmp_path / "output.jsonl"
        wait_until(
            lambda: child.check_alive() and len(received(read_output(output))) > 90,
            timeout_s=120,
            what="records",
        )
        for producer in producers.values():
            producer.finish()
        expected = acked(producers)
        wait_until(
            lambda: child.check_alive() and expected <= set(received(read_output(output))),
            timeout_s=180,
            what="every produced record of the three streams",
        )
        assert child.stop_gracefully() == 0, child.log_tail()
    finally:
        for producer in producers.values():
            producer.finish() if producer.is_alive() else None
        child.kill()
    log = child.log_path.read_text()
    assert "local[2] has 2 task slot(s)" in log, child.log_tail()
    assert "receiver(s) 0 run as tasks (1 slot(s)) and 1, 2 in the driver process" in log, log
    started = {entry["stream"] for entry in of_kind(read_output(output), "receiver_started")}
    assert started == {0, 1, 2}


def test_cluster_master_refuses_receivers_that_take_every_slot(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    topics = new_topics(local_cluster)
    args = child_args(local_cluster, tmp_path, topics, "local-cluster[2,1,1024]")
    child = ChildApp(0, args, tmp_path, module=CHILD)
    try:
        code = child.process.wait(240)
    except subprocess.TimeoutExpired:
        child.kill()
        raise AssertionError(f"the application did not fail at start:\n{child.log_tail()}") from None
    assert code != 0
    log = child.log_path.read_text()
    # Once: raised to the application, which prints it; the context's own log line names it only.
    assert (
        log.count("ReceiverSlotsError: 3 receiver(s) each hold a task slot for the life of the stream") == 1
    ), log
    assert log.count("Traceback (most recent call last)") == 1, log
    assert "2 task slot(s) (2 core(s), local-cluster[2,1,1024])" in log, log
    assert not child.started.is_set()


def test_graceful_stop_returns_with_a_receiver_job_still_queued(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    topics = new_topics(local_cluster)
    extra = (
        *("--conf", "spark.dynamicAllocation.enabled=true"),
        *("--conf", "spark.dynamicAllocation.shuffleTracking.enabled=true"),
        *("--conf", "spark.dynamicAllocation.initialExecutors=2"),
        *("--graceful-stop-timeout", "5s"),
    )
    args = child_args(local_cluster, tmp_path, topics, "local-cluster[2,1,1024]", *extra)
    child = ChildApp(0, args, tmp_path, module=CHILD)
    producers = start_producers(local_cluster, topics)
    output = tmp_path / "output.jsonl"
    try:
        child.wait_started()
        wait_until(
            lambda: child.check_alive() and bool(of_kind(read_output(output), "streaming_error")),
            timeout_s=120,
            what="the starved batches to be reported",
        )
        assert child.stop_gracefully(timeout_s=120) == 0, child.log_tail()
    finally:
        for producer in producers.values():
            producer.finish() if producer.is_alive() else None
        child.kill()
    entries = read_output(output)
    (report,) = of_kind(entries, "streaming_error")  # once, not once per batch
    assert "Batches are waiting for task slots" in report["message"]
    assert "hold all 2 task slot(s); 2 of them are receivers" in report["message"]
    assert len(of_kind(entries, "receiver_started")) == 2  # the third never got a slot
    log = child.log_path.read_text()
    assert "dynamic allocation may add executors" in log, log
    assert "never got a task slot" in log, log
    assert "stopped without waiting" not in log, log  # returned on its own, not abandoned
    assert "Receiver jobs still running" not in log, log
    assert of_kind(entries, "stopped")

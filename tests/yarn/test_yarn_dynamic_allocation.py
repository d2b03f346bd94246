"""Streaming dynamic allocation on YARN: executors removed and granted through the ResourceManager.

The executor-placement application (tests/e2e/cluster_child.py, as a file) submitted in client mode
(its driver here, appending its listener's events to a local file) with
``spark.streaming.dynamicAllocation`` on and ``spark.executor.instances`` left out, as Spark
requires: YARN then starts Spark's default of two executors. They have two cores each, so the
receiver's executor also runs the batches and ``minExecutors`` is 1. One run, short scaling
intervals:

1. Idle: every batch empty; the executor without the receiver is removed, down to
   ``minExecutors``: the decision names it, its YARN container ends and the ResourceManager counts
   one container fewer; the receiver's container runs on.
2. Surge: a slow sink (100 ms per record in the tasks) makes the batches exceed the batch
   interval: an executor is asked for within two scaling intervals of the first batch that took
   0.9 of the batch interval (the surge ends there), YARN grants its container within two
   intervals of the request, and it registers.
3. Nothing lost: every acknowledged record is in the output; the receiver never moved.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.hdfs import LocalHdfs
from reliable_kafka.local.yarn import LocalYarn, processes_under
from tests.cluster_backends import unique_name
from tests.e2e.kill_harness import RecordingProducer
from tests.e2e.packed_venv import PackedVenv
from tests.e2e.placement_app import (
    CHILD_FILE,
    PARTITIONS,
    SURGE_SINK_MS_PER_RECORD,
    acked,
    app_args,
    await_first_slow_batch,
    await_scheduling_delay_back,
    of_kind,
    read_output,
    received,
    start_producers,
    surge_timeline,
)
from tests.support import wait_until
from tests.yarn.submit import application_of, container_text, kill_application, submit

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.yarn, pytest.mark.brokers("3.9")]

INTERVAL_MS = 5000
ALLOCATION: dict[str, str | None] = {
    # Spark refuses streaming dynamic allocation with a fixed number of executors.
    "spark.executor.instances": None,
    "spark.streaming.dynamicAllocation.enabled": "true",
    "spark.streaming.dynamicAllocation.scalingInterval": f"{INTERVAL_MS}ms",
    "spark.streaming.dynamicAllocation.minExecutors": "1",
    "spark.streaming.dynamicAllocation.maxExecutors": "2",
    # The receiver's executor is the blocks' holder and has a core free for batches at once.
    "spark.locality.wait": "0",
    # A failed first attempt fails the test, instead of a second attempt hiding it.
    "spark.yarn.maxAppAttempts": "1",
}
# What each executor logs as it starts, in its container's stderr.
EXECUTOR_STARTED = re.compile(r"Starting executor ID (\S+) on host")


def decisions(output: Path, action: str | None = None, after_ms: float = 0) -> list[dict[str, Any]]:
    """The decisions so far (of ``action``, taken after ``after_ms``): the first batches, slow
    while Python workers start, may have asked for executors before the test's surge."""
    found = of_kind(read_output(output), "scaling")
    return [d for d in found if (action is None or d["action"] == action) and d["time_ms"] > after_ms]


def containers_used(yarn: LocalYarn, application_id: str) -> int:
    """The application's containers as the ResourceManager counts them (the application master's
    among them): allocated to it and not yet released."""
    return int((yarn.application(application_id) or {}).get("runningContainers", 0))


def executor_containers(yarn: LocalYarn, application_id: str) -> dict[str, str]:
    """Executor id -> the YARN container it runs in."""
    found = {}
    for container, text in container_text(yarn, application_id, "stderr").items():
        if match := EXECUTOR_STARTED.search(text):
            found[match.group(1)] = container
    return found


def container_processes(yarn: LocalYarn, application_id: str, container: str) -> list[int]:
    """The processes running in the container's working directory (none once it ended: the
    NodeManager removes the directory)."""
    directories = yarn.work_dir.glob(f"target/**/appcache/{application_id}/{container}")
    return [pid for directory in directories for pid in processes_under(directory)]


def test_executors_follow_the_load_on_yarn_never_the_receivers_container(
    local_cluster: LocalCluster,
    local_hdfs: LocalHdfs,
    local_yarn: LocalYarn,
    yarn_packed_venv: PackedVenv,
    tmp_path: Path,
) -> None:
    topic = unique_name("yarn-allocation")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    output = tmp_path / "output.jsonl"
    args, _ = app_args(
        local_cluster,
        output,
        [topic],
        checkpoint=f"{local_hdfs.url}/yarn/{topic}",
        wal=False,
        storage_level="MEMORY_AND_DISK_SER",
        master="yarn",
        extra_args=("--sink-ms-per-record", str(SURGE_SINK_MS_PER_RECORD), "--allocation-events"),
    )
    submission = submit(
        local_yarn,
        local_hdfs,
        yarn_packed_venv,
        name=topic,
        deploy_mode="client",
        app=CHILD_FILE,
        app_args=args,
        work=tmp_path,
        conf=ALLOCATION,
    )
    app_id = ""
    producers: dict[str, RecordingProducer] = {}

    def running() -> bool:
        assert submission.process.poll() is None, submission.output()[-6000:]
        return True

    try:
        app_id = application_of(local_yarn, submission)["id"]

        # 1. Idle: down to minExecutors, never the receiver's executor or container.
        wait_until(
            lambda: (
                running()
                and bool(decisions(output, "down"))
                and decisions(output)[-1]["reason"] == "at minExecutors (1)"
                and bool(of_kind(read_output(output), "receiver_started"))
            ),
            timeout_s=420,
            what="the idle executor removed, down to minExecutors",
        )
        (receiver,) = of_kind(read_output(output), "receiver_started")
        (down,) = decisions(output, "down")
        assert (down["executors"], down["target"]) == (2, 1), down
        assert down["executor_id"] != receiver["executor_id"], (down, receiver)
        containers = executor_containers(local_yarn, app_id)
        assert {receiver["executor_id"], down["executor_id"]} <= containers.keys(), containers
        receivers_container = containers[receiver["executor_id"]]
        removed_container = containers[down["executor_id"]]
        assert removed_container != receivers_container, containers
        wait_until(
            lambda: not container_processes(local_yarn, app_id, removed_container),
            timeout_s=60,
            what=f"the removed executor's container {removed_container} to end",
        )
        # The application master's container and the receiver's executor's.
        wait_until(lambda: containers_used(local_yarn, app_id) == 2, what="YARN to count 2 containers")
        assert container_processes(local_yarn, app_id, receivers_container), receivers_container

        # 2. Surge: an executor asked for within two intervals of the first slow batch; the surge
        # ends there, so that the backlog the slow sink then drains stays small.
        surge_ms = time.time() * 1000
        producers = start_producers(local_cluster, [topic])
        try:
            wait_until(
                lambda: running() and bool(decisions(output, "up", after_ms=surge_ms)),
                timeout_s=180,
                what="a scale-up",
            )
        finally:
            for producer in producers.values():
                producer.finish()
        (up, *_) = decisions(output, "up", after_ms=surge_ms)
        first = await_first_slow_batch(output, after_ms=surge_ms)
        entries = read_output(output)
        timeline = surge_timeline(entries, surge_ms)
        # Within two intervals of the first slow batch's start: the first may average too little of
        # its time so far with the idle batches completed before it; the next counts it whole, or
        # as far as it ran.
        assert up["time_ms"] / 1000 - first["time"] <= 2 * INTERVAL_MS / 1000 + 1, timeline
        assert (up["executors"], up["target"]) == (1, 2) and up["ratio"] >= 0.9, up
        # YARN grants the container (its ResourceManager counts it), then the executor registers.
        wait_until(
            lambda: running() and containers_used(local_yarn, app_id) == 3,
            timeout_s=120,
            what="YARN to grant the executor's container",
        )
        granted_in = time.time() - up["time_ms"] / 1000
        assert granted_in <= 2 * INTERVAL_MS / 1000, f"granted {granted_in:.1f} s after the request"
        wait_until(
            lambda: (
                running()
                and any(
                    e["count"] == 2
                    for e in of_kind(read_output(output), "executors")
                    if e["time"] > first["time"]
                )
            ),
            timeout_s=240,
            what="the executor asked for to register",
        )
        registered_in = time.time() - up["time_ms"] / 1000
        # The backlog the surge built drains: the scheduling delay falls back under the batch interval.
        peak_delay_ms, back_delay_ms = await_scheduling_delay_back(output, surge_ms, up["time_ms"])

        # 3. Nothing lost, and the receiver ran where it started throughout.
        expected = acked(producers)
        assert expected, "nothing was produced"
        wait_until(
            lambda: running() and expected <= set(received(read_output(output))),
            timeout_s=180,
            what="every acknowledged record in the output",
        )
        entries = read_output(output)
        assert max(b["processing_ms"] for b in of_kind(entries, "batch_done")) > 1000
        assert len(of_kind(entries, "receiver_started")) == 1, of_kind(entries, "receiver_started")
        assert not of_kind(entries, "receiver_error"), of_kind(entries, "receiver_error")
        # Once the backlog has drained the batches are idle again, and the executor the surge
        # added may go as well (the 100 ms sink drains long enough for an idle interval): never
        # the receiver's.
        removed = [d["executor_id"] for d in decisions(output, "down")]
        assert removed[0] == down["executor_id"], removed
        assert receiver["executor_id"] not in removed, (removed, receiver)
        assert container_processes(local_yarn, app_id, receivers_container), receivers_container
        print(
            f"dynamic allocation on YARN: executor {down['executor_id']} ({removed_container}) removed "
            f"idle; asked for one more {up['time_ms'] / 1000 - first['time']:.1f} s into the surge "
            f"(load {up['ratio']:.2f}, {up['basis']}), "
            f"granted {granted_in:.1f} s and registered {registered_in:.1f} s after; scheduling delay "
            f"{peak_delay_ms / 1000:.1f} s at most, back to {back_delay_ms} ms; "
            f"{len(expected)} records, none lost"
        )
    finally:
        for producer in producers.values():
            if producer.is_alive():
                producer.finish()
        if app_id:
            kill_application(local_yarn, app_id)
            # The receiver's block store in shared memory, on the executor YARN killed.
            for leftover in Path("/dev/shm").glob(f"reliable-kafka-{app_id}-*"):
                shutil.rmtree(leftover, ignore_errors=True)
        submission.end()

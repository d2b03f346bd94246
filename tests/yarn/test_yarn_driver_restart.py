"""Cluster mode on YARN: the application master (the driver) dies, YARN starts attempt 2, and
``StreamingContext.getOrCreate`` recovers from the checkpoint on HDFS.

The application is tests/e2e/deploy_app.py (the README's shape: ``getOrCreate``, ``createStream``,
the write-ahead log on), submitted with ``spark.yarn.maxAppAttempts=2``. One broker per offset
store: on Kafka 3.9 the group and its offsets are in ZooKeeper, on Kafka 4 (no ZooKeeper) in
Kafka's group coordinator (``--kafka 3.9,4`` runs both; the default run, 3.9 only).
Mid-stream, with records just produced and not yet all output, every process of the application
master's container is SIGKILLed: what a lost driver node does to it. YARN fails attempt 1 (and kills
its executors), starts attempt 2, whose driver logs the recovered checkpoint; the records produced
after the kill arrive once each, the ones before it at most twice (the batches the dead driver had
not finished run again, and a block stored but not yet committed is read again; those produced
before the start, committed before the kill, never from Kafka again), nothing is lost, and the
group's offsets (in ZooKeeper, or in Kafka) end at the log end. Then ``yarn application
-kill`` (``LocalYarn.yarn``: the class ``bin/yarn`` runs) SIGTERMs attempt 2's driver, which stops
gracefully (``stopGracefullyOnShutdown``) within the NodeManagers' SIGKILL delay, raised for it
(see conftest).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.hdfs import LocalHdfs
from reliable_kafka.local.yarn import LocalYarn, processes_under
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets, produce
from tests.e2e.packed_venv import PackedVenv
from tests.support import wait_until
from tests.yarn.conftest import SIGKILL_DELAY_MS
from tests.yarn.submit import application_of, container_text, kill_application, read_rows, submit

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.yarn, pytest.mark.brokers("3.9", "4")]

APP = Path(__file__).parents[1] / "e2e" / "deploy_app.py"
PARTITIONS = 2
BEFORE, DURING, AFTER = 100, 100, 100


def values(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


def master_container_dir(yarn: LocalYarn, application_id: str, attempt: int) -> Path | None:
    """The working directory of the attempt's application master container (its first one)."""
    pattern = f"target/**/appcache/{application_id}/container_*_{attempt:02d}_000001"
    return next(iter(sorted(yarn.work_dir.glob(pattern))), None)


def test_driver_killed_yarn_starts_attempt_two(
    local_cluster: LocalCluster,
    local_hdfs: LocalHdfs,
    local_yarn: LocalYarn,
    yarn_packed_venv: PackedVenv,
    tmp_path: Path,
) -> None:
    topic, group = unique_name("yarn-restart"), unique_name("yarn-restart-group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    output = tmp_path / "output.jsonl"
    checkpoint = f"{local_hdfs.url}/yarn/{topic}"

    def send(batch: list[str]) -> None:
        produce(local_cluster, topic, ((None, v.encode(), i % PARTITIONS) for i, v in enumerate(batch)))

    def seen() -> Counter[str]:
        return Counter(row["value"] for row in read_rows(output))

    # The group in ZooKeeper where the cluster has one (3.9), else in Kafka's group coordinator (4).
    if local_cluster.has_zookeeper:
        group_in = [local_cluster.zookeeper_connect]
    else:
        group_in = ["--bootstrap-servers", local_cluster.bootstrap_servers, "-"]
    send(values("before", BEFORE))
    submission = submit(
        local_yarn,
        local_hdfs,
        yarn_packed_venv,
        name=topic,
        deploy_mode="cluster",
        app=APP,
        app_args=[*group_in, group, topic, checkpoint, str(output)],
        work=tmp_path,
        conf={
            "spark.yarn.maxAppAttempts": "2",
            "spark.streaming.receiver.writeAheadLog.enable": "true",
            "spark.streaming.stopGracefullyOnShutdown": "true",
        },
    )
    app_id = ""
    try:
        app_id = application_of(local_yarn, submission)["id"]
        wait_until(
            lambda: seen() or submission.process.poll() is not None, timeout_s=420, what="the first batch"
        )
        assert submission.process.poll() is None, submission.output()[-6000:]

        # 1. Mid-stream: records just produced, then the driver's container dies at once.
        send(values("during", DURING))
        first = master_container_dir(local_yarn, app_id, 1)
        assert first is not None
        doomed = processes_under(first)
        assert doomed, f"no process runs in {first}"
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        killed_at_ms = time.time() * 1000
        send(values("after", AFTER))

        # 2. YARN starts attempt 2; its driver recovers the checkpoint and the stream goes on.
        wait_until(lambda: len(local_yarn.attempts(app_id)) >= 2, timeout_s=180, what="attempt 2")
        attempt_two_in = time.monotonic() - killed_at
        wait_until(
            lambda: any(v.startswith("after-") for v in seen()) or submission.process.poll() is not None,
            timeout_s=420,
            what="attempt 2 to process the records produced after the kill",
        )
        flowing_in = time.monotonic() - killed_at
        produced = values("before", BEFORE) + values("during", DURING) + values("after", AFTER)
        wait_until(
            lambda: set(seen()) >= set(produced) or submission.process.poll() is not None,
            timeout_s=300,
            what="every record",
        )
        assert submission.process.poll() is None, submission.output()[-6000:]
        counts = seen()

        # 3. Nothing lost; the records produced after the kill once each, the earlier ones at
        # most twice (a batch the dead driver had not finished runs again).
        assert set(counts) == set(produced)
        assert all(counts[v] == 1 for v in values("after", AFTER)), counts
        duplicates = {v: n for v, n in counts.items() if n > 1}
        assert all(n == 2 for n in duplicates.values()), duplicates
        # The records produced before the start were output, so their offsets were committed,
        # before the kill: attempt 2 may run their batch again (it keeps its time, before the
        # kill), never read them from Kafka again (a batch of its own, after the kill). Every
        # record of before and during the kill output twice is no sign of that: the pending batch
        # run again, and the block stored but not yet committed read again.
        read_again = sorted(
            row["value"]
            for row in read_rows(output)
            if row["value"].startswith("before-") and row["batch_ms"] > killed_at_ms
        )
        assert not read_again, f"attempt 2 read {len(read_again)} committed records again: {read_again[:5]}"
        log_end = log_end_offsets(local_cluster, topic, PARTITIONS)
        assert sum(log_end.values()) == len(produced)
        wait_until(
            lambda: committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end,
            timeout_s=60,
            what="the group's offsets committed to the log end",
        )

        # 4. Attempt 2's driver (the first container of attempt 2) started from the checkpoint. (In
        # cluster mode Spark passes the Python driver's stderr to the container's stdout.)
        stdouts = container_text(local_yarn, app_id, "stdout")
        second = [text for container, text in stdouts.items() if container.endswith("_02_000001")]
        assert len(second) == 1 and "Recovered checkpoint of" in second[0], sorted(stdouts)
        assert f"Took over the lease on checkpoint {checkpoint}" in second[0], second[0][-4000:]
        states = [attempt.get("appAttemptState") for attempt in local_yarn.attempts(app_id)]

        # 5. `yarn application -kill`: SIGTERM to the driver's container; with
        # stopGracefullyOnShutdown and the NodeManagers' SIGKILL delay raised, the stop is graceful
        # and ends within its bound (gracefulStopTimeout + stopTimeout: 40 s here), before YARN's
        # SIGKILL. (A driver behind the clock leaves the batches still queued then to a restart.)
        kill_began = time.monotonic()
        killing = local_yarn.yarn("application", "-kill", app_id)
        assert killing.returncode == 0, killing.stdout + killing.stderr
        assert kill_application(local_yarn, app_id)["state"] == "KILLED"

        def driver_output() -> str:
            texts = container_text(local_yarn, app_id, "stdout")
            return "".join(t for c, t in texts.items() if c.endswith("_02_000001"))

        wait_until(
            lambda: "StreamingContext stopped successfully" in driver_output(),
            timeout_s=SIGKILL_DELAY_MS / 1000,
            what="the graceful stop on `yarn application -kill`",
        )
        stopped_in = time.monotonic() - kill_began
        assert "Invoking stop(stopGracefully=True) from shutdown hook" in driver_output()
        print(
            f"driver restart on YARN (kafka {local_cluster.kafka}): attempt 2 registered "
            f"{attempt_two_in:.1f} s after the kill, "
            f"records flowing again after {flowing_in:.1f} s; {len(duplicates)} records twice "
            f"of {len(produced)}; attempts {states}; killed, stopped gracefully in {stopped_in:.1f} s"
        )
    finally:
        if app_id:
            kill_application(local_yarn, app_id)
            # The block store in shared memory of attempt 1's executor, which YARN killed.
            for leftover in Path("/dev/shm").glob(f"reliable-kafka-{app_id}-*"):
                shutil.rmtree(leftover, ignore_errors=True)
        submission.end()

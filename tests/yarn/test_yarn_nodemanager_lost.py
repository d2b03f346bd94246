"""A NodeManager lost with the receiver's executor on it: YARN gives the application another
container on another NodeManager, the receiver is launched again there, and nothing is lost.

A cluster of its own: the session's NodeManagers are MiniYARNCluster's, in its JVM and all on
``localhost``, so that none can be lost alone. Here three NodeManagers are processes of their own
on 127.0.0.11-13 (``LocalYarn(nodemanager_processes=True)``), each with room for one of Spark's
smallest containers (1024 MB of 1536): the application master, the executor that runs the
receiver and the executor that replaces it are on three different hosts, whatever order YARN
places them in. Client mode: the driver runs here and its log is spark-submit's output.

The application is tests/e2e/deploy_app.py (``createStream`` with its group in ZooKeeper, the
receiver's write-ahead log on HDFS). Mid-stream, the NodeManager whose container runs the receiver
is lost as a machine is: SIGKILL to it and to every process of its containers, no word to anyone.
The ResourceManager declares the node LOST once its heartbeats stop
(``yarn.nm.liveness-monitor.expiry-interval-ms``, 15 s here, 10 min by default) and tells Spark's
application master that the executor's container is gone; Spark asks for another, which only the
third NodeManager can hold, and the receiver tracker launches the receiver on it. Which container
ran the receiver, before and after, comes from the driver's "Registered receiver" lines and from
the containers' logs: the lost one's from its NodeManager's disk, the new one's from YARN's
aggregated logs (``yarn logs -applicationId``), after ``yarn application -kill`` has ended the
application (a NodeManager aggregates an application's logs when it ends).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.hdfs import LocalHdfs
from reliable_kafka.local.yarn import LocalYarn
from reliable_kafka.local.yarn_nodemanager import YarnNodeManager, processes_under
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets, produce
from tests.e2e.packed_venv import PackedVenv
from tests.support import wait_until
from tests.yarn.submit import application_of, kill_application, read_rows, submit

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.yarn, pytest.mark.brokers("3.9")]

APP = Path(__file__).parents[1] / "e2e" / "deploy_app.py"
PARTITIONS = 2
BEFORE, DURING, AFTER = 100, 100, 100
# Room for one container of Spark's smallest (512 MB heap + 384 MB overhead, rounded up to 1024).
NODEMANAGER_MEMORY_MB = 1536
# How long the ResourceManager waits for a silent NodeManager's heartbeat (default 10 minutes).
NODEMANAGER_EXPIRY_MS = 15_000
# The driver's line (reliable_kafka.scheduler.receiver_tracker, INFO) for each receiver launch.
REGISTERED = re.compile(r"Registered receiver for stream 0 from (\S+)/(\S+)")
# The receiver's first write-ahead log write in a process, in its executor container's stderr.
RECEIVER_LINE = re.compile(r"WARNING wal\.file_based \[receiver 0\]: write-ahead log \S+/receivedData/0: ")
_CONTAINER_HEADER = re.compile(r"^Container: (container_\S+) on (\S+)\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def nodemanager_hosts(local_hdfs: LocalHdfs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalYarn]:
    """A ResourceManager and three NodeManager processes, log aggregation on (to the session's HDFS)."""
    conf = {
        "yarn.nm.liveness-monitor.expiry-interval-ms": str(NODEMANAGER_EXPIRY_MS),
        "yarn.log-aggregation-enable": "true",
        "yarn.nodemanager.remote-app-log-dir": "/yarn-app-logs",
        # The containers' own log directories stay after aggregation: the lost NodeManager's are
        # read from its disk, as an operator would read a dead machine's.
        "yarn.nodemanager.delete.debug-delay-sec": "3600",
    }
    started = time.monotonic()
    work = tmp_path_factory.mktemp("yarn-nodemanager-hosts")
    with LocalYarn(
        work,
        nodemanagers=3,
        nodemanager_memory_mb=NODEMANAGER_MEMORY_MB,
        default_fs=local_hdfs.url,
        conf=conf,
        nodemanager_processes=True,
    ) as yarn:
        print(f"YARN with NodeManager processes up in {time.monotonic() - started:.1f} s: {yarn}")
        yield yarn


def values(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


def nodemanager_named(yarn: LocalYarn, host: str) -> YarnNodeManager:
    """The NodeManager whose node Spark names ``host`` (its executors' host is the node's)."""
    ports = {node["id"].rsplit(":", 1)[1] for node in yarn.nodes() if node.get("nodeHostName") == host}
    found = [nm for nm in yarn.nodemanager_hosts if nm.address == host or str(nm.port) in ports]
    assert len(found) == 1, (host, yarn.nodes())
    return found[0]


def receiver_containers(log_dir: Path) -> list[str]:
    """The containers under ``log_dir`` (one NodeManager's, one application's) that ran the receiver."""
    return sorted(
        container.name
        for container in log_dir.glob("container_*")
        if (container / "stderr").is_file() and RECEIVER_LINE.search((container / "stderr").read_text())
    )


def aggregated_logs(yarn: LocalYarn, application_id: str) -> dict[str, str]:
    """Container id -> its logs, as ``yarn logs -applicationId`` prints them (empty until aggregated)."""
    answer = yarn.yarn("logs", "-applicationId", application_id)
    # [preamble, container, node, text, container, node, text, ...]: a header per log file.
    parts = _CONTAINER_HEADER.split(answer.stdout)
    logs: dict[str, str] = {}
    for i in range(1, len(parts) - 2, 3):
        logs[parts[i]] = logs.get(parts[i], "") + parts[i + 2]
    return logs


def test_nodemanager_lost_the_receiver_comes_back_in_another_container(
    local_cluster: LocalCluster,
    local_hdfs: LocalHdfs,
    nodemanager_hosts: LocalYarn,
    yarn_packed_venv: PackedVenv,
    tmp_path: Path,
) -> None:
    yarn = nodemanager_hosts
    topic, group = unique_name("yarn-nm-lost"), unique_name("yarn-nm-lost-group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    output = tmp_path / "output.jsonl"
    checkpoint = f"{local_hdfs.url}/yarn/{topic}"

    def send(batch: list[str]) -> None:
        produce(local_cluster, topic, ((None, v.encode(), i % PARTITIONS) for i, v in enumerate(batch)))

    def seen() -> Counter[str]:
        return Counter(row["value"] for row in read_rows(output))

    def registrations() -> list[tuple[str, str]]:
        return REGISTERED.findall(submission.output())

    send(values("before", BEFORE))
    submission = submit(
        yarn,
        local_hdfs,
        yarn_packed_venv,
        name=topic,
        deploy_mode="client",
        app=APP,
        app_args=[local_cluster.zookeeper_connect, group, topic, checkpoint, str(output)],
        work=tmp_path,
        conf={"spark.yarn.maxAppAttempts": "1", "spark.streaming.receiver.writeAheadLog.enable": "true"},
    )
    app_id = ""
    try:
        app_id = application_of(yarn, submission)["id"]
        wait_until(
            lambda: seen() or submission.process.poll() is not None, timeout_s=420, what="the first batch"
        )
        assert submission.process.poll() is None, submission.output()[-6000:]

        # 1. The receiver runs in a container of one NodeManager; the application master is on another.
        [(first_host, first_executor)] = registrations()
        doomed = nodemanager_named(yarn, first_host)
        lost_containers = receiver_containers(doomed.log_dir / app_id)
        assert len(lost_containers) == 1, sorted((doomed.log_dir / app_id).glob("*"))
        masters = [c for c in yarn.container_logs(app_id) if c.endswith("_000001")]
        assert masters, sorted(yarn.container_logs(app_id))
        assert not (doomed.log_dir / app_id / masters[0]).exists(), "the AM is on the receiver's node"

        # 2. Records just produced, then the machine is gone: the NodeManager and its containers.
        send(values("during", DURING))
        killed = doomed.lose()
        lost_at = time.monotonic()
        send(values("after", AFTER))
        wait_until(
            lambda: any(n["state"] == "LOST" and n["id"].endswith(f":{doomed.port}") for n in yarn.nodes()),
            timeout_s=120,
            what=f"the ResourceManager to declare {doomed.address} LOST",
        )
        declared_lost_in = time.monotonic() - lost_at

        # 3. The receiver is launched again, in an executor of another NodeManager.
        wait_until(
            lambda: len(registrations()) >= 2 or submission.process.poll() is not None,
            timeout_s=300,
            what="the receiver to register again",
        )
        relaunched_in = time.monotonic() - lost_at
        assert submission.process.poll() is None, submission.output()[-6000:]
        second_host, second_executor = registrations()[1]
        assert second_host != first_host and second_executor != first_executor, registrations()
        survivor = nodemanager_named(yarn, second_host)
        assert survivor is not doomed

        # 4. Nothing lost: the records produced after the loss once each, the earlier ones at most
        # twice (stored by the lost receiver, not yet committed: read again from the group's offsets).
        produced = values("before", BEFORE) + values("during", DURING) + values("after", AFTER)
        wait_until(
            lambda: set(seen()) >= set(produced) or submission.process.poll() is not None,
            timeout_s=300,
            what="every record",
        )
        assert submission.process.poll() is None, submission.output()[-6000:]
        flowing_in = time.monotonic() - lost_at
        counts = seen()
        assert set(counts) == set(produced)
        assert all(counts[v] == 1 for v in values("after", AFTER)), counts
        duplicates = {v: n for v, n in counts.items() if n > 1}
        assert all(n == 2 for n in duplicates.values()), duplicates
        log_end = log_end_offsets(local_cluster, topic, PARTITIONS)
        wait_until(
            lambda: committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end,
            timeout_s=60,
            what="the group's offsets committed to the log end",
        )
        # The new receiver's container, on the surviving NodeManager: its line is there once it
        # has stored a block (it registers before).
        new_containers = receiver_containers(survivor.log_dir / app_id)
        assert len(new_containers) == 1 and new_containers != lost_containers, new_containers

        # 5. `yarn application -kill`, then YARN's aggregated logs: the new receiver's container
        # with our receiver's line; nothing of the lost NodeManager's containers (it never aggregates).
        killing = yarn.yarn("application", "-kill", app_id)
        assert killing.returncode == 0, killing.stdout + killing.stderr
        assert kill_application(yarn, app_id)["state"] == "KILLED"
        aggregated: dict[str, str] = {}

        def aggregated_receiver() -> bool:
            aggregated.update(aggregated_logs(yarn, app_id))
            return any(RECEIVER_LINE.search(aggregated.get(c, "")) for c in new_containers)

        wait_until(aggregated_receiver, timeout_s=180, what="the receiver's lines in `yarn logs`")
        assert not set(lost_containers) & set(aggregated), sorted(aggregated)
        print(
            f"NodeManager lost on YARN: receiver in {lost_containers[0]} ({first_host}), "
            f"{len(killed)} processes killed; node LOST after {declared_lost_in:.1f} s, receiver "
            f"registered again after {relaunched_in:.1f} s in {new_containers[0]} ({second_host}), "
            f"every record output after {flowing_in:.1f} s; {len(duplicates)} records twice of "
            f"{len(produced)}; aggregated logs of {len(aggregated)} containers"
        )
    finally:
        if app_id:
            kill_application(yarn, app_id)
            # The executors' block stores in shared memory: the lost one's (its machine's memory,
            # gone), and the last one's if its container is stopped before it removes its own.
            with contextlib.suppress(AssertionError):  # a cleanup: never hides the test's own failure
                wait_until(
                    lambda: not any(processes_under(nm.work_dir / "local") for nm in yarn.nodemanager_hosts),
                    timeout_s=60,
                    what=f"the containers of {app_id} to end",
                )
            for leftover in Path("/dev/shm").glob(f"reliable-kafka-{app_id}-*"):
                shutil.rmtree(leftover, ignore_errors=True)
        submission.end()

"""Every stop path ends within a bound, whatever ZooKeeper, Kafka or Spark are doing (issue 14), a
SIGTERM during a stop lets that stop finish (issue 16), and stops say what they do (issue 42): an
immediate stop on SIGTERM is one INFO line and no error, a crashed driver's JVM exits quietly, a
graceful stop with batches queued warns once, naming the bound it then keeps to.

Each case runs the application of ``stop_child.py`` in a process (and session) of its own: it
faults ZooKeeper, the broker or Spark, then stops; the test times the stop to the exit. A case
that kills ZooKeeper or the broker starts its own; the others use the session's cluster, with a
topic and group of their own.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from reliable_kafka.local import LocalCluster
from tests.e2e.console import noise
from tests.e2e.processes import cmdline, describe, session_processes
from tests.support import read_json_lines, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Issue 14's acceptance bound from stop() (or the exception) to the process's exit.
STOP_BOUND_S = 30.0
# Starting ZooKeeper, a broker and Spark, and the first batch, on a loaded two-core machine.
START_TIMEOUT_S = 300.0
PRODUCED = 200
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Child:
    process: subprocess.Popen[str]
    output: Path
    stderr: Path
    lines: queue.Queue[str]

    def wait_for_line(self, expected: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if self.process.poll() is not None:
                    code = self.process.returncode
                    pytest.fail(f"the child exited ({code}) before {expected!r}: {self.log()}")
                continue
            if line == expected:
                return
        pytest.fail(f"no {expected!r} from the child within {START_TIMEOUT_S} s: {self.log()}")

    def wait_for_exit(self) -> float:
        """Seconds until the child exits; fails (after a thread dump) past the bound."""
        started = time.monotonic()
        try:
            self.process.wait(timeout=STOP_BOUND_S)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGUSR1)  # stop_child dumps its threads: where it hangs
            time.sleep(2)
            pytest.fail(f"the child did not exit within {STOP_BOUND_S} s: {self.log()}")
        return time.monotonic() - started

    def entries(self) -> list[dict[str, Any]]:
        return read_json_lines(self.output)

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")[-12_000:]


def start_child(
    tmp_path: Path, kafka: str, fault: str, end: str, *extra: str, cluster: LocalCluster | None = None
) -> Child:
    """``cluster``: the session's, for a fault that leaves the servers alone."""
    output, stderr = tmp_path / "out.jsonl", tmp_path / "stderr.log"
    if cluster is not None:
        name = re.sub(r"[^a-zA-Z0-9._-]", "-", tmp_path.name)
        extra = (
            *extra,
            *("--zookeeper-connect", cluster.zookeeper_connect),
            *("--bootstrap-servers", cluster.bootstrap_servers),
            *("--topic", f"stop-{name}", "--group", f"stop-{name}"),
        )
    with stderr.open("w") as err:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.e2e.stop_child", "--kafka", kafka),
                *("--fault", fault, "--end", end, "--output", str(output)),
                *("--checkpoint", str(tmp_path / "checkpoint"), *extra),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True).start()
    return Child(process, output, stderr, lines)


def _read_lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line.strip())


@pytest.fixture
def reap() -> Any:
    """Kills what a failed case leaves of a child's session (JVMs of its cluster and of Spark)."""
    children: list[Child] = []
    yield children.append
    for child in children:
        if child.process.poll() is None:
            child.process.kill()
            child.process.wait()
        for pid in session_processes(child.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def assert_nothing_left(child: Child) -> None:
    """The child's exit took its ZooKeeper, broker and Spark JVMs with it."""
    wait_until(
        lambda: not session_processes(child.process.pid),
        timeout_s=30,
        what=f"the child's processes to go: {describe(session_processes(child.process.pid))}",
    )


# Driver placement keeps the receivers' kazoo clients in the process that exits; executor
# placement (local[4]: Python workers of the same host) stops them through the tracker.
@pytest.mark.parametrize(
    ("fault", "end", "placement"),
    [
        ("zookeeper", "stop", "driver"),
        ("zookeeper", "graceful", "driver"),
        ("zookeeper", "raise", "driver"),
        ("zookeeper", "graceful", "executors"),
        ("zookeeper", "raise", "executors"),
        ("broker", "stop", "driver"),
        ("broker", "raise", "driver"),
        ("spark", "stop", "driver"),
    ],
)
def test_stop_ends_within_the_bound_after_a_fault(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    kafka_version: str,
    reap: Any,
    fault: str,
    end: str,
    placement: str,
) -> None:
    shared = None if fault in ("zookeeper", "broker") else request.getfixturevalue("local_cluster")
    child = start_child(tmp_path, kafka_version, fault, end, "--placement", placement, cluster=shared)
    reap(child)
    child.wait_for_line("stopping")
    took_s = child.wait_for_exit()
    log = child.log()
    print(f"{fault}/{end}/{placement}: exited {took_s:.1f} s after the stop began")
    # "raise": the exception leaves the with block, the exit-time hook stops the context.
    assert child.process.returncode == (1 if end == "raise" else 0), log
    assert "AppFailed" in log if end == "raise" else {"event": "stopped"} in strip_times(child.entries())
    assert "cannot schedule new futures" not in log
    assert_nothing_left(child)


def strip_times(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in entry.items() if k != "at"} for entry in entries]


@pytest.mark.parametrize(
    ("stop_on", "placement"), [("sigterm", "driver"), ("sigterm", "executors"), ("graceful", "driver")]
)
def test_sigterm_during_a_stop_lets_that_stop_finish(
    tmp_path: Path, kafka_version: str, local_cluster: LocalCluster, reap: Any, stop_on: str, placement: str
) -> None:
    """``sigterm``: SIGTERM starts a graceful stop (stopGracefullyOnShutdown), a second one comes
    during it. ``graceful``: the application's own ``stop(stopGraceFully=True)`` is running (no
    handler of ours installed at start) when two SIGTERMs come. Either way the batch in progress
    (a slow sink) ends, every record received is output, and then the signal ends the process."""
    child = start_child(
        tmp_path,
        kafka_version,
        "none",
        stop_on,
        *("--sink-delay-ms", "8000", "--placement", placement),
        cluster=local_cluster,
    )
    reap(child)
    child.wait_for_line("waiting" if stop_on == "sigterm" else "stopping")
    if stop_on == "sigterm":
        child.process.send_signal(signal.SIGTERM)
    # The receivers are stopped, the generator waits for the batch in the slow sink.
    wait_until(lambda: "Stopping JobGenerator gracefully" in child.log(), timeout_s=60, what="the stop")
    child.process.send_signal(signal.SIGTERM)
    child.process.send_signal(signal.SIGTERM)
    took_s = child.wait_for_exit()
    print(f"{stop_on}/{placement}: exited {took_s:.1f} s after the SIGTERMs")
    log = child.log()
    assert child.process.returncode == -signal.SIGTERM, log
    # Batches queued behind the slow one (1 s batches): said once, at WARNING, with the bound.
    (announced,) = [line for line in log.splitlines() if "WARNING" in line and "Stopping gracefully" in line]
    bound = "20 s (spark.streaming.gracefulStopTimeout 10 s + spark.streaming.stopTimeout 10 s)"
    assert "queued and 1 running" in announced and bound in announced, announced
    assert "Abandoned" not in log and "stopped without waiting" not in log, log
    entries = strip_times(child.entries())
    begun = [e["begin"] for e in entries if "begin" in e]
    ended = [e["end"] for e in entries if "end" in e]
    assert begun == ended, entries
    assert sum(ended) == PRODUCED, entries
    assert "StreamingContext stopped successfully" in log
    assert {"event": "stopped"} not in entries  # the signal ended it, after the stop
    assert_nothing_left(child)


def spark_jvm(session_id: int) -> int:
    """The driver JVM of the child's SparkContext (pyspark's gateway: SparkSubmit)."""
    (pid,) = [
        pid
        for pid in session_processes(session_id)
        if "org.apache.spark.deploy.SparkSubmit" in " ".join(cmdline(pid))
    ]
    return pid


@pytest.mark.parametrize("placement", ["driver", "executors"])
def test_sigterm_to_the_driver_jvm_stops_the_streams_before_spark(
    tmp_path: Path, kafka_version: str, local_cluster: LocalCluster, reap: Any, placement: str
) -> None:
    """A cluster manager's stop often signals the driver JVM, not Python (Kubernetes' init in
    Spark's image, YARN, a kill of spark-submit): the JVM runs its shutdown hooks, and ours,
    before Spark's, stops the streams gracefully (stopGracefullyOnShutdown) as Spark's
    StreamingContext hook does. The batch in progress (a slow sink) ends and every record
    received is output; before, Spark stopped the SparkContext under the running batch."""
    child = start_child(
        tmp_path,
        kafka_version,
        "none",
        "sigterm",
        *("--sink-delay-ms", "8000", "--placement", placement),
        cluster=local_cluster,
    )
    reap(child)
    child.wait_for_line("waiting")
    os.kill(spark_jvm(child.process.pid), signal.SIGTERM)
    took_s = child.wait_for_exit()
    print(f"JVM SIGTERM/{placement}: exited {took_s:.1f} s after it")
    log = child.log()
    entries = strip_times(child.entries())
    begun = [e["begin"] for e in entries if "begin" in e]
    ended = [e["end"] for e in entries if "end" in e]
    assert begun == ended, (entries, log)
    assert sum(ended) == PRODUCED, (entries, log)
    assert "The driver JVM is shutting down: stopping the streaming context first" in log
    assert "StreamingContext stopped successfully" in log
    # Every batch generated ran while Spark was up (before: each failed with "Connection refused").
    assert "Error running job" not in log and "Error generating jobs" not in log, log
    assert_nothing_left(child)


def test_sigterm_without_graceful_shutdown_stops_at_once_saying_so_and_nothing_else(
    tmp_path: Path, kafka_version: str, local_cluster: LocalCluster, reap: Any
) -> None:
    """Spark's default (no stopGracefullyOnShutdown), receivers on executors: SIGTERM stops the
    stream at once and says so in one INFO line. Before, the signal ended the driver under its
    receivers: their tasks failed to store blocks (ConnectionClosed, four times), to deregister
    (a traceback), and Spark logged their tasks' failures with Java stacks."""
    placement, spark_log = ("--placement", "executors"), ("--spark-log-level", "WARN")
    child = start_child(
        tmp_path, kafka_version, "none", "sigterm-now", *placement, *spark_log, cluster=local_cluster
    )
    reap(child)
    child.wait_for_line("waiting")
    child.process.send_signal(signal.SIGTERM)
    took_s = child.wait_for_exit()
    print(f"SIGTERM, immediate: exited {took_s:.1f} s after it")
    assert_nothing_left(child)  # every JVM of the session is gone: what they logged is in
    log = child.log()
    assert child.process.returncode == -signal.SIGTERM, log
    said = [line for line in log.splitlines() if "from shutdown hook" in line]
    assert len(said) == 1 and " INFO " in said[0] and "an immediate stop" in said[0], log
    assert "StreamingContext stopped successfully" in log
    after = log[log.index("Received SIGTERM") :]
    assert noise(after) == [], after  # no ERROR, WARN or traceback of the stop's own doing
    for symptom in ("failed (attempt", "Could not deregister", "Exception in task", "ShutdownHook"):
        assert symptom not in log, log


def test_a_crashed_driver_leaves_its_jvm_to_exit_quietly(
    tmp_path: Path, kafka_version: str, local_cluster: LocalCluster, reap: Any
) -> None:
    """The Python driver dies (SIGKILL) with the context running: its JVM exits on its own and
    runs the shutdown hook the context registered, which finds no Python to call. Before,
    Hadoop logged "ShutdownHook '$Proxy32' failed" with py4j's Py4JException for every crash."""
    child = start_child(
        tmp_path, kafka_version, "none", "sigterm-now", "--spark-log-level", "WARN", cluster=local_cluster
    )
    reap(child)
    child.wait_for_line("waiting")
    child.process.kill()
    child.process.wait()
    assert_nothing_left(child)  # the JVM ran its hooks and exited: what it logged is in
    log = child.log()
    assert "ShutdownHook" not in log and "Py4JException" not in log, log

"""The "Running on a cluster" recipe (docs/cluster.md), run as written: a packed virtualenv shipped with
``spark-submit --archives``, on a standalone master with two worker hosts (LocalSparkHosts).

The workers are started without ``PYTHONPATH`` and have no package of ours: executors can import
``reliable_kafka`` only from the archive Spark unpacks into their working directory. The driver
runs spark-submit's client mode with this interpreter (``spark.pyspark.driver.python``), as the
recipe says for client mode. The application (tests/e2e/deploy_app.py) is the README's example
shape; it fixes the tracker, block server and status page ports, and SIGTERM stops it gracefully.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.java import find_java
from reliable_kafka.local.ports import free_port
from reliable_kafka.local.spark_hosts import LocalSparkHosts, spark_home
from tests.cluster_backends import unique_name
from tests.conftest import selected_spark
from tests.e2e.helpers import committed_offsets, log_end_offsets, produce
from tests.e2e.packed_venv import PackedVenv, build_packed_venv
from tests.e2e.processes import descendants, describe, session_processes
from tests.support import read_json_lines, wait_until
from tests.support.spark_jvm_archive import suite_properties_file

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.brokers("3.9")]

APP = Path(__file__).with_name("deploy_app.py")
HOSTS = 2
CORES = 2  # per host: the receiver's core and one for batches on its host
PARTITIONS = 2
RECORDS = 200
# SIGTERM to exit: a graceful stop of 2 s batches with nothing left to process, Spark's stop, and
# the JVM's exit, on a loaded 2-core machine.
STOP_BOUND_S = 60.0
# The Kubernetes preStop hook of docs/operations.md, after it found spark-submit's JVM ($jvm): SIGTERM to the
# JVM's children (the Python driver), then wait for them to end.
PRE_STOP = 'pkill -TERM -P "$jvm"; while pgrep -P "$jvm" >/dev/null; do sleep 1; done'


@pytest.fixture(scope="session")
def packed_venv(tmp_path_factory: pytest.TempPathFactory) -> PackedVenv:
    """Built once per session (about 5 s: a wheel with its C extension, the copy, the packing)."""
    packed = build_packed_venv(tmp_path_factory.mktemp("packed-venv"))
    print(f"packed venv: {packed.archive.stat().st_size / 1e6:.1f} MB in {packed.seconds:.1f} s")
    return packed


@pytest.fixture(scope="module")
def bare_hosts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalSparkHosts]:
    """Two worker hosts whose environment holds no ``PYTHONPATH`` (a checkout on it would reach the
    executors' Python workers, which Spark gives the worker's ``PYTHONPATH``, ahead of the archive)."""
    if "hosts" not in selected_spark(request.config):
        pytest.skip("the several-hosts cluster is not selected (--spark; hosts need root for private mounts)")
    hosts = LocalSparkHosts(tmp_path_factory.mktemp("deploy-hosts"), hosts=HOSTS, cores=CORES, memory_mb=1024)
    with contextlib.ExitStack() as stack:
        with pytest.MonkeyPatch.context() as patch:  # the workers copy the environment at start
            patch.delenv("PYTHONPATH", raising=False)
            stack.enter_context(hosts)  # a failed start stops what it started
        yield hosts


def listening_ports() -> set[tuple[str, int]]:
    """(address, port) of every listening IPv4 TCP socket, from /proc/net/tcp."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A":  # LISTEN
            address, port = local.split(":")
            octets = bytes.fromhex(address)[::-1]  # little-endian on x86
            found.add((".".join(str(b) for b in octets), int(port, 16)))
    return found


def read_rows(path: Path) -> list[dict[str, Any]]:
    return read_json_lines(path)


def scrape(port: int) -> dict[str, float]:
    """``/metrics`` parsed as Prometheus parses it: sample name (with labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            key = f"{sample.name}{{{labels}}}"
            assert key not in samples, f"duplicate series {key}"
            samples[key] = sample.value
    return samples


def spark_submit_command(
    hosts: LocalSparkHosts, archive: Path, ports: dict[str, int], app_args: list[str]
) -> list[str]:
    """The README's recipe (client mode) against the hosts' master, with the session's Spark
    properties (the suite's JVM options) where it has them."""
    suite_properties = suite_properties_file()
    return [
        str(spark_home() / "bin" / "spark-submit"),
        *(("--properties-file", str(suite_properties)) if suite_properties else ()),
        *("--master", hosts.master_url),
        *("--archives", f"{archive}#environment"),
        *("--conf", "spark.pyspark.python=./environment/bin/python"),
        *("--conf", f"spark.pyspark.driver.python={sys.executable}"),
        *("--conf", "spark.streaming.receiver.writeAheadLog.enable=true"),
        *("--conf", "spark.streaming.stopGracefullyOnShutdown=true"),
        *("--conf", f"spark.streaming.receiver.trackerPort={ports['tracker']}"),
        *("--conf", f"spark.streaming.receiver.blockServerPort={ports['block']}"),
        *("--conf", "spark.streaming.ui.host=127.0.0.1"),
        *("--conf", f"spark.streaming.ui.port={ports['ui']}"),
        *("--conf", f"spark.executor.cores={CORES}"),
        *("--conf", f"spark.cores.max={HOSTS * CORES}"),
        *("--conf", "spark.executor.memory=512m"),
        # The loopback only: the driver's own address, and no Spark UI on every interface.
        *("--conf", "spark.driver.host=127.0.0.1"),
        *("--conf", "spark.ui.enabled=false"),
        str(APP),
        *app_args,
    ]


def test_packed_venv_on_several_hosts(
    local_cluster: LocalCluster, bare_hosts: LocalSparkHosts, packed_venv: PackedVenv, tmp_path: Path
) -> None:
    topic, group = unique_name("deploy"), unique_name("deploy-group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    values = [f"record-{i}" for i in range(RECORDS)]
    produce(local_cluster, topic, ((None, v.encode(), i % PARTITIONS) for i, v in enumerate(values)))
    ports = {"tracker": free_port(), "block": free_port(), "ui": free_port()}
    output, log = tmp_path / "output.jsonl", tmp_path / "spark-submit.log"
    app_args = [local_cluster.zookeeper_connect, group, topic, str(tmp_path / "checkpoint"), str(output)]
    # The driver's scratch space (spark-*, blockmgr-*) in the test's directory, not /tmp.
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_DIRS=str(tmp_path / "driver-local"))
    env["PATH"] = f"{Path(find_java()).parent}{os.pathsep}{env.get('PATH', '')}"
    started = time.monotonic()
    with log.open("w") as sink:
        submit = subprocess.Popen(
            spark_submit_command(bare_hosts, packed_venv.archive, ports, app_args),
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        # 1. Every record produced arrives, and the receiver committed up to the log end.
        wait_until(
            lambda: {r["value"] for r in read_rows(output)} >= set(values) or submit.poll() is not None,
            timeout_s=240,
            what="every record",
        )
        assert submit.poll() is None, log.read_text()[-8000:]
        arrived = time.monotonic() - started
        rows = read_rows(output)
        assert sorted(r["value"] for r in rows) == sorted(values), "duplicates without a fault"
        log_end = log_end_offsets(local_cluster, topic, PARTITIONS)
        assert sum(log_end.values()) == RECORDS
        wait_until(
            lambda: committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end,
            timeout_s=30,
            what="offsets committed to the log end",
        )

        # 2. The batch tasks ran the packed interpreter and imported the package from the archive,
        # unpacked into an executor's working directory on a worker host.
        work_dirs = {host.address: host.work_dir for host in bare_hosts.hosts}
        for row in {(r["prefix"], r["executable"], r["package"], r["host"]) for r in rows}:
            prefix, executable, package, host = (Path(row[0]), Path(row[1]), Path(row[2]), row[3])
            assert host in work_dirs, row
            # work/<app id>/<executor id>/environment
            assert prefix.name == "environment" and prefix.parents[2] == work_dirs[host], row
            assert executable.parent == prefix / "bin", row
            assert package.is_relative_to(prefix / "lib"), row

        # 3. The fixed ports: the tracker on the driver's address, the receiver's block server on
        # its executor's host address only (as Spark's block transfer binds); the status page
        # where it was told, and /metrics scraped as Prometheus would.
        listening = listening_ports()
        assert ("127.0.0.1", ports["tracker"]) in listening
        block_servers = {address for address, port in listening if port == ports["block"]}
        assert len(block_servers) == 1 and block_servers <= set(work_dirs), sorted(listening)
        assert ("127.0.0.1", ports["ui"]) in listening
        wait_until(
            lambda: scrape(ports["ui"]).get("reliable_kafka_records_received_total{stream_id=0}") == RECORDS,
            timeout_s=30,
            what="/metrics to count every record",
        )

        # 4. docs/operations.md's preStop hook: SIGTERM to the Python driver, a child of spark-submit's JVM.
        # With stopGracefullyOnShutdown the stream stops gracefully, then spark-submit exits. (A
        # SIGTERM to spark-submit's JVM alone stops Spark from the JVM's shutdown hook, under the
        # Python driver: no graceful stop. docs/operations.md says so.)
        driver = python_driver(submit.pid)
        stop_began = time.monotonic()
        # The hook returns once the JVM has no child left: the driver is gone.
        subprocess.run(["sh", "-c", f"jvm={submit.pid}; {PRE_STOP}"], check=True, timeout=STOP_BOUND_S)
        assert driver not in children(submit.pid)
        submit.wait(timeout=STOP_BOUND_S)
        stopped_in = time.monotonic() - stop_began
        text = log.read_text()
        for line in (
            "Received SIGTERM",
            "Invoking stop(stopGracefully=True) from shutdown hook",
            "StreamingContext stopped successfully",
        ):
            assert line in text, text[-8000:]
        # The stop passes the signal on: the Python driver ends by it, and spark-submit says so.
        assert submit.returncode == 128 + signal.SIGTERM, text[-8000:]
        print(
            f"packed venv deploy: every record in {arrived:.1f} s from spark-submit; "
            f"SIGTERM to exit {stopped_in:.1f} s; spark-submit exit {submit.returncode}"
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(submit.pid, signal.SIGKILL)
        submit.wait()
        for pid in session_processes(submit.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert not session_processes(submit.pid), describe(session_processes(submit.pid))


def python_driver(submit_pid: int) -> int:
    """The application's Python process: a child of spark-submit's JVM (the script execs it)."""
    for pid in children(submit_pid):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(part.endswith(APP.name.encode()) for part in command):
                return pid
    raise AssertionError(f"no Python driver under spark-submit ({submit_pid})")


def children(parent: int) -> list[int]:
    found = []
    for pid in descendants(parent):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == parent:
                found.append(pid)
    return found

"""The several-hosts cluster (reliable_kafka/local/spark_hosts.py): each worker is a host with
its own address and its own /dev/shm, and losing one kills all its processes and files."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from reliable_kafka.local.spark_hosts import LocalSparkHosts, _session_members, private_mounts_unavailable

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def run_app(master: str, executors: int, marker: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.integration.spark_hosts_child", master, str(executors), marker],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    answer: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def test_hosts_have_their_own_address_and_shm_and_die_whole(tmp_path: Path) -> None:
    why_not = private_mounts_unavailable()
    if why_not is not None:
        pytest.skip(f"no private mounts here: {why_not}")
    marker = f"rk-hosts-{uuid.uuid4().hex[:8]}"
    with LocalSparkHosts(tmp_path / "hosts", hosts=2, cores=1, memory_mb=512) as cluster:
        assert cluster.alive_hosts() == ["127.0.0.2", "127.0.0.3"]
        answer = run_app(cluster.master_url, 2, marker)
        tasks = answer["tasks"]
        assert isinstance(tasks, list)
        by_host: dict[str, set[str]] = {}
        for task in tasks:
            by_host.setdefault(task["host"], set()).update(task["shm"])
        assert set(by_host) == {"127.0.0.2", "127.0.0.3"}
        # Each host sees only the files its own tasks wrote; the driver sees none of them.
        written = {f"{marker}-{task['partition']}": task["host"] for task in tasks}
        for host, seen in by_host.items():
            assert seen and all(written[name] == host for name in seen), (host, seen)
        assert answer["driver_shm"] == []

        worker = cluster.hosts[0]
        session = worker._server.pid  # type: ignore[union-attr]
        assert session is not None and _session_members(session)
        cluster.lose_host(0)
        assert _session_members(session) == []
        assert not worker.local_dir.exists()
        cluster.await_host_gone(0)
        assert cluster.alive_hosts() == ["127.0.0.3"]

        cluster.restart_host(0)
        assert cluster.alive_hosts() == ["127.0.0.2", "127.0.0.3"]
        # The host came back empty, and runs tasks again.
        again = run_app(cluster.master_url, 2, marker + "-again")
        assert {task["host"] for task in again["tasks"]} == {"127.0.0.2", "127.0.0.3"}  # type: ignore[union-attr]

"""The canary check: a secured stream run with a canary password (SCRAM) and a canary private key
(inline ``ssl.key.pem``) leaves neither in anything it writes: its console and log, its checkpoint
and write-ahead logs, Spark's local dirs (shuffle and broadcast blocks, task spills), its output."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.secured import write_private
from tests.cluster_backends import unique_name
from tests.e2e.helpers import produce
from tests.e2e.kill_harness import ChildApp
from tests.support import wait_until

pytestmark = pytest.mark.integration

RECORDS = 30


def _canaries(cluster: LocalCluster) -> dict[str, bytes]:
    """What must not show: the password, and each line of the private key's base64 body (a key
    written out in pieces, or re-wrapped, still shows one of them)."""
    alice = cluster.secured.principals["alice"]
    key_lines = [
        line for line in alice.tls.key.read_text().splitlines() if line and not line.startswith("-----")
    ]
    canaries = {"password": alice.password.encode(), "ZooKeeper password": alice.zookeeper_password.encode()}
    canaries.update({f"private key line {i}": line.encode() for i, line in enumerate(key_lines)})
    return canaries


def _files_under(*roots: Path) -> list[Path]:
    return [Path(top) / name for root in roots for top, _, names in os.walk(root) for name in names]


@pytest.mark.brokers("3.9")
def test_no_secret_in_anything_a_secured_run_leaves(
    secured_cluster: LocalCluster, tmp_path: Path, applications: list[ChildApp]
) -> None:
    settings = secured_cluster.secured
    alice = settings.principals["alice"]
    topic, group = unique_name("canary"), unique_name("canary-group")
    secured_cluster.create_topic(topic, partitions=1)
    produce(secured_cluster, topic, [(None, f"r{i}".encode(), 0) for i in range(RECORDS)])

    params = {
        **settings.kafka_params("SCRAM-SHA-512"),
        **settings.zookeeper_params(),
        # The key itself, not its path, goes through our params: to the receivers and back.
        "ssl.key.pem": alice.tls.key.read_text(),
        "ssl.certificate.pem": alice.tls.certificate.read_text(),
        "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": "300",
    }
    secrets_dir = tmp_path / "given"  # what the test hands the run: not grepped
    secrets_dir.mkdir(mode=0o700)
    write_private(secrets_dir / "params.json", json.dumps(params))
    run_dir = tmp_path / "run"
    (run_dir / "spark-local").mkdir(parents=True)
    spark_conf = secrets_dir / "spark.json"
    spark_conf.write_text(json.dumps({"spark.local.dir": str(run_dir / "spark-local")}))
    output = run_dir / "output.jsonl"
    app = ChildApp(
        1,
        [
            *("--zk", settings.zookeeper_connect or "", "--group", group, "--topic", topic),
            *("--checkpoint", str(run_dir / "checkpoint"), "--output", str(output)),
            *("--kafka-params", f"@{secrets_dir / 'params.json'}", "--spark-conf-file", str(spark_conf)),
            *("--sink-delay-ms", "0", "--report-delay-ms", "0", "--debug-log"),
        ],
        run_dir,
    )
    applications.append(app)
    app.wait_started()

    def records_out() -> int:
        if not output.exists():
            return 0
        return sum(1 for line in output.read_text().splitlines() if '"kind": "rec"' in line)

    wait_until(
        lambda: app.check_alive() and records_out() >= RECORDS, timeout_s=120, what="every record read"
    )
    assert app.stop_gracefully() == 0, app.log_tail()

    left = _files_under(run_dir)
    assert " DEBUG reliable_kafka." in app.log_path.read_text(errors="replace"), "the log is not at DEBUG"
    assert any(path.parent.name == "receivedData" or "receivedData" in path.parts for path in left), (
        "the run wrote no receiver WAL: nothing was grepped there"
    )
    found = [
        f"{what} in {path}"
        for path in left
        if path.is_file()
        for what, canary in _canaries(secured_cluster).items()
        if canary in path.read_bytes()
    ]
    assert found == []

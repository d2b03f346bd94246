"""``reliable-kafka lag`` against the local cluster: its numbers are ZooKeeper's and the broker's."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from reliable_kafka.cli import main
from reliable_kafka.kafka.zk.paths import TopicAndPartition, offset_path, owner_path
from reliable_kafka.local.cluster import KAFKA_09_CLIENT_CONFIG
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets, produce

pytestmark = pytest.mark.integration

X_OPTIONS = [arg for key, value in KAFKA_09_CLIENT_CONFIG.items() for arg in ("-X", f"{key}={value}")]


@pytest.fixture
def lagging_group(local_cluster: ClusterUnderTest) -> tuple[str, str]:
    """A 3-partition topic with 10/20/30 records; the group committed 4 and 20 and nothing on 2."""
    topic, group = unique_name("lag"), unique_name("lag-group")
    local_cluster.create_topic(topic, partitions=3)
    produce(local_cluster, topic, [(None, b"x", p) for p in range(3) for _ in range(10 * (p + 1))])
    zk = local_cluster.zookeeper_client()
    try:
        zk.create(offset_path(group, TopicAndPartition(topic, 0)), b"4", makepath=True)
        zk.create(offset_path(group, TopicAndPartition(topic, 1)), b"20", makepath=True)
        # Persistent, unlike a live owner's node: it must outlive this client.
        zk.create(owner_path(group, TopicAndPartition(topic, 0)), b"consumer-0", makepath=True)
    finally:
        zk.stop()
        zk.close()
    return topic, group


def run(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["lag", *args, *X_OPTIONS], out=out, err=err)
    assert not err.getvalue() or code == 2, err.getvalue()
    return code, out.getvalue()


def test_lag_json_equals_zookeeper_and_broker(
    local_cluster: ClusterUnderTest, lagging_group: tuple[str, str]
) -> None:
    topic, group = lagging_group
    code, out = run("--zookeeper", local_cluster.zookeeper_connect, "--group", group, "--json")
    assert code == 0
    rows = json.loads(out)["partitions"]
    committed = committed_offsets(local_cluster, group, topic, 3)
    log_end = log_end_offsets(local_cluster, topic, 3)
    assert [(r["topic"], r["partition"]) for r in rows] == [(topic, p) for p in range(3)]
    for row in rows:
        p = row["partition"]
        assert row["committed"] == committed.get(p)
        assert row["log_end"] == log_end[p]
        assert row["lag"] == (log_end[p] - committed[p] if p in committed else None)
    assert [r["lag"] for r in rows] == [6, 0, None]
    assert [r["owner"] for r in rows] == ["consumer-0", None, None]


def test_max_lag_exit_code(local_cluster: ClusterUnderTest, lagging_group: tuple[str, str]) -> None:
    topic, group = lagging_group
    zk = ["--zookeeper", local_cluster.zookeeper_connect, "--group", group]
    # Partition 0 is 6 behind.
    assert run(*zk, "--topic", topic, "--max-lag", "5")[0] == 1
    # Partition 2 has no committed offset: its lag is unknown, which a bound cannot accept.
    assert run(*zk, "--topic", topic, "--max-lag", "6")[0] == 1
    code, table = run(*zk, "--topic", topic)
    assert code == 0
    lines = table.splitlines()
    assert lines[0].split() == ["Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"]
    assert lines[1].split() == [group, topic, "0", "4", "10", "6", "consumer-0"]
    assert lines[3].split() == [group, topic, "2", "unknown", "30", "unknown", "none"]


def test_max_lag_met_and_console_script(local_cluster: ClusterUnderTest) -> None:
    topic, group = unique_name("lag"), unique_name("lag-group")
    local_cluster.create_topic(topic, partitions=1)
    produce(local_cluster, topic, [(None, b"x", 0)] * 5)
    zk = local_cluster.zookeeper_client()
    try:
        zk.create(offset_path(group, TopicAndPartition(topic, 0)), b"3", makepath=True)
    finally:
        zk.stop()
        zk.close()
    script = Path(sys.executable).with_name("reliable-kafka")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "reliable_kafka.cli"]
    zk_args = ["--zookeeper", local_cluster.zookeeper_connect, "--group", group]
    result = subprocess.run(
        [*command, "lag", *zk_args, "--json", "--max-lag", "2", *X_OPTIONS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert [row["lag"] for row in json.loads(result.stdout)["partitions"]] == [2]


def test_kafka_stored_offsets_are_refused_for_now() -> None:
    code, _ = run("--bootstrap-servers", "127.0.0.1:9", "--group", "g")
    assert code == 2

"""``reliable-kafka lag`` against the local cluster: its numbers are those of the store the group
commits to (ZooKeeper, Kafka's coordinator, both) and the broker's."""

from __future__ import annotations

import io
import json
import subprocess
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from reliable_kafka.cli import main
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import offset_path, owner_path
from reliable_kafka.scheduler.listener import (
    BatchInfo,
    StreamingListenerBatchStarted,
    StreamingListenerBatchSubmitted,
    StreamInputInfo,
)
from reliable_kafka.settings import UISettings
from reliable_kafka.ui.group_view import _answer
from reliable_kafka.ui.server import StatusServer
from reliable_kafka.ui.status_store import StreamingStatusStore
from reliable_kafka.ui.status_ui import StatusUI
from reliable_kafka.util.clock import wall_clock_ms
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.helpers import (
    commit_in_kafka,
    committed_offsets,
    kafka_committed_offsets,
    log_end_offsets,
    produce,
)
from tests.support import wait_until
from tests.ui.cli_command import X_OPTIONS, console_script

pytestmark = pytest.mark.integration


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


def run_err(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["lag", *args, *X_OPTIONS], out=out, err=err)
    # stderr: an error (2), or what broke a bound (1).
    assert not err.getvalue() or code in (1, 2), err.getvalue()
    return code, out.getvalue(), err.getvalue()


def run(*args: str) -> tuple[int, str]:
    code, out, _ = run_err(*args)
    return code, out


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
    # Partition 0 is 6 behind; partition 2 has no committed offset: its lag is unknown, which a
    # bound cannot accept. Each culprit is named (the exit code alone named none).
    code, _, err = run_err(*zk, "--topic", topic, "--max-lag", "5")
    assert code == 1
    assert err.splitlines() == [
        f"--max-lag 5: {topic} partition 0 of group {group} is 6 behind",
        f"--max-lag 5: {topic} partition 2 of group {group} has no committed offset (lag unknown)",
    ]
    code, _, err = run_err(*zk, "--topic", topic, "--max-lag", "6")
    assert code == 1
    assert err == f"--max-lag 6: {topic} partition 2 of group {group} has no committed offset (lag unknown)\n"
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
    command = console_script()
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


def test_usage_errors_exit_2() -> None:
    err = io.StringIO()
    assert main(["lag", "--group", "g"], out=io.StringIO(), err=err) == 2
    assert "--zookeeper" in err.getvalue() and "--bootstrap-servers" in err.getvalue()
    for storage in ("zookeeper", "dual"):
        err = io.StringIO()
        args = ["lag", "--group", "g", "--bootstrap-servers", "127.0.0.1:9", "--offsets-storage", storage]
        assert main(args, out=io.StringIO(), err=err) == 2
        assert f"--offsets-storage {storage} needs --zookeeper" in err.getvalue()


def test_unreachable_brokers_exit_2_naming_the_request() -> None:
    out, err = io.StringIO(), io.StringIO()
    args = ["lag", "--group", "g", "--bootstrap-servers", "127.0.0.1:9", "-X", "ssl.key.password=hunter2"]
    assert main(args, out=out, err=err) == 2
    assert "committed offsets of group g: no answer from the brokers" in err.getvalue()
    assert "hunter2" not in err.getvalue() and out.getvalue() == ""


def test_a_request_librdkafka_gave_up_on_reads_as_no_answer() -> None:
    """librdkafka's own request timeout and the wait on its future say the same thing, whichever
    comes first (they raced in CI); other errors pass through."""
    timed_out: Future[Any] = Future()
    timed_out.set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT, "Local: Timed out")))
    with pytest.raises(TimeoutError, match=r"members of group g: no answer from the brokers within 10 s \("):
        _answer(timed_out, "members of group g")
    refused: Future[Any] = Future()
    refused.set_exception(KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)))
    with pytest.raises(KafkaException):
        _answer(refused, "members of group g")


def client_options(cluster: ClusterUnderTest) -> list[str]:
    """``--bootstrap-servers`` and ``-X`` for what else the broker needs (nothing but for 0.9)."""
    config = cluster.client_config()
    servers = str(config.pop("bootstrap.servers"))
    return [
        "--bootstrap-servers",
        servers,
        *(arg for key, value in config.items() for arg in ("-X", f"{key}={value}")),
    ]


def run_on(cluster: ClusterUnderTest, *args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["lag", *args, *client_options(cluster)], out=out, err=err)
    assert not err.getvalue() or code == 1, err.getvalue()  # 1: what broke a bound, on stderr
    return code, out.getvalue()


def rows_of(out: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads(out)["partitions"]
    return rows


def test_offsets_in_kafka_without_zookeeper_args(local_cluster: ClusterUnderTest) -> None:
    """offsets.storage=kafka: committed offsets from the coordinator, partitions from metadata (3.9)."""
    topic, group = unique_name("lag-kafka"), unique_name("lag-kafka-group")
    local_cluster.create_topic(topic, partitions=3)
    produce(local_cluster, topic, [(None, b"x", p) for p in range(3) for _ in range(10 * (p + 1))])
    commit_in_kafka(local_cluster, group, topic, {0: 4, 1: 20})
    assert kafka_committed_offsets(local_cluster, group, topic, 3) == {0: 4, 1: 20}
    log_end = log_end_offsets(local_cluster, topic, 3)

    code, out = run_on(local_cluster, "--group", group, "--json")
    assert code == 0
    rows = rows_of(out)
    assert [(r["topic"], r["partition"]) for r in rows] == [(topic, p) for p in range(3)]
    assert [r["committed"] for r in rows] == [4, 20, None]
    assert [r["log_end"] for r in rows] == [log_end[p] for p in range(3)] == [10, 20, 30]
    assert [r["lag"] for r in rows] == [6, 0, None]
    # Nobody is a member of the group, and the coordinator keeps no commit time.
    assert [(r["owner"], r["last_commit_ms"]) for r in rows] == [(None, None)] * 3

    # The same group named with its ZooKeeper (partitions from there): Kafka only if asked for.
    zk = ["--zookeeper", local_cluster.zookeeper_connect, "--group", group, "--topic", topic, "--json"]
    as_kafka = rows_of(run_on(local_cluster, *zk, "--offsets-storage", "kafka")[1])
    assert [r["committed"] for r in as_kafka] == [4, 20, None]
    err = io.StringIO()
    assert main(["lag", *zk, *client_options(local_cluster)], out=io.StringIO(), err=err) == 2
    assert "no committed offset on topic" in err.getvalue()
    assert run_on(local_cluster, "--group", group, "--max-lag", "6")[0] == 1  # partition 2: unknown


def test_dual_shows_the_larger_of_both_stores(local_cluster: ClusterUnderTest) -> None:
    topic, group = unique_name("lag-dual"), unique_name("lag-dual-group")
    local_cluster.create_topic(topic, partitions=3)
    produce(local_cluster, topic, [(None, b"x", p) for p in range(3) for _ in range(10)])
    zk = local_cluster.zookeeper_client()
    try:
        zk.create(offset_path(group, TopicAndPartition(topic, 0)), b"4", makepath=True)
        zk.create(offset_path(group, TopicAndPartition(topic, 1)), b"9", makepath=True)
    finally:
        zk.stop()
        zk.close()
    # Partition 0 ahead in Kafka, 1 ahead in ZooKeeper, 2 only in Kafka.
    commit_in_kafka(local_cluster, group, topic, {0: 7, 1: 5, 2: 3})

    args = ["--zookeeper", local_cluster.zookeeper_connect, "--group", group, "--json"]
    dual = rows_of(run_on(local_cluster, *args, "--offsets-storage", "dual")[1])
    assert [r["committed"] for r in dual] == [7, 9, 3]
    assert [r["lag"] for r in dual] == [3, 1, 7]
    # A commit time only where ZooKeeper's offset is the one shown: its node's mtime.
    assert [r["last_commit_ms"] is not None for r in dual] == [False, True, False]
    in_zookeeper = rows_of(run_on(local_cluster, *args)[1])
    assert [r["committed"] for r in in_zookeeper] == [4, 9, None]
    in_kafka = rows_of(run_on(local_cluster, *args, "--offsets-storage", "kafka")[1])
    assert [r["committed"] for r in in_kafka] == [7, 5, 3]


@pytest.mark.brokers("4")
def test_kraft_group_without_zookeeper(local_cluster: ClusterUnderTest) -> None:
    """Kafka 4 (KRaft, no ZooKeeper): a plain consumer's group, its member as the owner."""
    assert not local_cluster.has_zookeeper
    topic, group = unique_name("lag-kraft"), unique_name("lag-kraft-group")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, b"x", p) for p in range(2) for _ in range(8)])
    member = Consumer(
        local_cluster.client_config(
            **{
                "group.id": group,
                "client.id": "lag-member",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
    )
    try:
        member.subscribe([topic])
        wait_until(
            lambda: (member.poll(0.5), len(member.assignment()) == 2)[1],
            timeout_s=120,
            what="the member's assignment",
        )
        member.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 8)], asynchronous=False)

        code, out = run_on(local_cluster, "--group", group, "--json", "--max-lag", "3")
        assert code == 0
        rows = rows_of(out)
        assert [(r["partition"], r["committed"], r["log_end"], r["lag"]) for r in rows] == [
            (0, 5, 8, 3),
            (1, 8, 8, 0),
        ]
        owners = {r["owner"] for r in rows}
        assert len(owners) == 1 and str(owners.pop()).startswith("lag-member/"), rows
    finally:
        member.close()

    # The console script, as an operator types it: no --zookeeper anywhere.
    command = console_script()
    result = subprocess.run(
        [*command, "lag", "--group", group, *client_options(local_cluster), "--max-lag", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr  # partition 0 is 3 behind
    lines = result.stdout.splitlines()
    assert lines[1].split() == [group, topic, "0", "5", "8", "3", "none"]  # the member has left


def test_a_group_without_committed_offsets_is_an_error_naming_the_store(
    local_cluster: ClusterUnderTest, lagging_group: tuple[str, str]
) -> None:
    """``--max-lag`` used to pass on an empty table: a misspelt group, or a ZooKeeper group read
    from Kafka, looked like a group with no lag."""
    topic, group = lagging_group
    zookeeper = local_cluster.zookeeper_connect
    out, err = io.StringIO(), io.StringIO()
    args = ["lag", "--zookeeper", zookeeper, "--group", "nosuch-" + group, "--max-lag", "10", *X_OPTIONS]
    assert main(args, out=out, err=err) == 2
    assert not out.getvalue()
    # What is wrong, what the store holds (the group meant among the others), what to do.
    wrong, found, to_do = err.getvalue().splitlines()
    assert wrong == (
        f"group nosuch-{group} has no committed offset on any topic in ZooKeeper at {zookeeper}: "
        "it holds no offsets of that group"
    )
    assert found.startswith("  groups it holds: ") and found.endswith(f"(did you mean --group {group}?)")
    assert to_do.startswith("  check --group against the application's group.id; ")
    assert to_do.endswith("give --bootstrap-servers and --offsets-storage kafka")
    # The ZooKeeper group asked of Kafka's coordinator only.
    err = io.StringIO()
    brokers = local_cluster.bootstrap_servers
    args = ["lag", "--group", group, "--max-lag", "10", *client_options(local_cluster)]
    assert main(args, out=io.StringIO(), err=err) == 2
    wrong, found, to_do = err.getvalue().splitlines()
    assert wrong == (
        f"group {group} has no committed offset on any topic in Kafka's group coordinator (via {brokers}): "
        "it holds no offsets of that group"
    )
    assert found.startswith("  groups it holds: ")
    assert to_do.endswith("keeps its offsets in ZooKeeper: give --zookeeper")
    # A topic the group holds nothing of, in the store that holds its others.
    err = io.StringIO()
    args = ["lag", "--zookeeper", zookeeper, "--group", group, "--topic", "other", *X_OPTIONS]
    assert main(args, out=io.StringIO(), err=err) == 2
    assert err.getvalue().splitlines() == [
        f"group {group} has no committed offset on topic other in ZooKeeper at {zookeeper}; "
        f"it holds offsets of the group for: {topic}",
        "  ask for those topics with --topic, or leave --topic out for all of them",
    ]


def test_status_url_shows_what_is_received_and_not_processed_and_max_delay_bounds_it(
    local_cluster: ClusterUnderTest, lagging_group: tuple[str, str]
) -> None:
    """Kafka's lag reads 0 while batches queue (committed means stored): ``--status-url`` adds the
    application's unprocessed batches, and ``--max-delay`` fails on the oldest waiting one, or on
    a page it cannot read."""
    topic, group = lagging_group
    store = StreamingStatusStore(1000)
    # A batch running, and one waiting since two minutes ago (batch times are the wall clock's).
    submitted = wall_clock_ms() - 120_000
    running = BatchInfo(submitted - 1000, {0: StreamInputInfo(0, 10)}, submitted - 1000, submitted, None)
    waiting = BatchInfo(submitted, {0: StreamInputInfo(0, 40)}, submitted, None, None)
    store.on_batch_started(StreamingListenerBatchStarted(running))
    store.on_batch_submitted(StreamingListenerBatchSubmitted(waiting))
    ui = StatusUI(store, None, UISettings(port=0))
    server = StatusServer(ui.handle, "127.0.0.1", 0)
    server.start()
    zk = ["--zookeeper", local_cluster.zookeeper_connect, "--group", group, "--topic", topic]
    try:
        code, out, err = run_err(*zk, "--status-url", server.url, "--max-delay", "60", "--json")
        assert code == 1
        unprocessed = json.loads(out)["unprocessed"]
        assert unprocessed["scheduling_delay_s"] >= 120
        assert unprocessed == {
            "status_url": server.url,
            "batches": 2,
            "records": 50,
            "scheduling_delay_s": unprocessed["scheduling_delay_s"],
        }
        assert err.startswith("--max-delay 60 s: the oldest waiting batch has waited ")
        assert err.endswith(" s (2 batches, 50 records received and not yet processed)\n")

        code, out, err = run_err(*zk, "--status-url", server.url, "--max-delay", "3600")
        assert (code, err) == (0, "")
        beside = out.splitlines()[-1]
        assert beside.startswith(
            f"Received, not yet processed (status page {server.url}): 2 batches (waiting and running), "
            "50 records; the oldest waiting batch has waited "
        )
    finally:
        server.stop()
    # A page that cannot be read cannot vouch for the delay.
    url = server.url
    code, out, err = run_err(*zk, "--status-url", url, "--max-delay", "3600")
    assert code == 1
    assert out.splitlines()[-1].startswith(f"Received, not yet processed: unknown (status page {url}: ")
    assert err.startswith(f"--max-delay 3600 s: the status page at {url} could not be read (URLError: ")


def test_max_delay_needs_the_status_page() -> None:
    err = io.StringIO()
    args = ["lag", "--group", "g", "--bootstrap-servers", "127.0.0.1:9", "--max-delay", "60"]
    assert main(args, out=io.StringIO(), err=err) == 2
    assert "--max-delay needs --status-url" in err.getvalue()

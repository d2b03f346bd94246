"""A paused partition consumer (ZooKeeper session SUSPENDED) hands nothing to the block generator,
and on resume goes on from the next offset: nothing skipped, nothing read twice. Real Kafka."""

from __future__ import annotations

import threading

import pytest

from reliable_kafka.kafka.client.packed_fetch import FetchedBatch
from reliable_kafka.kafka.client.shared_client import PartitionReader, SharedFetchClient
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.receiver.partition_consumer import PartitionConsumer
from reliable_kafka.local import LocalCluster
from reliable_kafka.storage.block_format import PackedChunk
from tests.cluster_backends import unique_name
from tests.kafka.harness import produce
from tests.support import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("packed", [True, False], ids=["packed-fetch", "python-fetch"])
def test_a_paused_consumer_hands_nothing_over_and_resumes_at_the_next_offset(
    local_cluster: LocalCluster, packed: bool
) -> None:
    topic = unique_name("pause")
    local_cluster.create_topic(topic, 1)
    produce(local_cluster.client_config(), topic, 1, 100)
    handed: list[tuple[int, int]] = []
    lock = threading.Lock()

    def sink(_tp: TopicAndPartition, _chunk: PackedChunk, first: int, last: int) -> None:
        with lock:
            handed.append((first, last))

    def last_handed() -> int:
        with lock:
            return handed[-1][1] if handed else -1

    client = SharedFetchClient.create(
        local_cluster.client_config(**{"group.id": unique_name("g")}), "test", packed_fetch=packed
    )
    fetched: list[int] = []  # the last offset of each batch the consumer's reader fetched
    attach = client.attach

    def attach_watched(tp: TopicAndPartition) -> PartitionReader:
        reader = attach(tp)
        fetch = reader.fetch

        def fetch_watched(max_messages: int, timeout_s: float) -> FetchedBatch:
            batch = fetch(max_messages, timeout_s)
            if batch.chunk is not None:
                with lock:
                    fetched.append(batch.last_offset)
            return batch

        reader.fetch = fetch_watched  # type: ignore[method-assign]
        return reader

    client.attach = attach_watched  # type: ignore[method-assign]

    def last_fetched() -> int:
        with lock:
            return fetched[-1] if fetched else -1

    consumer = PartitionConsumer(
        TopicAndPartition(topic, 0),
        "thread-0",
        client,
        start_offset=0,
        offset_reset="smallest",
        sink=sink,
        on_failure=lambda message, error: pytest.fail(f"{message}: {error!r}"),
        batch_size=10,
    )
    consumer.start()
    try:
        wait_until(lambda: last_handed() == 99, timeout_s=60, what="the first 100 records")
        consumer.pause()
        produce(local_cluster.client_config(), topic, 1, 100, start=100)
        # The consumer has the new records in hand: an unpaused one would hand them over now.
        wait_until(lambda: last_fetched() > 99, timeout_s=60, what="a batch of the new records fetched")
        assert last_handed() == 99, "records were handed over while paused"
        assert consumer.paused
        consumer.resume()
        wait_until(lambda: last_handed() == 199, timeout_s=60, what="the records produced during the pause")
    finally:
        consumer.stop()
        consumer.join(30)
        client.close()
    with lock:
        offsets = [o for first, last in handed for o in range(first, last + 1)]
    assert offsets == list(range(200)), "skipped or repeated offsets across the pause"

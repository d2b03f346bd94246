"""Records the decoder cannot decode (issue 10, item 5): by default the batch fails with an
error naming topic, partition and offset; ``decodeErrors="skip"`` leaves the record out and
``"deadletter"`` writes it to a topic first, both counted in the listener's batch info. Real
ZooKeeper, Kafka and Spark."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from reliable_kafka import KafkaUtils
from reliable_kafka.kafka.receiver.decode_errors import DEAD_LETTERED_KEY, SKIPPED_KEY
from reliable_kafka.local import LocalCluster
from reliable_kafka.scheduler.listener import StreamingListener, StreamingListenerBatchCompleted
from tests.cluster_backends import unique_name
from tests.e2e.helpers import produce
from tests.support import wait_until

pytestmark = pytest.mark.integration

POISON = b"\xff\xfe not utf-8"
GOOD = [f"good-{i}".encode() for i in range(6)]


class Batches(StreamingListener):
    def __init__(self) -> None:
        self.completed: list[Any] = []
        self.lock = threading.Lock()

    def on_batch_completed(self, event: StreamingListenerBatchCompleted) -> None:
        with self.lock:
            self.completed.append(event.batch_info)

    def failures(self) -> list[str]:
        with self.lock:
            return [
                op.failure_reason
                for info in self.completed
                for op in info.output_operation_infos.values()
                if op.failure_reason
            ]

    def counted(self, key: str) -> int:
        with self.lock:
            return sum(
                int(input_info.metadata.get(key, 0))
                for info in self.completed
                for input_info in info.stream_id_to_input_info.values()
            )


def run_stream(cluster: LocalCluster, make_ssc: Any, **options: Any) -> tuple[str, list[Any], Batches]:
    """Three good records, the poison one at offset 3, three more; what the sink saw."""
    topic = unique_name("poison")
    cluster.create_topic(topic)
    produce(
        cluster,
        topic,
        [(None, v, 0) for v in GOOD[:3]] + [(None, POISON, 0)] + [(None, v, 0) for v in GOOD[3:]],
    )
    ssc = make_ssc(wal=False, checkpoint=False)
    batches = Batches()
    ssc.addStreamingListener(batches)
    stream = KafkaUtils.createStream(
        ssc,
        cluster.zookeeper_connect,
        unique_name("poison"),
        {topic: 1},
        {"auto.offset.reset": "smallest", **cluster.client_config()},
        **options,
    )
    received: list[Any] = []
    lock = threading.Lock()

    def keep(rdd: Any) -> None:
        values = rdd.map(lambda kv: kv[1]).collect()
        with lock:
            received.extend(values)

    stream.foreachRDD(keep)
    ssc.start()
    return topic, received, batches


def test_by_default_the_batch_fails_with_the_records_location(
    local_cluster: LocalCluster, make_ssc: Any
) -> None:
    topic, _, batches = run_stream(local_cluster, make_ssc)
    wait_until(lambda: batches.failures(), timeout_s=120, what="the batch with the poison record to fail")
    assert f"cannot decode the record at {topic}/0 offset 3" in batches.failures()[0]


def test_skip_leaves_the_record_out_and_counts_it(local_cluster: LocalCluster, make_ssc: Any) -> None:
    _, received, batches = run_stream(local_cluster, make_ssc, decodeErrors="skip")
    wait_until(
        lambda: len(received) >= len(GOOD) and batches.counted(SKIPPED_KEY) == 1,
        timeout_s=120,
        what="good records",
    )
    assert sorted(received) == sorted(v.decode() for v in GOOD)
    assert batches.failures() == []


def test_deadletter_writes_the_raw_record_to_the_topic_and_counts_it(
    local_cluster: LocalCluster, make_ssc: Any
) -> None:
    dead = unique_name("dead")
    local_cluster.create_topic(dead)
    topic, received, batches = run_stream(
        local_cluster, make_ssc, decodeErrors="deadletter", deadLetterTopic=dead
    )
    wait_until(
        lambda: len(received) >= len(GOOD) and batches.counted(DEAD_LETTERED_KEY) == 1,
        timeout_s=120,
        what="good records",
    )
    assert sorted(received) == sorted(v.decode() for v in GOOD)
    consumer = Consumer({**local_cluster.client_config(), "group.id": unique_name("reader")})
    try:
        consumer.assign([TopicPartition(dead, 0, 0)])
        messages = [m for m in consumer.consume(10, 10) if m.error() is None]
    finally:
        consumer.close()
    assert len(messages) == 1
    envelope = json.loads(messages[0].value())
    assert (envelope["topic"], envelope["partition"], envelope["offset"]) == (topic, 0, 3)
    assert base64.b64decode(envelope["value"]) == POISON
    assert "UnicodeDecodeError" in envelope["error"]


def test_bad_decode_error_options_fail_at_create_stream(local_cluster: LocalCluster, make_ssc: Any) -> None:
    ssc = make_ssc(wal=False, checkpoint=False)
    args = (ssc, local_cluster.zookeeper_connect, "g", {"t": 1}, local_cluster.client_config())
    with pytest.raises(ValueError, match="decodeErrors='ignore'"):
        KafkaUtils.createStream(*args, decodeErrors="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs deadLetterTopic"):
        KafkaUtils.createStream(*args, decodeErrors="deadletter")

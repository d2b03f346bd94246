"""``KafkaUtils.createDirectStream`` (pyspark 2.4's direct approach) on real brokers and Spark."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, OffsetRange, StreamingContext, TopicAndPartition
from reliable_kafka.dstream.functions import batch_datetime
from reliable_kafka.scheduler.listener import StreamingListener
from reliable_kafka.settings import DirectKafkaSettings
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.conftest import BATCH_S, e2e_settings
from tests.e2e.direct_streams import contiguous, covered, direct_params
from tests.e2e.helpers import produce
from tests.support import wait_until


@pytest.mark.brokers("3.9", "4", "0.9")
def test_offset_ranges_pattern_of_the_guide(local_cluster: ClusterUnderTest, make_ssc: Any) -> None:
    """The 2.4 guide's ``transform(storeOffsetRanges).foreachRDD(printOffsetRanges)``: by batch,
    one range per partition, contiguous from the log's start, covering what was sent.

    The guide's global is set by a batch's transform when the batch is generated and printed by
    its foreachRDD when the batch runs (Spark's order): while batches wait behind a slow one, a
    batch prints a later batch's ranges. So each batch's own ranges are read from its RDD, and
    the guide's prints are only checked to be their batch's or a later batch's."""
    topic = unique_name("direct-guide")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, f"m{i}".encode(), i % 2) for i in range(60)])
    ssc = make_ssc(wal=False, checkpoint=False)
    directKafkaStream = KafkaUtils.createDirectStream(
        ssc, [topic], direct_params(local_cluster, **{"auto.offset.reset": "smallest"})
    )

    # The guide's code, but for print (collected here, one list per batch) and global (nonlocal).
    offsetRanges: list[OffsetRange] = []
    printed: list[list[OffsetRange]] = []

    def storeOffsetRanges(rdd: Any) -> Any:
        nonlocal offsetRanges
        offsetRanges = rdd.offsetRanges()
        return rdd

    def printOffsetRanges(rdd: Any) -> None:
        printed.append(list(offsetRanges))  # what the guide prints, one line per range

    directKafkaStream.transform(storeOffsetRanges).foreachRDD(printOffsetRanges)
    # Each batch's own ranges, by batch time; beyond the guide, from a transform's result made
    # from the batch by pipelined steps, which keeps them.
    own: list[tuple[datetime, list[OffsetRange]]] = []
    values = directKafkaStream.transform(lambda rdd: rdd.map(lambda kv: kv[1]).filter(bool))
    values.foreachRDD(lambda time, rdd: own.append((time, rdd.offsetRanges())))
    ssc.start()

    def reached(end: int) -> bool:
        ranges = [r for _, batch in list(own) for r in batch]
        return all(covered(ranges, p) and covered(ranges, p)[-1][1] == end for p in (0, 1))

    wait_until(lambda: reached(30), timeout_s=120, what="the 60 records sent before the start")
    produce(local_cluster, topic, [(None, f"n{i}".encode(), i % 2) for i in range(20)])
    wait_until(lambda: reached(40), timeout_s=120, what="the 20 records sent after the start")
    ssc.stop(stopSparkContext=False, stopGraceFully=True)

    times = [time for time, _ in own]
    assert times == sorted(set(times)), times
    assert all(sorted(r.partition for r in batch) == [0, 1] for _, batch in own), own
    ranges = [r for _, batch in own for r in batch]
    assert {r.topic for r in ranges} == {topic}
    for partition in (0, 1):
        spans = covered(ranges, partition)
        assert spans[0][0] == 0 and spans[-1][1] == 40 and contiguous(spans), spans
    # The guide's prints, one per batch in batch order (one job thread): never an earlier batch's.
    assert len(printed) == len(own), (printed, own)
    source = 0
    for i, shown in enumerate(printed):
        later = [j for j in range(max(i, source), len(own)) if own[j][1] == shown]
        assert later, (i, shown, own[i:])
        source = later[0]


@pytest.mark.brokers("3.9", "4", "0.9")
def test_direct_kafka_wordcount(local_cluster: ClusterUnderTest, make_ssc: Any) -> None:
    """Spark 2.4's ``direct_kafka_wordcount.py`` logic: the stream starts at the log's end
    (``auto.offset.reset`` largest, the default), so it counts the lines sent after it is made."""
    topic = unique_name("direct-wordcount")
    local_cluster.create_topic(topic)
    produce(local_cluster, topic, [(None, b"before the stream", 0)])
    ssc = make_ssc(wal=False, checkpoint=False)
    brokers = direct_params(local_cluster)
    kvs = KafkaUtils.createDirectStream(ssc, [topic], brokers)
    lines = kvs.map(lambda x: x[1])
    counts = (
        lines.flatMap(lambda line: line.split(" "))
        .map(lambda word: (word, 1))
        .reduceByKey(lambda a, b: a + b)
    )
    total: Counter[str] = Counter()
    lock = threading.Lock()

    def add(rdd: Any) -> None:
        batch = rdd.collect()
        with lock:
            for word, n in batch:
                total[word] += n

    counts.foreachRDD(add)
    counts.pprint()
    ssc.start()
    sent = ["a b a", "b c", "a"] * 10
    produce(local_cluster, topic, [(None, line.encode(), 0) for line in sent])
    wait_until(lambda: sum(total.values()) >= 60, timeout_s=120, what="every word counted")
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    assert dict(total) == {"a": 30, "b": 20, "c": 10}


def test_max_rate_per_partition_bounds_each_batch(local_cluster: ClusterUnderTest, make_ssc: Any) -> None:
    """``spark.streaming.kafka.maxRatePerPartition`` x the batch's seconds bounds every range."""
    topic = unique_name("direct-rate")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, b"x", i % 2) for i in range(120)])
    ssc = StreamingContext(
        make_ssc(wal=False, checkpoint=False).sparkContext,
        BATCH_S,
        e2e_settings(wal=False).model_copy(update={"kafka": DirectKafkaSettings(max_rate_per_partition=15)}),
    )
    stream = KafkaUtils.createDirectStream(
        ssc, [topic], direct_params(local_cluster, **{"auto.offset.reset": "smallest"})
    )
    batches: list[tuple[list[OffsetRange], int]] = []
    stream.foreachRDD(lambda rdd: batches.append((rdd.offsetRanges(), rdd.count())))
    reported: list[int] = []

    class Counts(StreamingListener):
        def onBatchCompleted(self, batchCompleted: Any) -> None:
            reported.append(batchCompleted.batchInfo.numRecords)

    ssc.addStreamingListener(Counts())
    ssc.start()
    try:
        wait_until(
            lambda: sum(n for _, n in batches) >= 120, timeout_s=180, what="120 records at 15/s per partition"
        )
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    ranges = [r for batch, _ in batches for r in batch]
    assert all(r.count() <= 15 for r in ranges), ranges
    assert all(sum(r.count() for r in batch) == n for batch, n in batches)
    assert sum(1 for batch, _ in batches if any(r.count() for r in batch)) >= 4
    # Listeners (the status page among them) see each batch's records as the ranges count them.
    # (A batch may complete after the stop without its event: a part of them, in number.)
    reported_counts, counted = Counter(n for n in reported if n), Counter(n for _, n in batches if n)
    assert reported_counts and all(reported_counts[n] <= counted[n] for n in reported_counts)
    for partition in (0, 1):
        spans = covered(ranges, partition)
        assert spans[0][0] == 0 and spans[-1][1] == 60 and contiguous(spans), spans


def test_get_or_create_reruns_a_pending_batch_with_its_ranges(
    local_cluster: ClusterUnderTest, spark_context: SparkContext, tmp_path: Path
) -> None:
    """A batch pending in the checkpoint (as when the driver dies while it runs) runs again after
    ``getOrCreate`` with exactly its old ranges; the stream then goes on from the last generated
    batch's end: nothing lost, and the only duplicate is that whole batch."""
    topic = unique_name("direct-restart")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, f"{i}".encode(), i % 2) for i in range(200)])
    checkpoint_dir = str(tmp_path / "checkpoint")
    seen: list[tuple[int, datetime, tuple[OffsetRange, ...], list[Any]]] = []
    run = 0

    def setup() -> StreamingContext:
        settings = e2e_settings(wal=False).model_copy(
            update={"kafka": DirectKafkaSettings(max_rate_per_partition=10)}
        )
        ssc = StreamingContext(spark_context, BATCH_S, settings)
        stream = KafkaUtils.createDirectStream(
            ssc,
            [topic],
            direct_params(local_cluster, **{"auto.offset.reset": "smallest"}),
            messageHandler=lambda m: (m.partition, m.offset),
        )
        stream.foreachRDD(
            lambda t, rdd: seen.append((run, t, tuple(rdd.offsetRanges()), sorted(rdd.collect())))
        )
        return ssc

    first = StreamingContext.getOrCreate(checkpoint_dir, setup)
    first.start()
    try:
        wait_until(
            lambda: sum(len(records) for *_, records in seen) >= 80,
            timeout_s=120,
            what="80 records in the first run",
        )
    finally:
        first.stop(stopSparkContext=False, stopGraceFully=False)

    metadata = Path(checkpoint_dir) / "metadata"
    document = json.loads(metadata.read_text())
    (record,) = document["input_streams"]
    recorded = {int(t): ranges for t, ranges in record["data"]["batches"].items()}
    pending = max(recorded)
    # The driver "died" while the last generated batch ran: it is pending in the checkpoint.
    document["pending_times_ms"] = [pending]
    metadata.write_text(json.dumps(document))
    old = {t: ranges for r, t, ranges, _ in seen if r == 0}
    assert old[batch_datetime(pending)] == tuple(OffsetRange.from_metadata(r) for r in recorded[pending])

    run = 1
    second = StreamingContext.getOrCreate(checkpoint_dir, setup)
    second.start()
    try:
        wait_until(
            lambda: {o for r, *_, records in seen for o in records} >= {(i % 2, i // 2) for i in range(200)},
            timeout_s=180,
            what="all 200 records",
        )
    finally:
        second.stop(stopSparkContext=False, stopGraceFully=False)

    again = [
        (t, ranges, records) for r, t, ranges, records in seen if r == 1 and t == batch_datetime(pending)
    ]
    assert [ranges for _, ranges, _ in again] == [old[batch_datetime(pending)]]
    counts = Counter(o for *_, records in seen for o in records)
    duplicated = {o for o, n in counts.items() if n > 1}
    assert duplicated == set(again[0][2]), "only the re-run batch's records are seen twice"
    assert all(n <= 2 for n in counts.values())
    assert TopicAndPartition(topic, 0) in {TopicAndPartition(r.topic, r.partition) for r in again[0][1]}


def test_create_direct_stream_argument_errors(local_cluster: ClusterUnderTest, make_ssc: Any) -> None:
    """pyspark 2.4's type checks, and clear errors naming the input for what 2.4 left to the JVM."""
    topic = unique_name("direct-args")
    local_cluster.create_topic(topic)
    produce(local_cluster, topic, [(None, b"x", 0)] * 5)
    ssc = make_ssc(wal=False, checkpoint=False)
    params = direct_params(local_cluster)
    cases: list[tuple[tuple[Any, ...], type[Exception], str]] = [
        ((ssc, {topic: 1}, params), TypeError, "topics should be list"),
        ((ssc, [], params), ValueError, "at least one topic"),
        ((ssc, [topic], "brokers"), TypeError, "kafkaParams should be dict"),
        ((ssc, [topic], {"auto.offset.reset": "smallest"}), ValueError, "metadata.broker.list"),
        ((ssc, [topic], {**params, "auto.offset.reset": "middle"}), ValueError, "auto.offset.reset"),
        (
            (ssc, ["no-such-topic-y"], {**params, "missing.topic.timeout.ms": 0}),
            ValueError,
            "topic 'no-such-topic-y' does not exist",
        ),
        ((ssc, [topic], params, [(topic, 0)]), TypeError, "fromOffsets should be dict"),
        (
            (ssc, [topic], params, {TopicAndPartition("other", 0): 0}),
            ValueError,
            "not the topics of fromOffsets",
        ),
        ((ssc, [topic], params, {TopicAndPartition(topic, 4): 0}), ValueError, r"\[" + topic + r",4\]"),
        ((object(), [topic], params), TypeError, "StreamingContext"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            KafkaUtils.createDirectStream(*args)


def test_a_topic_missing_at_first_follows_create_streams_rule(
    local_cluster: ClusterUnderTest, make_ssc: Any
) -> None:
    """Not at once: a topic that appears within missing.topic.timeout.ms is read; one that does
    not is a ValueError naming it and the bound."""
    ssc = make_ssc(wal=False, checkpoint=False)
    params = {**direct_params(local_cluster), "missing.topic.timeout.ms": 1000}
    never = unique_name("direct-never")
    with pytest.raises(ValueError, match=rf"topic '{never}' does not exist in Kafka \(missing for 1000 ms"):
        KafkaUtils.createDirectStream(ssc, [never], params)

    # Created once the stream has been told it is missing (the rule's one line), not before.
    later = unique_name("direct-later")
    told = threading.Event()

    class Told(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if f"'{later}' does not exist" in record.getMessage():
                told.set()

    def create_once_told() -> None:
        if told.wait(30):
            local_cluster.create_topic(later, partitions=2)

    rule = logging.getLogger("reliable_kafka.kafka.client.missing_topics")
    handler, level = Told(), rule.level
    rule.addHandler(handler)
    rule.setLevel(logging.INFO)
    creator = threading.Thread(target=create_once_told, daemon=True)
    creator.start()
    try:
        stream = KafkaUtils.createDirectStream(ssc, [later], {**params, "missing.topic.timeout.ms": 60_000})
    finally:
        rule.removeHandler(handler)
        rule.setLevel(level)
    creator.join(30)
    assert told.is_set()
    assert stream.current_offsets == {TopicAndPartition(later, 0): 0, TopicAndPartition(later, 1): 0}


def test_from_offsets_outside_the_log_follow_auto_offset_reset(
    local_cluster: ClusterUnderTest, make_ssc: Any, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_name("direct-from")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, b"x", i % 2) for i in range(10)])
    ssc = make_ssc(wal=False, checkpoint=False)
    beyond = {TopicAndPartition(topic, 0): 99, TopicAndPartition(topic, 1): 2}
    smallest = KafkaUtils.createDirectStream(
        ssc, [topic], direct_params(local_cluster, **{"auto.offset.reset": "smallest"}), beyond
    )
    largest = KafkaUtils.createDirectStream(ssc, [topic], direct_params(local_cluster), beyond)
    assert smallest.current_offsets == {TopicAndPartition(topic, 0): 0, TopicAndPartition(topic, 1): 2}
    assert largest.current_offsets == {TopicAndPartition(topic, 0): 5, TopicAndPartition(topic, 1): 2}
    assert "fromOffsets[[%s,0]]=99 is outside its log [0, 5]" % topic in caplog.text  # noqa: UP031

"""``format("reliable-kafka")`` queries in-process, on real brokers: the read limit, AvailableNow,
the group's offsets after each batch and what ``reliable-kafka lag`` and ``kafka-consumer-groups
--describe`` see of them, and the
handover from a ``createStream`` app."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.cli import main as cli_main
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import offset_path
from reliable_kafka.settings import JobSettings, ReceiverSettings, StreamingSettings, WriteAheadLogSettings
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.helpers import (
    commit_in_kafka,
    committed_offsets,
    delete_records,
    group_params,
    kafka_committed_offsets,
    produce,
)
from tests.kafka.kafka_tools import describe_group
from tests.support import wait_until

pytestmark = pytest.mark.integration


def source_options(
    cluster: ClusterUnderTest, group: str, *, zookeeper_storage: str = "zookeeper", **options: str
) -> dict[str, str]:
    """The group in ZooKeeper where the cluster has one (3.9; ``zookeeper_storage="dual"``: in
    Kafka too), else in Kafka (4, KRaft)."""
    kafka = {f"kafka.{key}": str(value) for key, value in cluster.client_config().items()}
    if cluster.has_zookeeper:
        store = {"zookeeper.connect": cluster.zookeeper_connect, "offsets.storage": zookeeper_storage}
    else:
        store = {"offsets.storage": "kafka"}
    return {**kafka, **store, "group.id": group, **options}


def commit_group(cluster: ClusterUnderTest, group: str, topic: str, offsets: dict[int, int]) -> None:
    """The group's offsets as a createStream app would have left them, in the store it used."""
    if not cluster.has_zookeeper:
        commit_in_kafka(cluster, group, topic, offsets)
        return
    zk = cluster.zookeeper_client()
    try:
        for partition, offset in offsets.items():
            zk.create(
                offset_path(group, TopicAndPartition(topic, partition)), str(offset).encode(), makepath=True
            )
    finally:
        zk.stop()
        zk.close()


def group_offsets(cluster: ClusterUnderTest, group: str, topic: str, partitions: int) -> dict[int, int]:
    if cluster.has_zookeeper:
        return committed_offsets(cluster, group, topic, partitions)
    return kafka_committed_offsets(cluster, group, topic, partitions)


class Batches:
    """What foreachBatch saw: each batch's rows as (partition, offset, value), and every row's
    timestamp (ms), timestampType and headers (None without includeHeaders)."""

    def __init__(self) -> None:
        self.rows: list[list[tuple[int, int, bytes]]] = []
        self.metadata: list[tuple[int, int, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        headers = "headers" if "headers" in frame.columns else "NULL AS headers"
        columns = ("partition", "offset", "value", "unix_millis(timestamp) AS ms", "timestampType", headers)
        collected = frame.selectExpr(*columns).collect()
        with self.lock:
            self.rows.append([(r.partition, r.offset, bytes(r.value)) for r in collected])
            self.metadata += [
                (r.ms, r.timestampType, r.headers and [(h.key, bytes(h.value)) for h in r.headers])
                for r in collected
            ]

    def all(self) -> list[tuple[int, int, bytes]]:
        return [row for batch in self.rows for row in batch]


def run_available_now(spark: Any, options: dict[str, str], checkpoint: Path, sink: Batches) -> None:
    frame = spark.readStream.format("reliable-kafka").options(**options).load()
    query = frame.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    query.trigger(availableNow=True).start().awaitTermination(180)


def lag_rows(cluster: ClusterUnderTest, group: str, topic: str) -> list[dict[str, Any]]:
    """``reliable-kafka lag --json`` of the group, as an operator runs it."""
    config = cluster.client_config()
    where = (
        ["--zookeeper", cluster.zookeeper_connect]
        if cluster.has_zookeeper
        else ["--bootstrap-servers", str(config.pop("bootstrap.servers")), "--offsets-storage", "kafka"]
    )
    extra = [
        arg for key, value in config.items() if key != "bootstrap.servers" for arg in ("-X", f"{key}={value}")
    ]
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(["lag", *where, "--group", group, "--topic", topic, "--json", *extra], out=out, err=err)
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())["partitions"]


@pytest.mark.brokers("3.9", "4")
def test_available_now_reads_the_start_s_ends_in_bounded_batches_and_commits_the_group(
    local_cluster: ClusterUnderTest, spark: Any, tmp_path: Path
) -> None:
    topic, group = unique_name("sql-bounded"), unique_name("sql-group")
    local_cluster.create_topic(topic, partitions=2)
    # Within retention (7 days): a broker's retention check deletes records stamped long ago.
    stamp_ms = int(time.time()) * 1000 - 60_000
    messages = [(None, f"m{i}".encode(), i % 2) for i in range(50)]
    sent = produce(local_cluster, topic, messages, headers=[("h", b"v")], timestamp=stamp_ms)
    assert sent == {0: 25, 1: 25}
    sink = Batches()
    late = threading.Event()

    def first_batch_produces_more(frame: Any, batch_id: int) -> None:
        sink(frame, batch_id)
        if not late.is_set():  # records that come after the query began: AvailableNow leaves them
            produce(local_cluster, topic, [(None, b"late", p) for p in (0, 1) for _ in range(5)])
            late.set()

    options = source_options(
        local_cluster,
        group,
        zookeeper_storage="dual",  # on 3.9 also where kafka-consumer-groups looks
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="20",
        includeHeaders="true",
    )
    run_available_now(spark, options, tmp_path / "checkpoint", first_batch_produces_more)

    assert late.is_set()
    assert [len(rows) for rows in sink.rows] == [20, 20, 10]
    assert sorted(sink.all()) == sorted((i % 2, i // 2, f"m{i}".encode()) for i in range(50))
    assert set(map(repr, sink.metadata)) == {repr((stamp_ms, 0, [("h", b"v")]))}  # 0: CreateTime
    assert group_offsets(local_cluster, group, topic, 2) == {0: 25, 1: 25}
    rows = lag_rows(local_cluster, group, topic)
    assert [(r["partition"], r["committed"], r["log_end"], r["lag"]) for r in rows] == [
        (0, 25, 30, 5),
        (1, 25, 30, 5),
    ]
    described = describe_group(local_cluster, group)
    assert [
        (p, row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"])
        for (_, p), row in sorted(described.items())
    ] == [(0, "25", "30", "5"), (1, "25", "30", "5")], described


@pytest.mark.brokers("3.9", "4")
def test_a_query_takes_over_a_create_stream_app_s_group_and_reads_every_record_once(
    local_cluster: ClusterUnderTest, spark: Any, spark_context: Any, tmp_path: Path
) -> None:
    """The app consumes what was there and stops gracefully; the query on the same group reads
    what came after, and nothing twice (startingOffsets=earliest would, were the group ignored).
    ZooKeeper's 0.8 offsets on 3.9, Kafka's group coordinator on 4."""
    topic, group = unique_name("sql-handover"), unique_name("sql-group")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, f"a{i}".encode(), i % 2) for i in range(40)])

    settings = StreamingSettings(
        receiver=ReceiverSettings(block_interval_ms=200),
        wal=WriteAheadLogSettings(enable=True),
        jobs=JobSettings(graceful_stop_timeout_ms=120_000),
    )
    ssc = StreamingContext(spark_context, 1.0, settings)
    ssc.checkpoint(str(tmp_path / "dstream-checkpoint"))
    zk_quorum, timeouts = group_params(local_cluster)
    stream = KafkaUtils.createStream(
        ssc,
        zk_quorum,
        group,
        {topic: 1},
        {"auto.offset.reset": "smallest", **local_cluster.client_config(), **timeouts},
    )
    by_the_app: list[str] = []
    stream.foreachRDD(lambda rdd: by_the_app.extend(rdd.map(lambda kv: kv[1]).collect()))
    ssc.start()
    try:
        wait_until(lambda: len(by_the_app) >= 40, timeout_s=120, what="the app's 40 records")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    assert group_offsets(local_cluster, group, topic, 2) == {0: 20, 1: 20}

    produce(local_cluster, topic, [(None, f"b{i}".encode(), i % 2) for i in range(40)])
    sink = Batches()
    options = source_options(local_cluster, group, subscribe=topic, startingOffsets="earliest")
    run_available_now(spark, options, tmp_path / "query-checkpoint", sink)

    by_the_query = [value.decode() for _, _, value in sink.all()]
    assert sorted(by_the_app + by_the_query) == sorted(
        [f"a{i}" for i in range(40)] + [f"b{i}" for i in range(40)]
    )
    assert sorted(by_the_query) == sorted(f"b{i}" for i in range(40))
    assert group_offsets(local_cluster, group, topic, 2) == {0: 40, 1: 40}


def test_bad_input_fails_the_load_before_any_query_starts(
    local_cluster: ClusterUnderTest, spark: Any
) -> None:
    """Spark wraps the source's error; its message names what is wrong."""
    group = unique_name("sql-group")
    missing_topic = unique_name("sql-missing")
    for options, message in [
        (
            source_options(local_cluster, group, subscribe="t", maxOffsetsPerTriger="5"),
            "did you mean maxOffsetsPerTrigger?",
        ),
        ({**source_options(local_cluster, group, subscribe="t"), "group.id": ""}, "group.id"),
        (
            source_options(local_cluster, group, subscribe=missing_topic),
            f"topic '{missing_topic}' does not exist in Kafka",
        ),
    ]:
        if not options["group.id"]:
            del options["group.id"]
            message = "option group.id is required"
        with pytest.raises(Exception, match=re.escape(message)):
            spark.readStream.format("reliable-kafka").options(**options).load()
    assert not spark.streams.active


def test_records_kafka_no_longer_has_fail_the_query_or_are_skipped_as_fail_on_data_loss_says(
    local_cluster: ClusterUnderTest, spark: Any, tmp_path: Path
) -> None:
    """The group committed offset 2; retention (here: DeleteRecords) moved the log start to 10."""
    topic, group = unique_name("sql-lost"), unique_name("sql-group")
    local_cluster.create_topic(topic, partitions=1)
    produce(local_cluster, topic, [(None, f"old{i}".encode(), 0) for i in range(10)])
    assert delete_records(local_cluster, topic, 1) == {0: 10}
    produce(local_cluster, topic, [(None, f"new{i}".encode(), 0) for i in range(5)])
    commit_group(local_cluster, group, topic, {0: 2})

    failing = source_options(local_cluster, group, subscribe=topic)
    with pytest.raises(
        Exception, match=rf"{topic} partition 0 offsets \[2, 15\): Kafka no longer has these records"
    ):
        run_available_now(spark, failing, tmp_path / "failing", Batches())
    assert group_offsets(local_cluster, group, topic, 1) == {0: 2}

    sink = Batches()
    run_available_now(spark, {**failing, "failOnDataLoss": "false"}, tmp_path / "skipping", sink)
    assert sink.all() == [(0, 10 + i, f"new{i}".encode()) for i in range(5)]
    assert group_offsets(local_cluster, group, topic, 1) == {0: 15}

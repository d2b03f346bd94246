"""The lag part of the status page and /metrics, wherever the group keeps its offsets.

Offsets are committed by plain consumers (Kafka) and written to ZooKeeper directly: the page must
show what the store holds, so no receiver runs; the streams are only declared, which is all
``lag_sources_of`` reads.
"""

from __future__ import annotations

import io
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.cli import main
from reliable_kafka.kafka.client.offset_range import OffsetRange, block_metadata
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import offset_path
from reliable_kafka.scheduler.batch_input_info import BLOCKS_KEY
from reliable_kafka.scheduler.listener import (
    BatchInfo,
    ReceiverInfo,
    StreamingListenerBatchCompleted,
    StreamingListenerReceiverStarted,
    StreamInputInfo,
)
from reliable_kafka.settings import StreamingSettings, UISettings
from reliable_kafka.ui import metrics
from reliable_kafka.ui.lag import LagMonitor, LagSource
from reliable_kafka.ui.status_store import StreamingStatusStore
from reliable_kafka.ui.status_ui import StatusUI, lag_sources_of
from reliable_kafka.ui.unprocessed import read_unprocessed
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.conftest import e2e_settings
from tests.e2e.helpers import commit_in_kafka, committed_offsets, produce
from tests.support import wait_until
from tests.ui.cli_command import X_OPTIONS
from tests.ui.lag_table import _ROW, page_rows

_RECEIVER = re.compile(r"<td class='receiver'>([^<]*)</td>")
_RUNS_AS = re.compile(r"<td class='receiver-runs-as'>([^<]*)</td><td class='receiver-executor'>([^<]*)</td>")


def gauges(ui: StatusUI, family: str) -> dict[tuple[str, int], float]:
    text = metrics.render(ui.registry).decode()
    found = {f.name: f for f in text_string_to_metric_families(text)}[family]
    return {(s.labels["group"], int(s.labels["partition"])): s.value for s in found.samples}


@pytest.fixture
def declared(spark_context: SparkContext) -> Any:
    ssc = StreamingContext(spark_context, 1.0, StreamingSettings(ui=UISettings(port=0, lag_refresh_ms=0)))
    yield ssc
    ssc.stop(stopSparkContext=False)


def test_page_shows_kafka_and_dual_offsets(
    local_cluster: ClusterUnderTest, declared: StreamingContext
) -> None:
    topic = unique_name("page-lag")
    in_kafka, dual = unique_name("page-kafka"), unique_name("page-dual")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, b"x", p) for p in range(2) for _ in range(10)])
    commit_in_kafka(local_cluster, in_kafka, topic, {0: 3, 1: 10})
    commit_in_kafka(local_cluster, dual, topic, {0: 6, 1: 2})
    zk = local_cluster.zookeeper_client()
    try:
        zk.create(offset_path(dual, TopicAndPartition(topic, 0)), b"4", makepath=True)
        zk.create(offset_path(dual, TopicAndPartition(topic, 1)), b"8", makepath=True)
    finally:
        zk.stop()
        zk.close()
    for group, extra in ((in_kafka, {"dual.commit.enabled": "false"}), (dual, {})):
        params = {"offsets.storage": "kafka", **extra, **local_cluster.client_config()}
        KafkaUtils.createStream(declared, local_cluster.zookeeper_connect, group, {topic: 1}, params)

    sources = lag_sources_of(declared)
    # With a ZooKeeper, offsets.storage=kafka commits to both unless dual.commit.enabled=false.
    assert [(s.group, s.offsets_storage) for s in sources] == [(in_kafka, "kafka"), (dual, "dual")]
    ui = StatusUI.for_context(declared)
    try:
        rows = page_rows(ui.handle("/", {}).body.decode())
        assert rows == {
            (in_kafka, topic, 0): {"committed": "3", "log-end": "10", "lag": "7", "owner": "none"},
            (in_kafka, topic, 1): {"committed": "10", "log-end": "10", "lag": "0", "owner": "none"},
            (dual, topic, 0): {"committed": "6", "log-end": "10", "lag": "4", "owner": "none"},
            (dual, topic, 1): {"committed": "8", "log-end": "10", "lag": "2", "owner": "none"},
        }
        committed = gauges(ui, "reliable_kafka_partition_committed_offset")
        assert committed == {(in_kafka, 0): 3, (in_kafka, 1): 10, (dual, 0): 6, (dual, 1): 8}
        lag = gauges(ui, "reliable_kafka_partition_lag_records")
        assert lag == {(in_kafka, 0): 7, (in_kafka, 1): 0, (dual, 0): 4, (dual, 1): 2}
    finally:
        ui.stop()


@pytest.mark.brokers("4")
def test_page_of_a_group_without_zookeeper(local_cluster: ClusterUnderTest) -> None:
    """Kafka 4 (KRaft): partitions from metadata, offsets from the coordinator, no ZooKeeper asked."""
    topic, group = unique_name("page-kraft"), unique_name("page-kraft-group")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, b"x", p) for p in range(2) for _ in range(5)])
    commit_in_kafka(local_cluster, group, topic, {0: 1})

    def no_zookeeper(source: LagSource) -> Any:
        raise AssertionError(f"ZooKeeper asked for {source.group}")

    source = LagSource(
        group=group, topics=(topic,), offsets_storage="kafka", client_config=local_cluster.client_config()
    )
    monitor = LagMonitor([source], refresh_ms=0, connect_zookeeper=no_zookeeper)
    ui = StatusUI(StreamingStatusStore(1000), monitor, UISettings(port=0))
    try:
        assert monitor.report().errors == ()
        assert page_rows(ui.handle("/", {}).body.decode()) == {
            (group, topic, 0): {"committed": "1", "log-end": "5", "lag": "4", "owner": "none"},
            (group, topic, 1): {"committed": "-", "log-end": "5", "lag": "-", "owner": "none"},
        }
    finally:
        ui.stop()


def test_streams_sharing_a_group_show_each_partition_once_with_its_own_receiver(
    local_cluster: ClusterUnderTest, declared: StreamingContext
) -> None:
    """Three createStreams of one group on one topic used to give three identical series per
    partition (Prometheus refuses the scrape) and label every partition with receiver 0."""
    topic, group = unique_name("page-shared"), unique_name("page-shared-group")
    local_cluster.create_topic(topic, partitions=3)
    produce(local_cluster, topic, [(None, b"x", p) for p in range(3) for _ in range(5)])
    zk = local_cluster.zookeeper_client()
    try:
        for partition in range(3):
            zk.create(offset_path(group, TopicAndPartition(topic, partition)), b"2", makepath=True)
    finally:
        zk.stop()
        zk.close()
    streams = [
        KafkaUtils.createStream(
            declared, local_cluster.zookeeper_connect, group, {topic: 1}, local_cluster.client_config()
        )
        for _ in range(3)
    ]
    ui = StatusUI.for_context(declared)
    try:
        # Stream i delivered partition 2 - i.
        for index, stream in enumerate(streams):
            ui.store.on_receiver_started(
                StreamingListenerReceiverStarted(ReceiverInfo(stream.id, f"receiver-{index}", True, "h"))
            )
        blocks = {
            stream.id: StreamInputInfo(
                stream.id,
                3,
                {BLOCKS_KEY: [{"metadata": block_metadata([OffsetRange(topic, 2 - index, 2, 5)])}]},
            )
            for index, stream in enumerate(streams)
        }
        batch = BatchInfo(1000, blocks, 1000, 1000, 1001)
        ui.store.on_batch_completed(StreamingListenerBatchCompleted(batch))

        text = metrics.render(ui.registry).decode()
        for family in text_string_to_metric_families(text):
            series = [(sample.name, tuple(sorted(sample.labels.items()))) for sample in family.samples]
            assert len(series) == len(set(series)), f"duplicate series in {family.name}"
        assert gauges(ui, "reliable_kafka_partition_lag_records") == {(group, p): 3 for p in range(3)}

        page = ui.handle("/", {}).body.decode()
        shown = [(int(partition), cells) for found_topic, partition, cells in _ROW.findall(page)]
        assert [partition for partition, _ in shown] == [0, 1, 2]  # once each
        receivers = [_RECEIVER.search(cells).group(1) for _, cells in shown]  # type: ignore[union-attr]
        assert receivers == ["receiver-2", "receiver-1", "receiver-0"]
    finally:
        ui.stop()


def test_a_stream_behind_its_lag_of_0_is_told_by_the_page_metrics_and_the_lag_command(
    local_cluster: ClusterUnderTest, spark_context: SparkContext, tmp_path: Path
) -> None:
    """Issue 42: the receiver commits a block's offsets once it is in the WAL, so Kafka's lag reads
    0 while every batch waits behind one that is held. The page and /metrics show the batches
    and records received and not yet processed, ``reliable-kafka lag --status-url`` prints them
    beside the lag, and ``--max-delay`` exits 1 naming the oldest waiting batch."""
    records = 20
    topic, group = unique_name("held"), unique_name("held-group")
    local_cluster.create_topic(topic, partitions=1)
    produce(local_cluster, topic, [(None, b"x", 0)] * records)
    settings = e2e_settings(wal=True).model_copy(update={"ui": UISettings(port=0, lag_refresh_ms=0)})
    ssc = StreamingContext(spark_context, 1.0, settings)
    ssc.checkpoint(str(tmp_path / "checkpoint"))
    stream = KafkaUtils.createStream(
        ssc,
        local_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {"auto.offset.reset": "smallest", **local_cluster.client_config()},
    )
    release = threading.Event()
    stream.foreachRDD(lambda rdd: release.wait(120))  # every batch held until the test has looked
    ssc.start()
    try:
        ui = ssc.status_ui
        assert ui is not None and ui.url is not None
        url = ui.url
        wait_until(
            lambda: committed_offsets(local_cluster, group, topic, 1) == {0: records},
            timeout_s=120,
            what="every record stored and committed",
        )
        wait_until(
            lambda: (u := read_unprocessed(url)).records == records and u.scheduling_delay_s > 1.0,
            timeout_s=120,
            what="every record in a batch not yet processed, the oldest waiting for over a second",
        )
        page = ui.handle("/", {}).body.decode()
        assert page_rows(page)[(group, topic, 0)]["lag"] == "0"
        assert f"<dd id='summary-unprocessed-records'>{records}</dd>" in page
        # A receiver task of a local master: on the executor "driver", as a task.
        assert _RUNS_AS.findall(page) == [("task", "driver")]

        out, err = io.StringIO(), io.StringIO()
        args = ["lag", "--zookeeper", local_cluster.zookeeper_connect, "--group", group, "--max-lag", "0"]
        code = main([*args, "--status-url", url, "--max-delay", "1", *X_OPTIONS], out=out, err=err)
        _header, row, beside = out.getvalue().splitlines()
        assert row.split()[:6] == [group, topic, "0", str(records), str(records), "0"]
        assert beside.startswith(f"Received, not yet processed (status page {url}): ")
        assert f" batches (waiting and running), {records} records; the oldest waiting batch" in beside
        assert code == 1
        assert err.getvalue().startswith("--max-delay 1 s: the oldest waiting batch has waited ")
        assert err.getvalue().count("\n") == 1  # the lag of 0 broke no bound
    finally:
        release.set()
        ssc.stop(stopSparkContext=False)

"""The status page of a live Kafka stream, read by a real headless Chromium (Debian's ``chromium``
driven by playwright-core, installed by ``.ci/run``), against the project's local cluster.

The stream is throttled (``max_rate``) so that the group lags for a while; the lag figures are
compared with ZooKeeper and the broker read right before and right after the page load, and a
load during which they moved is done again (the page reads them fresh: ``lag_refresh_ms=0``).
"""

from __future__ import annotations

import threading
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.dstream.functions import time_ms_of
from reliable_kafka.scheduler.listener import (
    BatchInfo,
    ReceiverInfo,
    StreamingListener,
    StreamingListenerBatchCompleted,
    StreamingListenerReceiverStarted,
)
from reliable_kafka.settings import ReceiverSettings, UISettings
from reliable_kafka.ui import metrics
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.conftest import BLOCK_INTERVAL_MS, e2e_settings
from tests.e2e.helpers import committed_offsets, log_end_offsets, produce
from tests.support import wait_until
from tests.ui.browser import ARTIFACTS, Driver, browser_or_skip

pytestmark = pytest.mark.integration

# At 10 records/s a partition's records arrive in one fetch and the limiter then holds the next
# fetch back for ~30 s: the group lags by a whole partition meanwhile.
PARTITIONS, FIRST, RECORDS, MAX_RATE = 2, 10, 600, 10


def parse_samples(text: str) -> list[Any]:
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


class Seen(StreamingListener):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.completed = 0
        self.batches: list[BatchInfo] = []
        self.receivers: list[ReceiverInfo] = []

    def on_batch_completed(self, event: StreamingListenerBatchCompleted) -> None:
        with self.lock:
            self.completed += 1
            self.batches.append(event.batch_info)

    def on_receiver_started(self, event: StreamingListenerReceiverStarted) -> None:
        with self.lock:
            self.receivers.append(event.receiver_info)


def test_status_page_in_chromium(
    local_cluster: ClusterUnderTest, spark_context: SparkContext, tmp_path: Path
) -> None:
    chromium, node = browser_or_skip()
    topic, group = unique_name("ui"), unique_name("ui-group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    # A first few records, so that each partition has a committed offset before the lag builds up.
    produce(local_cluster, topic, [(None, f"m{i}".encode(), i % PARTITIONS) for i in range(FIRST)])

    # Driver placement: the WAL and commit instruments count this process's data path.
    receiver = {"block_interval_ms": BLOCK_INTERVAL_MS, "max_rate": MAX_RATE, "placement": "driver"}
    settings = e2e_settings(wal=True).model_copy(
        update={"receiver": ReceiverSettings(**receiver), "ui": UISettings(port=0, lag_refresh_ms=0)}
    )
    ssc = StreamingContext(spark_context, 1.0, settings)
    ssc.checkpoint(str(tmp_path / "checkpoint"))
    stream = KafkaUtils.createStream(
        ssc,
        local_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {"auto.offset.reset": "smallest", **local_cluster.client_config()},
    )
    ranges_of_batch: dict[int, list[tuple[str, int, int, int]]] = {}

    def keep_ranges(batch_time: datetime, rdd: Any) -> None:
        ranges = [(r.topic, r.partition, r.fromOffset, r.untilOffset) for r in rdd.offsetRanges()]
        ranges_of_batch[time_ms_of(batch_time)] = sorted(ranges)
        rdd.count()

    stream.foreachRDD(keep_ranges)
    seen = Seen()
    ssc.addStreamingListener(seen)
    driver: Driver | None = None

    def zookeeper_now() -> dict[int, int]:
        return committed_offsets(local_cluster, group, topic, PARTITIONS)

    def broker_now() -> dict[int, int]:
        return log_end_offsets(local_cluster, topic, PARTITIONS)

    try:
        driver = Driver(node, chromium, tmp_path / "chromium-profile")
        ssc.start()
        ui = ssc.status_ui
        assert ui is not None and ui.url is not None
        first = {p: FIRST // PARTITIONS for p in range(PARTITIONS)}
        wait_until(lambda: zookeeper_now() == first, timeout_s=120, what="the first records committed")
        produce(local_cluster, topic, [(None, b"m", i % PARTITIONS) for i in range(FIRST, RECORDS)])

        # The page's committed offsets and log ends, read while ZooKeeper and the broker hold still.
        for _attempt in range(20):
            with seen.lock:
                completed_before = seen.completed
            before = zookeeper_now(), broker_now()
            page = driver.ask(op="page", url=ui.url)
            after = zookeeper_now(), broker_now()
            with seen.lock:
                completed_after = seen.completed
            if before == after:
                break
        else:
            pytest.fail("ZooKeeper's offsets moved during each of 20 page loads")
        committed, log_end = before

        # The four timelines: one point per completed batch, the batches the tables list.
        completed_times = sorted(row["batch_time"] for row in page["completed"])
        assert completed_before <= page["batches_completed"] <= completed_after
        assert len(completed_times) == page["batches_completed"]
        for chart, points in page["timelines"].items():
            assert points == completed_times, chart

        # The receiver, with the executor the tracker reported.
        with seen.lock:
            started = list(seen.receivers)
        assert len(page["receivers"]) == 1 and started
        row = page["receivers"][0]
        assert row["status"] == "ACTIVE"
        assert row["executor"] == started[-1].executor_id != ""
        assert row["host"] == started[-1].location != ""

        # Each partition: ZooKeeper's committed offset, the broker's high watermark, their difference.
        assert sorted((p["topic"], p["partition"]) for p in page["partitions"]) == [
            (topic, p) for p in range(PARTITIONS)
        ]
        for p in page["partitions"]:
            assert p["committed"] == committed[p["partition"]], p
            assert p["log_end"] == log_end[p["partition"]] == RECORDS // PARTITIONS, p
            assert p["lag"] == p["log_end"] - p["committed"], p
            assert p["owner"] != "none", p
        assert any(p["lag"] > 0 for p in page["partitions"]), page["partitions"]

        # A batch page lists the offset ranges its RDD had.
        with_records: list[dict[str, Any]] = []

        def completed_batch_with_records() -> bool:
            assert driver is not None and ui.url is not None
            rows = driver.ask(op="page", url=ui.url)["completed"]
            with_records[:] = [row for row in rows if row["records"] > 0]
            return bool(with_records)

        wait_until(completed_batch_with_records, timeout_s=120, what="a completed batch with records")
        batch = with_records[-1]
        details = driver.ask(op="batch", url=ui.url + batch["href"].lstrip("/"))
        listed = sorted((r["topic"], r["partition"], r["from"], r["until"]) for r in details["ranges"])
        assert listed == ranges_of_batch[batch["batch_time"]] != []
        assert details["operations"] == ["succeeded"]

        # Nothing but the page itself was fetched.
        for url in page["requests"] + details["requests"]:
            assert url.startswith(ui.url), url

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.ask(op="page", url=ui.url)
        driver.ask(op="screenshot", path=str(ARTIFACTS / "status-page.png"))
        assert (ARTIFACTS / "status-page.png").stat().st_size > 0

        # /metrics of the same server: every family, the partitions with what ZooKeeper holds now.
        with urllib.request.urlopen(f"{ui.url}metrics", timeout=60) as response:
            families = {f.name: f for f in text_string_to_metric_families(response.read().decode())}
        assert set(metrics.FAMILIES) <= set(families)
        partitions = {
            int(s.labels["partition"]) for s in families["reliable_kafka_partition_lag_records"].samples
        }
        assert partitions == set(range(PARTITIONS))
        # The data path's instruments saw this stream's WAL writes and commits (driver placement).
        for family in ("reliable_kafka_wal_write_seconds", "reliable_kafka_offset_commit_seconds"):
            assert next(s.value for s in families[family].samples if s.name.endswith("_count")) > 0

        # Once stopped (the bus drained), the batch metrics are exactly the listener's batches.
        ssc.stop(stopSparkContext=False)
        text = metrics.render(ui.registry).decode()
        values = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in parse_samples(text)}
        assert values[("reliable_kafka_batches_completed_total", ())] == len(seen.batches)
        records = sum(b.num_records for b in seen.batches)
        assert values[("reliable_kafka_records_received_total", (("stream_id", str(stream.id)),))] == records
        total_delay_s = sum(b.total_delay_ms or 0 for b in seen.batches) / 1000
        assert values[("reliable_kafka_batch_total_delay_seconds_sum", ())] == pytest.approx(total_delay_s)
    finally:
        if driver is not None:
            driver.close()
        ssc.stop(stopSparkContext=False)

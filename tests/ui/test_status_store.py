"""The status store: retention, totals, receivers' rates, output operations; and the page around it."""

from __future__ import annotations

import re
import threading
import urllib.request
from http import HTTPStatus

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reliable_kafka.scheduler.batch_input_info import BLOCKS_KEY
from reliable_kafka.scheduler.listener import (
    BatchInfo,
    OutputOperationInfo,
    ReceiverInfo,
    ScalingDecision,
    StreamingListenerBatchCompleted,
    StreamingListenerBatchStarted,
    StreamingListenerBatchSubmitted,
    StreamingListenerOutputOperationCompleted,
    StreamingListenerReceiverError,
    StreamingListenerReceiverStarted,
    StreamingListenerScalingDecision,
    StreamingListenerStreamingError,
    StreamInputInfo,
)
from reliable_kafka.settings import StreamingSettings, UISettings
from reliable_kafka.ui import metrics, pages, svg
from reliable_kafka.ui.lag import LagReport, PartitionLag
from reliable_kafka.ui.partition_receivers import PartitionReceivers
from reliable_kafka.ui.server import Response, StatusServer
from reliable_kafka.ui.status_store import StreamingStatusStore
from reliable_kafka.ui.status_ui import StatusUI
from reliable_kafka.ui.unprocessed import Unprocessed, metrics_url, parse_unprocessed

BATCH_MS = 1000

NO_RECEIVERS = PartitionReceivers({}, {})


def batch(
    time_ms: int, records: int = 10, *, started: bool = True, done: bool = True, failure: str | None = None
) -> BatchInfo:
    op = OutputOperationInfo(time_ms, 0, "foreachRDD", "at x.py:1", time_ms + 5, time_ms + 25, failure)
    offsets = {"topic": "t<1>", "partition": 0, "fromOffset": 0, "untilOffset": records}
    block = {"id": f"input-0-{time_ms}", "num_records": records, "in_wal": True}
    block["metadata"] = {"offset_ranges": [offsets]}
    return BatchInfo(
        batch_time_ms=time_ms,
        stream_id_to_input_info={0: StreamInputInfo(0, records, {BLOCKS_KEY: [block]})},
        submission_time_ms=time_ms + 1,
        processing_start_time_ms=time_ms + 5 if started else None,
        processing_end_time_ms=time_ms + 25 if done else None,
        output_operation_infos={0: op},
    )


def test_keeps_the_last_retained_batches_and_counts_all() -> None:
    store = StreamingStatusStore(BATCH_MS, retained_batches=3)
    for i in range(1, 6):
        store.on_batch_completed(StreamingListenerBatchCompleted(batch(i * BATCH_MS, records=i)))
    store.on_batch_completed(StreamingListenerBatchCompleted(batch(5 * BATCH_MS, records=5)))  # again
    snapshot = store.snapshot()
    assert [b.batch_time_ms for b in snapshot.completed] == [3000, 4000, 5000]
    assert snapshot.batches_completed == 5
    assert snapshot.records_received == 15 == snapshot.records_per_stream[0]
    assert store.batch(1000) is None and store.batch(5000) is not None
    assert snapshot.processing_delay.count == 5
    assert snapshot.processing_delay.sum == pytest.approx(5 * 0.020)


def test_receivers_rate_is_over_the_retained_batches() -> None:
    store = StreamingStatusStore(BATCH_MS, retained_batches=2)
    info = ReceiverInfo(0, "ReliableKafkaReceiver-0", True, "host-a", "driver")
    store.on_receiver_started(StreamingListenerReceiverStarted(info))
    for i, records in enumerate((100, 30, 50), start=1):
        store.on_batch_completed(StreamingListenerBatchCompleted(batch(i * BATCH_MS, records)))
    (receiver,) = store.snapshot().receivers
    assert receiver.records_per_second == pytest.approx((30 + 50) / 2)
    failed = ReceiverInfo(0, "ReliableKafkaReceiver-0", True, "host-a", "driver", "boom", "trace", 7)
    store.on_receiver_error(StreamingListenerReceiverError(failed))
    assert store.snapshot().receivers[0].info.last_error_message == "boom"


def test_active_batches_follow_their_output_operations() -> None:
    store = StreamingStatusStore(BATCH_MS)
    waiting = batch(2000, started=False, done=False)
    store.on_batch_submitted(StreamingListenerBatchSubmitted(batch(1000, done=False)))
    store.on_batch_submitted(StreamingListenerBatchSubmitted(waiting))
    store.on_batch_started(StreamingListenerBatchStarted(batch(1000, done=False)))
    failed = OutputOperationInfo(1000, 0, "foreachRDD", "d", 1005, 1030, "ValueError: bad <input>")
    store.on_output_operation_completed(StreamingListenerOutputOperationCompleted(failed))
    snapshot = store.snapshot()
    assert [b.batch_time_ms for b in snapshot.running] == [1000]
    assert snapshot.running[0].output_operation_infos[0].failure_reason == "ValueError: bad <input>"
    assert [b.batch_time_ms for b in snapshot.waiting] == [2000]
    store.on_batch_completed(StreamingListenerBatchCompleted(batch(1000)))
    store.on_batch_started(StreamingListenerBatchStarted(batch(2000, done=False)))
    assert [b.batch_time_ms for b in store.snapshot().running] == [2000]


def test_pages_escape_and_list_offsets() -> None:
    store = StreamingStatusStore(BATCH_MS)
    store.on_receiver_started(
        StreamingListenerReceiverStarted(ReceiverInfo(0, "<script>x</script>", True, "h", "1"))
    )
    store.on_batch_completed(StreamingListenerBatchCompleted(batch(1000, failure="Error <b>")))
    lag = LagReport((PartitionLag("g", "t<1>", 0, 4, 10, None, None),), 0, ("group g: <oops>",))
    page = pages.streaming_page(store.snapshot(), lag, PartitionReceivers({}, {"g": "r"}))
    assert "<script>x" not in page and "&lt;script&gt;x" in page
    assert "<oops>" not in page
    assert page.count('class="point"') == 4  # one batch, four timelines
    stored = store.batch(1000)
    assert stored is not None
    details = pages.batch_page(stored, BATCH_MS)
    assert "Error &lt;b&gt;" in details and "failed" in details
    assert [str(r) for r in pages.batch_offset_ranges(stored)] == [
        "OffsetRange(topic: t<1>, partition: 0, range: [0 -> 10])"
    ]


def test_charts_have_one_point_per_value_and_count_every_value() -> None:
    points = [(i * 1000, float(i)) for i in range(1, 8)]
    assert svg.timeline("t", points, "ms").count('class="point"') == 7
    assert svg.timeline("t", [], "ms").count('class="point"') == 0
    bars = svg.histogram("h", [0.0, 1.0, 1.0, 9.0, 10.0], "ms")
    counts = [int(part.split(": ")[1].split(" ")[0]) for part in bars.split("<title>")[1:]]
    assert sum(counts) == 5


def test_server_serves_read_only_and_takes_the_next_free_port() -> None:
    def app(path: str, query: dict[str, list[str]]) -> Response:
        return Response(HTTPStatus.OK, "text/plain", f"{path} {query}".encode())

    first = StatusServer(app, "127.0.0.1", 0)
    first.start()
    second = StatusServer(app, "127.0.0.1", first.port)
    second.start()
    try:
        assert second.port != first.port
        with urllib.request.urlopen(f"{second.url}x?id=1", timeout=30) as response:
            assert response.read() == b"/x {'id': ['1']}"
        request = urllib.request.Request(second.url, data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=30)
        assert error.value.code == HTTPStatus.NOT_IMPLEMENTED
    finally:
        first.stop()
        second.stop()


def test_spark_keys() -> None:
    settings = StreamingSettings.from_spark_conf(
        {
            "spark.streaming.ui.enabled": "false",
            "spark.streaming.ui.port": "4444",
            "spark.streaming.ui.host": "0.0.0.0",
            "spark.streaming.ui.retainedBatches": "50",
        }
    )
    assert settings.ui == UISettings(enabled=False, port=4444, host="0.0.0.0", retained_batches=50)
    assert StreamingSettings().ui == UISettings(
        enabled=True, port=4050, host="127.0.0.1", retained_batches=1000
    )


def test_the_store_is_safe_under_concurrent_events_and_reads() -> None:
    store = StreamingStatusStore(BATCH_MS, retained_batches=50)
    errors: list[BaseException] = []

    def post(offset: int) -> None:
        for i in range(500):
            store.on_batch_completed(StreamingListenerBatchCompleted(batch((offset + i * 4) * 1000)))

    def read() -> None:
        try:
            for _ in range(200):
                snapshot = store.snapshot()
                assert len(snapshot.completed) <= 50
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=post, args=(k,)) for k in range(4)] + [threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    snapshot = store.snapshot()
    assert not errors
    assert snapshot.batches_completed == 2000 and len(snapshot.completed) == 50
    assert snapshot.records_received == 20000
    assert snapshot.receivers == ()


def test_the_last_streaming_error_is_kept_and_shown_escaped() -> None:
    store = StreamingStatusStore(batch_duration_ms=1000)
    assert store.snapshot().last_streaming_error is None
    assert "streaming-error" not in pages.streaming_page(store.snapshot(), None, NO_RECEIVERS)
    store.onStreamingError(StreamingListenerStreamingError(1000, "old"))
    store.onStreamingError(StreamingListenerStreamingError(2000, "Batches are waiting for task slots <2>"))
    assert store.snapshot().last_streaming_error == (2000, "Batches are waiting for task slots <2>")
    page = pages.streaming_page(store.snapshot(), None, NO_RECEIVERS)
    assert "<p id='streaming-error' class='failed'>" in page
    assert "Batches are waiting for task slots &lt;2&gt;" in page


def _gauges(store: StreamingStatusStore, now_ms: int) -> dict[str, float]:
    text = metrics.render(metrics.metrics_registry(store, None, now_ms=lambda: now_ms)).decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if family.name.startswith("reliable_kafka_unprocessed_")
    }


def test_what_is_received_and_not_yet_processed() -> None:
    """Kafka's lag reads 0 while batches queue (a committed offset means stored, not processed):
    the store counts the unprocessed batches, their records and how long the oldest waiting batch
    has waited, for /metrics, the page and ``reliable-kafka lag --status-url``."""
    store = StreamingStatusStore(BATCH_MS)
    store.on_batch_completed(StreamingListenerBatchCompleted(batch(500, records=100)))  # processed
    store.on_batch_submitted(StreamingListenerBatchSubmitted(batch(1000, 7, started=False, done=False)))
    store.on_batch_started(StreamingListenerBatchStarted(batch(1000, 7, done=False)))
    for time_ms, records in ((2000, 5), (3000, 11)):
        queued = batch(time_ms, records, started=False, done=False)
        store.on_batch_submitted(StreamingListenerBatchSubmitted(queued))

    # The oldest waiting batch was submitted at 2001 (the running one waits no longer).
    snapshot = store.snapshot(now_ms=92_001)
    assert (snapshot.unprocessed_batches, snapshot.unprocessed_records) == (3, 7 + 5 + 11)
    assert snapshot.unprocessed_scheduling_delay_ms == 90_000
    assert _gauges(store, 92_001) == {
        "reliable_kafka_unprocessed_batches": 3,
        "reliable_kafka_unprocessed_records": 23,
        "reliable_kafka_unprocessed_scheduling_delay_seconds": 90.0,
    }
    page = pages.streaming_page(snapshot, None, NO_RECEIVERS)
    assert "<span id='summary-unprocessed-batches'>3</span> (2 waiting, 1 running)" in page
    assert "<dd id='summary-unprocessed-records'>23</dd>" in page
    assert "<dd id='summary-unprocessed-delay' data-ms='90000'>1.5 min</dd>" in page
    # What the lag command reads back from the page's /metrics.
    text = metrics.render(metrics.metrics_registry(store, None, now_ms=lambda: 92_001)).decode()
    assert parse_unprocessed(text, "page") == Unprocessed(batches=3, records=23, scheduling_delay_s=90.0)

    # Once every batch has run, nothing is left and nothing waits.
    for time_ms, records in ((1000, 7), (2000, 5), (3000, 11)):
        store.on_batch_completed(StreamingListenerBatchCompleted(batch(time_ms, records)))
    assert set(_gauges(store, 92_001).values()) == {0}
    assert "no batch waits" in pages.streaming_page(store.snapshot(92_001), None, NO_RECEIVERS)


def test_the_lag_command_reads_the_pages_metrics_and_nothing_else() -> None:
    assert metrics_url("http://driver:4050/") == "http://driver:4050/metrics"
    assert metrics_url("http://driver:4050") == "http://driver:4050/metrics"
    assert metrics_url("https://proxy/app-1/metrics") == "https://proxy/app-1/metrics"
    for bad in ("driver:4050", "ftp://driver/", "http://user:secret@driver:4050/"):
        with pytest.raises(ValueError) as raised:
            metrics_url(bad)
        assert "secret" not in str(raised.value)
    with pytest.raises(ValueError, match=r"^http://x/metrics has no reliable_kafka_unprocessed_batches, "):
        parse_unprocessed("# no families\n", "http://x/metrics")
    # The page is also at /streaming/, so its metrics are there too.
    assert metrics_url("http://driver:4050/streaming/") == "http://driver:4050/streaming/metrics"
    ui = StatusUI(StreamingStatusStore(BATCH_MS), None, UISettings(port=0))
    response = ui.handle("/streaming/metrics", {})
    assert response.status == HTTPStatus.OK
    assert parse_unprocessed(response.body.decode(), "page") == Unprocessed(0, 0, 0.0)


def test_receivers_say_whether_they_run_as_a_task_or_in_the_driver_process() -> None:
    """On a local master every receiver shows executor "driver": a task's and one in the driver's
    own Python process (beyond the spare task slots) differ only by how they run."""
    store = StreamingStatusStore(BATCH_MS)
    for stream_id, runs_as in ((0, "task"), (1, "driver process")):
        info = ReceiverInfo(stream_id, f"r-{stream_id}", True, "h", "driver", runs_as=runs_as)
        store.on_receiver_started(StreamingListenerReceiverStarted(info))
    page = pages.streaming_page(store.snapshot(), None, NO_RECEIVERS)
    cell = r"<td class='receiver-runs-as'>([^<]*)</td><td class='receiver-executor'>([^<]*)<"
    cells = re.findall(cell, page)
    assert cells == [("task", "driver"), ("driver process", "driver")]
    text = metrics.render(metrics.metrics_registry(store, None)).decode()
    families = text_string_to_metric_families(text)
    (family,) = [f for f in families if f.name == "reliable_kafka_receiver_active"]
    assert {(s.labels["runs_as"], s.labels["executor_id"]) for s in family.samples} == {
        ("task", "driver"),
        ("driver process", "driver"),
    }


def test_scaling_decisions_show_executors_over_time_and_reach_the_metrics() -> None:
    store = StreamingStatusStore(batch_duration_ms=1000)
    text = metrics.render(metrics.metrics_registry(store, None)).decode()
    empty = {family.name: family.samples for family in text_string_to_metric_families(text)}
    assert empty["reliable_kafka_allocation_executors"] == []  # off: listed, no samples
    assert "allocation-summary" not in pages.streaming_page(store.snapshot(), None, NO_RECEIVERS)
    for decision in (
        ScalingDecision(4000, "up", 1.5, "processing time", 3, 2, 4, reason="requested 2 more"),
        ScalingDecision(8000, "hold", None, "none", 0, 4, 4, reason="no batch completed or waiting"),
        ScalingDecision(12000, "down", 0.1, "processing time", 4, 4, 3, "7", "removed one <executor>"),
    ):
        store.onScalingDecision(StreamingListenerScalingDecision(decision))
    snapshot = store.snapshot()
    assert [d.target for d in snapshot.scaling_decisions] == [4, 4, 3]
    assert snapshot.scaling_actions == {"up": 1, "hold": 1, "down": 1}

    page = pages.streaming_page(snapshot, None, NO_RECEIVERS)
    assert (
        "<span id='allocation-executors'>4</span> executor(s), target <span id='allocation-target'>3" in page
    )
    for chart in ("timeline-executors", "timeline-target-executors"):
        section = page.split(f'id="{chart}"', 1)[1].split("</svg>", 1)[0]
        assert section.count('class="point"') == 3, chart
    rows = page.split("id='scaling-decisions'", 1)[1].split("</table>", 1)[0]
    assert rows.index("data-time='12000'") < rows.index("data-time='4000'")  # newest first
    assert "removed one &lt;executor&gt;" in rows and "<td class='num' data-field=ratio>1.50</td>" in rows

    text = metrics.render(metrics.metrics_registry(store, None)).decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        if family.name.startswith("reliable_kafka_allocation_")
        for sample in family.samples
    }
    assert samples == {
        ("reliable_kafka_allocation_executors", (("kind", "live"),)): 4,
        ("reliable_kafka_allocation_executors", (("kind", "target"),)): 3,
        ("reliable_kafka_allocation_load_ratio", (("basis", "processing time"),)): 0.1,
        ("reliable_kafka_allocation_decisions_total", (("action", "down"),)): 1,
        ("reliable_kafka_allocation_decisions_total", (("action", "hold"),)): 1,
        ("reliable_kafka_allocation_decisions_total", (("action", "up"),)): 1,
    }

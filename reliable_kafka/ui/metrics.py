"""Prometheus metrics at ``/metrics``: a collector that reads the status store, the lag monitor and
the data-path instruments when scraped, so that nothing is computed between scrapes.

Each status page has its own registry (not prometheus_client's global one): a process may run
several contexts one after another, and a collector must not outlive its context there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from reliable_kafka.ui.lag import LagMonitor
from reliable_kafka.ui.status_store import StatusSnapshot, StreamingStatusStore
from reliable_kafka.util import instruments
from reliable_kafka.util.clock import wall_clock_ms
from reliable_kafka.util.instruments import HistogramSnapshot

PREFIX = "reliable_kafka"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Received and not yet processed (Spark's StreamingSource names ``unprocessedBatches``); read back
# by ``reliable-kafka lag --status-url`` (ui/unprocessed.py).
UNPROCESSED_BATCHES = f"{PREFIX}_unprocessed_batches"
UNPROCESSED_RECORDS = f"{PREFIX}_unprocessed_records"
UNPROCESSED_SCHEDULING_DELAY = f"{PREFIX}_unprocessed_scheduling_delay_seconds"

# Every family this module exposes (counters without their ``_total`` suffix, as
# prometheus_client's parser names them); docs/operations.md lists them, tests/test_docs.py checks.
FAMILIES: tuple[str, ...] = (
    f"{PREFIX}_batches_completed",
    f"{PREFIX}_batches_active",
    UNPROCESSED_BATCHES,
    UNPROCESSED_RECORDS,
    UNPROCESSED_SCHEDULING_DELAY,
    f"{PREFIX}_records_received",
    f"{PREFIX}_batch_scheduling_delay_seconds",
    f"{PREFIX}_batch_processing_seconds",
    f"{PREFIX}_batch_total_delay_seconds",
    f"{PREFIX}_receiver_active",
    f"{PREFIX}_partition_committed_offset",
    f"{PREFIX}_partition_log_end_offset",
    f"{PREFIX}_partition_lag_records",
    f"{PREFIX}_wal_write_seconds",
    f"{PREFIX}_offset_commit_seconds",
    f"{PREFIX}_offset_commit_failures",
    f"{PREFIX}_block_store_bytes",
    f"{PREFIX}_blocks_served",
    f"{PREFIX}_allocation_executors",
    f"{PREFIX}_allocation_load_ratio",
    f"{PREFIX}_allocation_decisions",
)


def _histogram(name: str, documentation: str, snapshot: HistogramSnapshot) -> HistogramMetricFamily:
    buckets = [
        ("+Inf" if bound == float("inf") else repr(float(bound)), count)
        for bound, count in zip(snapshot.upper_bounds, snapshot.cumulative_counts, strict=True)
    ]
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=snapshot.sum)


class StreamingCollector(Collector):
    """``now_ms``: the wall clock the delay of a waiting batch is measured to (batch times are)."""

    def __init__(
        self,
        store: StreamingStatusStore,
        lag: LagMonitor | None,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._store = store
        self._lag = lag
        self._now_ms = now_ms

    def collect(self) -> Iterator[Any]:
        snapshot = self._store.snapshot(self._now_ms())
        yield CounterMetricFamily(
            f"{PREFIX}_batches_completed", "Batches completed since start", value=snapshot.batches_completed
        )
        active = GaugeMetricFamily(
            f"{PREFIX}_batches_active", "Batches submitted and not completed", labels=["state"]
        )
        active.add_metric(["waiting"], len(snapshot.waiting))
        active.add_metric(["running"], len(snapshot.running))
        yield active
        yield GaugeMetricFamily(
            UNPROCESSED_BATCHES,
            "Batches received and not yet processed: waiting plus running (Spark's unprocessedBatches)",
            value=snapshot.unprocessed_batches,
        )
        yield GaugeMetricFamily(
            UNPROCESSED_RECORDS,
            "Records received and not yet processed: in waiting and running batches (their offsets "
            "may be committed already: committed means stored)",
            value=snapshot.unprocessed_records,
        )
        yield GaugeMetricFamily(
            UNPROCESSED_SCHEDULING_DELAY,
            "How long the oldest waiting batch has waited so far (its scheduling delay now); 0 when "
            "no batch waits",
            value=snapshot.unprocessed_scheduling_delay_ms / 1000,
        )
        records = CounterMetricFamily(
            f"{PREFIX}_records_received",
            "Records in completed batches since start, per input stream",
            labels=["stream_id"],
        )
        for stream_id, count in sorted(snapshot.records_per_stream.items()):
            records.add_metric([str(stream_id)], count)
        yield records
        yield _histogram(
            f"{PREFIX}_batch_scheduling_delay_seconds",
            "Time a batch waited for its first job to start",
            snapshot.scheduling_delay,
        )
        yield _histogram(
            f"{PREFIX}_batch_processing_seconds",
            "Time from a batch's first job start to its last job end",
            snapshot.processing_delay,
        )
        yield _histogram(
            f"{PREFIX}_batch_total_delay_seconds",
            "Scheduling delay plus processing time of a batch",
            snapshot.total_delay,
        )
        receivers = GaugeMetricFamily(
            f"{PREFIX}_receiver_active",
            "1 while the receiver is active, 0 once it stopped or failed",
            # runs_as: "task" or "driver process"; a local master's tasks have executor_id "driver".
            labels=["stream_id", "name", "runs_as", "executor_id", "host"],
        )
        for status in snapshot.receivers:
            r = status.info
            values = [str(r.stream_id), r.name, r.runs_as, r.executor_id, r.location]
            receivers.add_metric(values, 1 if r.active else 0)
        yield receivers
        yield from _allocation_families(snapshot)
        yield from self._partition_families()
        # The driver's own data path plus what receivers on executors reported.
        totals = instruments.combined_snapshot()
        yield _histogram(
            f"{PREFIX}_wal_write_seconds",
            "Receiver write-ahead log writes of one block (driver and receiver processes)",
            totals.wal_write,
        )
        yield _histogram(
            f"{PREFIX}_offset_commit_seconds",
            "Offset commits to ZooKeeper, retries included (driver and receiver processes)",
            totals.offset_commit,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_offset_commit_failures",
            "Offset commits that raised or had a partition refused (driver and receiver processes)",
            value=totals.commit_failures,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_block_store_bytes",
            "Bytes of received blocks held by block stores (driver and receiver processes)",
            value=totals.block_store_bytes,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_blocks_served",
            "Blocks the receivers' block servers sent to batch tasks on other hosts",
            value=totals.blocks_served,
        )

    def _partition_families(self) -> Iterator[GaugeMetricFamily]:
        labels = ["group", "topic", "partition"]
        committed = GaugeMetricFamily(
            f"{PREFIX}_partition_committed_offset",
            "Next offset the group reads (where it commits)",
            labels=labels,
        )
        log_end = GaugeMetricFamily(
            f"{PREFIX}_partition_log_end_offset", "High watermark of the partition (broker)", labels=labels
        )
        lag = GaugeMetricFamily(
            f"{PREFIX}_partition_lag_records", "Log end offset minus committed offset", labels=labels
        )
        report = self._lag.report() if self._lag is not None else None
        seen: set[tuple[str, str, int]] = set()
        for row in report.rows if report is not None else ():
            # One series per partition of a group: Prometheus refuses a scrape with a duplicate.
            if (row.group, row.topic, row.partition) in seen:
                continue
            seen.add((row.group, row.topic, row.partition))
            values = [row.group, row.topic, str(row.partition)]
            if row.committed is not None:
                committed.add_metric(values, row.committed)
            if row.log_end is not None:
                log_end.add_metric(values, row.log_end)
            if row.lag is not None:
                lag.add_metric(values, row.lag)
        yield committed
        yield log_end
        yield lag


def _allocation_families(snapshot: StatusSnapshot) -> Iterator[Any]:
    """Streaming dynamic allocation, as of its last decision (no samples while it has none)."""
    last = snapshot.scaling_decisions[-1] if snapshot.scaling_decisions else None
    executors = GaugeMetricFamily(
        f"{PREFIX}_allocation_executors",
        "Streaming dynamic allocation's executors at its last decision: live (those being removed "
        "left out) and target (wanted after the decision)",
        labels=["kind"],
    )
    ratio = GaugeMetricFamily(
        f"{PREFIX}_allocation_load_ratio",
        "The load of the last scaling interval as a ratio to the batch interval (the average "
        "processing time of its batches, running ones at their time so far when that is higher)",
        labels=["basis"],
    )
    if last is not None:
        executors.add_metric(["live"], last.executors)
        executors.add_metric(["target"], last.target)
        if last.ratio is not None:
            ratio.add_metric([last.basis], last.ratio)
    yield executors
    yield ratio
    decisions = CounterMetricFamily(
        f"{PREFIX}_allocation_decisions",
        "Decisions of streaming dynamic allocation since start, by action (up, down, hold)",
        labels=["action"],
    )
    for action, count in sorted(snapshot.scaling_actions.items()):
        decisions.add_metric([action], count)
    yield decisions


def metrics_registry(
    store: StreamingStatusStore, lag: LagMonitor | None, now_ms: Callable[[], int] = wall_clock_ms
) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StreamingCollector(store, lag, now_ms))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)

"""HTML of the status page and the batch page, point by point after Spark's Streaming tab.

Everything shown is escaped; nothing secret reaches these functions (Kafka client settings stay
in the lag monitor). Tables and charts carry ids that tests and scrapers can rely on:
``summary``, ``timeline-<metric>``/``histogram-<metric>`` for input-rate, scheduling-delay,
processing-time and total-delay, ``receivers``, ``partitions``, ``active-batches``,
``completed-batches``, and with streaming dynamic allocation ``allocation-summary``,
``timeline-executors``, ``timeline-target-executors`` and ``scaling-decisions``; on a batch page
``offset-ranges``, ``blocks`` and ``output-operations``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

from reliable_kafka.kafka.client.offset_range import OffsetRange, merge_offset_ranges, ranges_in_metadata
from reliable_kafka.scheduler.batch_input_info import BLOCKS_KEY
from reliable_kafka.scheduler.listener_events import BatchInfo
from reliable_kafka.ui import svg
from reliable_kafka.ui.lag import LagReport
from reliable_kafka.ui.partition_receivers import PartitionReceivers
from reliable_kafka.ui.status_store import StatusSnapshot

_STYLE = """
body { font-family: "Helvetica Neue", Arial, sans-serif; font-size: 14px; margin: 0; color: #222; }
header { background: #f4f4f4; border-bottom: 1px solid #ddd; padding: 8px 20px; }
header a { font-weight: bold; color: #222; text-decoration: none; }
main { padding: 10px 20px 40px; }
h3 { margin: 22px 0 8px; }
table { border-collapse: collapse; margin-bottom: 8px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f7f7f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.charts td { border: none; }
.stat { font-size: 12px; color: #555; }
.failed { color: #b00; }
pre { white-space: pre-wrap; max-width: 900px; margin: 0; font-size: 12px; }
"""

# (id suffix, title, unit, value of a completed batch)
_METRICS: tuple[tuple[str, str, str, Callable[[BatchInfo, int], float | None]], ...] = (
    ("input-rate", "Input Rate", "records/sec", lambda b, batch_ms: b.num_records * 1000 / batch_ms),
    ("scheduling-delay", "Scheduling Delay", "ms", lambda b, _: b.scheduling_delay_ms),
    ("processing-time", "Processing Time", "ms", lambda b, _: b.processing_delay_ms),
    ("total-delay", "Total Delay", "ms", lambda b, _: b.total_delay_ms),
)


def date_time(time_ms: int | None) -> str:
    if time_ms is None or time_ms < 0:
        return "-"
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(time_ms / 1000))


def duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<header><a href='/'>reliable-kafka Streaming</a> &middot; <a href='/metrics'>metrics</a></header>"
        f"<main>{body}</main></body></html>"
    )


def _table(table_id: str, headers: Sequence[str], rows: Iterable[str], empty: str) -> str:
    rendered = "".join(rows)
    if not rendered:
        rendered = f"<tr><td colspan='{len(headers)}'>{escape(empty)}</td></tr>"
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{rendered}</tbody></table>"


def _num(value: int | float | None, attr: str = "") -> str:
    text = "-" if value is None else svg.format_number(value)
    return f"<td class='num'{attr}>{text}</td>"


# ---------------------------------------------------------------- streaming page


def streaming_page(snapshot: StatusSnapshot, lag: LagReport | None, receivers: PartitionReceivers) -> str:
    body = [
        "<h3>Streaming Statistics</h3>",
        "<dl id='summary'>",
        f"<dt>Running batches of</dt><dd id='summary-batch-duration'>"
        f"{duration(snapshot.batch_duration_ms)}</dd>",
        f"<dt>Running since</dt><dd id='summary-started'>{date_time(snapshot.started_ms)}</dd>",
        f"<dt>Batches completed</dt><dd id='summary-batches-completed'>{snapshot.batches_completed}</dd>",
        f"<dt>Records received</dt><dd id='summary-records'>{snapshot.records_received}</dd>",
        *_unprocessed(snapshot),
        "</dl>",
        _streaming_error(snapshot),
        _charts(snapshot),
        _allocation(snapshot),
        "<h3>Receivers</h3>",
        _receivers(snapshot),
        "<h3>Kafka partitions</h3>",
        _partitions(lag, receivers),
        f"<h3>Active Batches ({len(snapshot.waiting) + len(snapshot.running)})</h3>",
        _active_batches(snapshot),
        f"<h3>Completed Batches (last {len(snapshot.completed)} out of {snapshot.batches_completed})</h3>",
        _completed_batches(snapshot.completed),
    ]
    return _page("Streaming Statistics", "".join(body))


def _unprocessed(snapshot: StatusSnapshot) -> list[str]:
    """Received and not yet processed: what Kafka's lag cannot show, since a committed offset
    means stored (block store and WAL), not processed."""
    delay_ms = snapshot.unprocessed_scheduling_delay_ms
    return [
        f"<dt>Unprocessed batches</dt><dd><span id='summary-unprocessed-batches'>"
        f"{snapshot.unprocessed_batches}</span> ({len(snapshot.waiting)} waiting, "
        f"{len(snapshot.running)} running)</dd>",
        "<dt>Unprocessed records</dt>"
        f"<dd id='summary-unprocessed-records'>{snapshot.unprocessed_records}</dd>",
        "<dt>Oldest waiting batch has waited</dt>"
        f"<dd id='summary-unprocessed-delay' data-ms='{delay_ms}'>"
        f"{duration(delay_ms) if snapshot.waiting else 'no batch waits'}</dd>",
    ]


def _streaming_error(snapshot: StatusSnapshot) -> str:
    if snapshot.last_streaming_error is None:
        return ""
    time_ms, message = snapshot.last_streaming_error
    return f"<p id='streaming-error' class='failed'>{date_time(time_ms)}: {escape(message)}</p>"


def _charts(snapshot: StatusSnapshot) -> str:
    completed, batch_ms = snapshot.completed, snapshot.batch_duration_ms
    rows = []
    for suffix, title, unit, value_of in _METRICS:
        points = [(b.batch_time_ms, v) for b in completed if (v := value_of(b, batch_ms)) is not None]
        values = [v for _, v in points]
        average = f"avg {svg.format_number(sum(values) / len(values))} {unit}" if values else "no data"
        rows.append(
            f"<tr id='chart-row-{suffix}'><td><b>{escape(title)}</b><br>"
            f"<span class='stat'>{escape(average)}</span></td>"
            f"<td>{svg.timeline(f'timeline-{suffix}', points, unit)}</td>"
            f"<td>{svg.histogram(f'histogram-{suffix}', values, unit)}</td></tr>"
        )
    active = len(snapshot.waiting) + len(snapshot.running)
    return (
        f"<h3>Timelines (last {len(completed)} batches, {active} active, "
        f"{snapshot.batches_completed} completed)</h3>"
        f"<table class='charts'><tbody>{''.join(rows)}</tbody></table>"
    )


# The decisions the page lists; the timelines show every retained one.
_LISTED_DECISIONS = 20


def _allocation(snapshot: StatusSnapshot) -> str:
    """Streaming dynamic allocation: executors over time (live and target, one point per scaling
    interval) and its last decisions, newest first; nothing when it made none (off)."""
    decisions = snapshot.scaling_decisions
    if not decisions:
        return ""
    live = [(d.time_ms, float(d.executors)) for d in decisions]
    target = [(d.time_ms, float(d.target)) for d in decisions]
    last = decisions[-1]
    rows = [
        f"<tr data-time='{d.time_ms}' data-action='{escape(d.action)}'><td>{date_time(d.time_ms)}</td>"
        f"<td class='action'>{escape(d.action)}</td>{_num(d.ratio, ' data-field=ratio')}"
        f"<td>{escape(d.basis)}</td>{_num(d.executors)}{_num(d.target)}"
        f"<td>{escape(d.executor_id or '-')}</td><td>{escape(d.reason)}</td></tr>"
        for d in reversed(decisions[-_LISTED_DECISIONS:])
    ]
    counts = ", ".join(f"{count} {action}" for action, count in sorted(snapshot.scaling_actions.items()))
    return (
        "<h3>Executors (streaming dynamic allocation)</h3>"
        f"<p id='allocation-summary'><span id='allocation-executors'>{last.executors}</span> executor(s), "
        f"target <span id='allocation-target'>{last.target}</span>; decisions since start: "
        f"{escape(counts)}</p>"
        "<table class='charts'><tbody><tr>"
        f"<td><b>Executors</b><br>{svg.timeline('timeline-executors', live, 'executors')}</td>"
        f"<td><b>Target</b><br>{svg.timeline('timeline-target-executors', target, 'executors')}</td>"
        "</tr></tbody></table>"
        + _table(
            "scaling-decisions",
            ("Time", "Action", "Load Ratio", "Measured By", "Executors", "Target", "Removed", "Why"),
            rows,
            "no decisions",
        )
    )


def _receivers(snapshot: StatusSnapshot) -> str:
    rows = []
    for status in snapshot.receivers:
        r = status.info
        state = "ACTIVE" if r.active else "INACTIVE"
        error = r.last_error_message + (f" - {r.last_error}" if r.last_error else "")
        rows.append(
            f"<tr data-stream-id='{r.stream_id}'><td class='receiver-name'>{escape(r.name)}</td>"
            f"<td class='receiver-status'>{state}</td>"
            # A local master's tasks run on the executor "driver" too: say which this is.
            f"<td class='receiver-runs-as'>{escape(r.runs_as) or '-'}</td>"
            f"<td class='receiver-executor'>{escape(r.executor_id) or '-'}</td>"
            f"<td class='receiver-host'>{escape(r.location) or '-'}</td>"
            f"{_num(status.records_per_second)}"
            f"<td>{date_time(r.last_error_time_ms)}</td>"
            f"<td class='receiver-error'><pre>{escape(error) or '-'}</pre></td></tr>"
        )
    return _table(
        "receivers",
        (
            "Receiver",
            "Status",
            "Runs As",
            "Executor ID",
            "Location",
            "Avg Events/sec",
            "Last Error Time",
            "Last Error",
        ),
        rows,
        "no receivers",
    )


def _partitions(lag: LagReport | None, receivers: PartitionReceivers) -> str:
    if lag is None:
        return "<p>No Kafka input streams.</p>"
    rows = []
    for p in lag.rows:
        rows.append(
            f"<tr data-topic='{escape(p.topic)}' data-partition='{p.partition}'>"
            f"<td>{escape(p.group)}</td><td class='topic'>{escape(p.topic)}</td>"
            f"<td class='num partition'>{p.partition}</td>"
            f"<td class='receiver'>{escape(receivers.of(p.group, p.topic, p.partition))}</td>"
            f"<td class='owner'>{escape(p.owner or 'none')}</td>"
            f"{_num(p.committed, ' data-field=committed')}"
            f"{_num(p.log_end, ' data-field=log-end')}"
            f"{_num(p.lag, ' data-field=lag')}"
            f"<td>{date_time(p.last_commit_ms)}</td></tr>"
        )
    errors = "".join(f"<p class='failed'>{escape(error)}</p>" for error in lag.errors)
    return (
        _table(
            "partitions",
            (
                "Group",
                "Topic",
                "Partition",
                "Receiver",
                "Owner",
                "Committed Offset",
                "Log End",
                "Lag",
                "Last Commit",
            ),
            rows,
            "no partitions yet",
        )
        + f"<p class='stat'>read at {date_time(lag.read_at_ms)}; a committed offset means stored "
        "(block store and write-ahead log), not processed: see the unprocessed batches above</p>"
        f"{errors}"
    )


def _ops_summary(batch: BatchInfo) -> str:
    ops = batch.output_operation_infos.values()
    done = sum(1 for op in ops if op.end_time_ms is not None and op.failure_reason is None)
    failed = sum(1 for op in ops if op.failure_reason is not None)
    text = f"{done}/{len(ops)}"
    return text + (f" <span class='failed'>({failed} failed)</span>" if failed else "")


def _batch_link(batch: BatchInfo) -> str:
    return f"<a href='/batch?id={batch.batch_time_ms}'>{date_time(batch.batch_time_ms)}</a>"


def _active_batches(snapshot: StatusSnapshot) -> str:
    rows = [
        f"<tr data-batch-time='{b.batch_time_ms}'><td>{_batch_link(b)}</td>{_num(b.num_records)}"
        f"<td>{duration(b.scheduling_delay_ms)}</td><td>{duration(b.processing_delay_ms)}</td>"
        f"<td>{_ops_summary(b)}</td><td>{status}</td></tr>"
        for status, batches in (("processing", snapshot.running), ("queued", snapshot.waiting))
        for b in batches
    ]
    headers = ("Batch Time", "Records", "Scheduling Delay", "Processing Time", "Output Ops", "Status")
    return _table("active-batches", headers, rows, "no active batches")


def _completed_batches(completed: Sequence[BatchInfo]) -> str:
    rows = [
        f"<tr data-batch-time='{b.batch_time_ms}'><td>{_batch_link(b)}</td>{_num(b.num_records)}"
        f"<td>{duration(b.scheduling_delay_ms)}</td><td>{duration(b.processing_delay_ms)}</td>"
        f"<td>{duration(b.total_delay_ms)}</td><td>{_ops_summary(b)}</td></tr>"
        for b in reversed(completed)
    ]
    headers = ("Batch Time", "Records", "Scheduling Delay", "Processing Time", "Total Delay", "Output Ops")
    return _table("completed-batches", headers, rows, "no completed batches")


# ---------------------------------------------------------------- batch page


def _blocks(batch: BatchInfo) -> list[tuple[int, dict[str, Any]]]:
    return [
        (stream_id, block)
        for stream_id, info in sorted(batch.stream_id_to_input_info.items())
        for block in info.metadata.get(BLOCKS_KEY, ())
    ]


def batch_offset_ranges(batch: BatchInfo) -> list[OffsetRange]:
    """The batch's Kafka offsets, one range per partition (as ``rdd.offsetRanges()`` gives them)."""
    return merge_offset_ranges(ranges_in_metadata(block.get("metadata")) for _, block in _blocks(batch))


def batch_page(batch: BatchInfo, batch_duration_ms: int) -> str:
    blocks = _blocks(batch)
    status = "completed" if batch.processing_end_time_ms is not None else "active"
    body = [
        f"<h3>Details of batch at {date_time(batch.batch_time_ms)}</h3>",
        "<dl id='batch-summary'>",
        f"<dt>Batch Duration</dt><dd>{duration(batch_duration_ms)}</dd>",
        f"<dt>Status</dt><dd id='batch-status'>{status}</dd>",
        f"<dt>Input Size</dt><dd id='batch-records'>{batch.num_records} records</dd>",
        f"<dt>Scheduling Delay</dt><dd>{duration(batch.scheduling_delay_ms)}</dd>",
        f"<dt>Processing Time</dt><dd>{duration(batch.processing_delay_ms)}</dd>",
        f"<dt>Total Delay</dt><dd>{duration(batch.total_delay_ms)}</dd>",
        "</dl><h3>Offset ranges</h3>",
        _table(
            "offset-ranges",
            ("Topic", "Partition", "From Offset", "Until Offset", "Records"),
            (
                f"<tr data-topic='{escape(r.topic)}' data-partition='{r.partition}'>"
                f"<td>{escape(r.topic)}</td><td class='num'>{r.partition}</td>"
                f"{_num(r.fromOffset, ' data-field=from')}{_num(r.untilOffset, ' data-field=until')}"
                f"{_num(r.count())}</tr>"
                for r in batch_offset_ranges(batch)
            ),
            "no Kafka offsets in this batch",
        ),
        "<h3>Blocks</h3>",
        _table(
            "blocks",
            ("Input Stream", "Block", "Records", "In WAL", "Offset Ranges"),
            (
                f"<tr><td class='num'>{stream_id}</td><td>{escape(str(block.get('id')))}</td>"
                f"{_num(block.get('num_records'))}<td>{'yes' if block.get('in_wal') else 'no'}</td>"
                f"<td>{_ranges_text(block)}</td></tr>"
                for stream_id, block in blocks
            ),
            "no blocks",
        ),
        "<h3>Output Operations</h3>",
        _output_operations(batch),
    ]
    return _page(f"Batch {date_time(batch.batch_time_ms)}", "".join(body))


def _ranges_text(block: Mapping[str, Any]) -> str:
    return "<br>".join(escape(str(r)) for r in ranges_in_metadata(block.get("metadata")))


def _output_operations(batch: BatchInfo) -> str:
    rows = []
    for op_id, op in sorted(batch.output_operation_infos.items()):
        if op.failure_reason is not None:
            status = "<span class='failed'>failed</span>"
        elif op.end_time_ms is not None:
            status = "succeeded"
        elif op.start_time_ms is not None:
            status = "running"
        else:
            status = "queued"
        error = f"<pre>{escape(op.failure_reason)}</pre>" if op.failure_reason else "-"
        rows.append(
            f"<tr data-op-id='{op_id}'><td class='num'>{op_id}</td><td>{escape(op.name)}</td>"
            f"<td>{escape(op.description)}</td><td>{duration(op.duration_ms)}</td>"
            f"<td>{status}</td><td>{error}</td></tr>"
        )
    headers = ("Output Op Id", "Name", "Description", "Duration", "Status", "Error")
    return _table("output-operations", headers, rows, "no output operations")


def not_found_page(message: str) -> str:
    return _page("Not found", f"<h3>Not found</h3><p>{escape(message)}</p>")

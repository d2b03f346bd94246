"""The status page's state: a listener that keeps what Spark's ``StreamingJobProgressListener`` keeps.

Retained: the last ``retained_batches`` completed batches, every waiting or running batch, the
receivers as last reported, and running totals. Each event costs O(1) (a deque append and at
most one eviction, a few dict updates, a bisect per delay histogram) so that the listener bus,
which also feeds rate controllers, never waits on the page. Readers take a consistent
:class:`StatusSnapshot` under the lock and render it outside it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from dataclasses import dataclass

from reliable_kafka.scheduler.listener import StreamingListener
from reliable_kafka.scheduler.listener_events import (
    BatchInfo,
    OutputOperationInfo,
    ReceiverInfo,
    ScalingDecision,
    StreamingListenerBatchCompleted,
    StreamingListenerBatchStarted,
    StreamingListenerBatchSubmitted,
    StreamingListenerOutputOperationCompleted,
    StreamingListenerOutputOperationStarted,
    StreamingListenerReceiverError,
    StreamingListenerReceiverStarted,
    StreamingListenerReceiverStopped,
    StreamingListenerScalingDecision,
    StreamingListenerStreamingError,
    StreamingListenerStreamingStarted,
)
from reliable_kafka.util.clock import wall_clock_ms
from reliable_kafka.util.instruments import Histogram, HistogramSnapshot

# Seconds: batch delays run from milliseconds (an idle stream) to minutes (a stream falling behind).
DELAY_BUCKETS_S: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Decisions of streaming dynamic allocation kept for the page: one per scaling interval (a minute
# by default), so a day's worth.
RETAINED_SCALING_DECISIONS = 1440


@dataclass(frozen=True, slots=True)
class ReceiverStatus:
    info: ReceiverInfo
    # Average over the retained batches, as Spark's receivers table shows it.
    records_per_second: float | None


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    batch_duration_ms: int
    retained_batches: int
    started_ms: int | None
    batches_completed: int  # since start, not only the retained ones
    records_received: int  # in completed batches, since start
    completed: tuple[BatchInfo, ...]  # oldest first
    waiting: tuple[BatchInfo, ...]
    running: tuple[BatchInfo, ...]
    receivers: tuple[ReceiverStatus, ...]
    records_per_stream: dict[int, int]  # since start
    scheduling_delay: HistogramSnapshot
    processing_delay: HistogramSnapshot
    total_delay: HistogramSnapshot
    # The last StreamingListenerStreamingError: (time, message), e.g. batches starved of slots.
    last_streaming_error: tuple[int, str] | None = None
    # Wall-clock time of the snapshot: what the delay of a batch still waiting is measured to.
    taken_at_ms: int = 0
    # Streaming dynamic allocation: the retained decisions (oldest first) and, since start, how
    # many of each action ("up", "down", "hold").
    scaling_decisions: tuple[ScalingDecision, ...] = ()
    scaling_actions: dict[str, int] = dataclasses.field(default_factory=dict)

    # What was received and not yet processed. Committed offsets mark what is stored (block
    # store and WAL), so Kafka's lag reads 0 while these grow: an app falling behind shows here.

    @property
    def unprocessed_batches(self) -> int:
        """Spark's ``unprocessedBatches``: batches waiting plus batches running."""
        return len(self.waiting) + len(self.running)

    @property
    def unprocessed_records(self) -> int:
        """Records in the unprocessed batches (those of a running batch are not processed yet)."""
        return sum(b.num_records for batches in (self.waiting, self.running) for b in batches)

    @property
    def unprocessed_scheduling_delay_ms(self) -> int:
        """The scheduling delay of the oldest waiting batch so far (it grows until the batch
        starts, when Spark's ``schedulingDelay`` is fixed); 0 when no batch waits."""
        if not self.waiting:
            return 0
        oldest = min(b.submission_time_ms for b in self.waiting)
        return max(0, self.taken_at_ms - oldest)


class StreamingStatusStore(StreamingListener):
    def __init__(self, batch_duration_ms: int, retained_batches: int = 1000) -> None:
        if retained_batches < 1:
            raise ValueError(f"retained_batches must be >= 1, got {retained_batches}")
        self.batch_duration_ms = batch_duration_ms
        self.retained_batches = retained_batches
        self._lock = threading.Lock()
        self._started_ms: int | None = None
        self._completed: deque[BatchInfo] = deque()
        self._completed_by_time: dict[int, BatchInfo] = {}
        self._active: dict[int, BatchInfo] = {}
        self._receivers: dict[int, ReceiverInfo] = {}
        self._last_streaming_error: tuple[int, str] | None = None
        self._scaling: deque[ScalingDecision] = deque(maxlen=RETAINED_SCALING_DECISIONS)
        self._scaling_actions: dict[str, int] = {}
        self._batches_completed = 0
        self._records_received = 0
        self._records_per_stream: dict[int, int] = {}
        # Records per stream over the retained batches, kept as batches come and go.
        self._retained_records: dict[int, int] = {}
        self._scheduling = Histogram(DELAY_BUCKETS_S)
        self._processing = Histogram(DELAY_BUCKETS_S)
        self._total = Histogram(DELAY_BUCKETS_S)

    # ------------------------------------------------------------ events

    def on_streaming_started(self, event: StreamingListenerStreamingStarted) -> None:
        with self._lock:
            self._started_ms = event.time_ms

    def on_receiver_started(self, event: StreamingListenerReceiverStarted) -> None:
        self._set_receiver(event.receiver_info)

    def on_receiver_error(self, event: StreamingListenerReceiverError) -> None:
        self._set_receiver(event.receiver_info)

    def on_receiver_stopped(self, event: StreamingListenerReceiverStopped) -> None:
        self._set_receiver(event.receiver_info)

    def on_streaming_error(self, event: StreamingListenerStreamingError) -> None:
        with self._lock:
            self._last_streaming_error = (event.time_ms, event.message)

    def on_scaling_decision(self, event: StreamingListenerScalingDecision) -> None:
        decision = event.decision
        with self._lock:
            self._scaling.append(decision)
            self._scaling_actions[decision.action] = self._scaling_actions.get(decision.action, 0) + 1

    def _set_receiver(self, info: ReceiverInfo) -> None:
        with self._lock:
            self._receivers[info.stream_id] = info

    def on_batch_submitted(self, event: StreamingListenerBatchSubmitted) -> None:
        with self._lock:
            self._active[event.batch_info.batch_time_ms] = event.batch_info

    def on_batch_started(self, event: StreamingListenerBatchStarted) -> None:
        with self._lock:
            self._active[event.batch_info.batch_time_ms] = event.batch_info

    def on_output_operation_started(self, event: StreamingListenerOutputOperationStarted) -> None:
        self._update_output_operation(event.output_operation_info)

    def on_output_operation_completed(self, event: StreamingListenerOutputOperationCompleted) -> None:
        self._update_output_operation(event.output_operation_info)

    def _update_output_operation(self, info: OutputOperationInfo) -> None:
        with self._lock:
            batch = self._active.get(info.batch_time_ms)
            if batch is None:
                return
            operations = {**batch.output_operation_infos, info.id: info}
            self._active[info.batch_time_ms] = dataclasses.replace(batch, output_operation_infos=operations)

    def on_batch_completed(self, event: StreamingListenerBatchCompleted) -> None:
        batch = event.batch_info
        with self._lock:
            self._active.pop(batch.batch_time_ms, None)
            if batch.batch_time_ms in self._completed_by_time:
                return  # delivered twice: count it once
            self._completed.append(batch)
            self._completed_by_time[batch.batch_time_ms] = batch
            self._add_records(batch, 1)
            if len(self._completed) > self.retained_batches:
                evicted = self._completed.popleft()
                del self._completed_by_time[evicted.batch_time_ms]
                self._add_records(evicted, -1)
            self._batches_completed += 1
            self._records_received += batch.num_records
            for stream_id, info in batch.stream_id_to_input_info.items():
                self._records_per_stream[stream_id] = (
                    self._records_per_stream.get(stream_id, 0) + info.num_records
                )
        for histogram, delay_ms in (
            (self._scheduling, batch.scheduling_delay_ms),
            (self._processing, batch.processing_delay_ms),
            (self._total, batch.total_delay_ms),
        ):
            if delay_ms is not None:
                histogram.observe(delay_ms / 1000)

    def _add_records(self, batch: BatchInfo, sign: int) -> None:
        for stream_id, info in batch.stream_id_to_input_info.items():
            retained = self._retained_records.get(stream_id, 0)
            self._retained_records[stream_id] = retained + sign * info.num_records

    # ------------------------------------------------------------ reads

    def batch(self, batch_time_ms: int) -> BatchInfo | None:
        """A retained completed batch, or a waiting or running one."""
        with self._lock:
            return self._completed_by_time.get(batch_time_ms) or self._active.get(batch_time_ms)

    def snapshot(self, now_ms: int | None = None) -> StatusSnapshot:
        """The state now; ``now_ms`` (default: the wall clock, as batch times are) dates it."""
        with self._lock:
            completed = tuple(self._completed)
            active = sorted(self._active.values(), key=lambda b: b.batch_time_ms)
            receivers = sorted(self._receivers.values(), key=lambda r: r.stream_id)
            retained_records = dict(self._retained_records)
            last_streaming_error = self._last_streaming_error
            scaling = (tuple(self._scaling), dict(self._scaling_actions))
            snapshot_totals = (
                self._started_ms,
                self._batches_completed,
                self._records_received,
                dict(self._records_per_stream),
            )
        started_ms, batches_completed, records_received, records_per_stream = snapshot_totals
        window_s = len(completed) * self.batch_duration_ms / 1000
        return StatusSnapshot(
            batch_duration_ms=self.batch_duration_ms,
            retained_batches=self.retained_batches,
            started_ms=started_ms,
            batches_completed=batches_completed,
            records_received=records_received,
            completed=completed,
            waiting=tuple(b for b in active if b.processing_start_time_ms is None),
            running=tuple(b for b in active if b.processing_start_time_ms is not None),
            receivers=tuple(
                ReceiverStatus(r, retained_records.get(r.stream_id, 0) / window_s if window_s else None)
                for r in receivers
            ),
            records_per_stream=records_per_stream,
            scheduling_delay=self._scheduling.snapshot(),
            processing_delay=self._processing.snapshot(),
            total_delay=self._total.snapshot(),
            last_streaming_error=last_streaming_error,
            taken_at_ms=wall_clock_ms() if now_ms is None else now_ms,
            scaling_decisions=scaling[0],
            scaling_actions=scaling[1],
        )

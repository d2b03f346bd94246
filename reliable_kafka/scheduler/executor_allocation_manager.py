"""Spark Streaming's ``ExecutorAllocationManager``: executors that follow the batches' load.

Core dynamic allocation removes executors that stay idle, and micro-batches leave none idle for
long; a receiver's executor never is. So streaming scales on its own measure, as Spark's does
(``spark.streaming.dynamicAllocation.*``, checked at start by ``executor_allocation_check``):

1. Hear every batch: keep the processing times of the batches completed since the last decision
   whose output operations all succeeded, and when each batch not yet completed began processing.
2. Every ``scalingInterval``, measure the load as a ratio to the batch interval: the average
   processing time of the batches completed in the interval over the batch interval (Spark's), or,
   when more, the same average with each batch still running counted at its processing time so
   far (ours). Spark sees a surge only once its first slow batch completes, up to an interval
   late, and never when receivers hold every task slot: the batch's job has started, its tasks
   wait for a slot, and no batch completes. A running batch's time so far is what it will take at
   least, so it may scale up but never down: a load measured on running batches alone removes
   nothing.
3. At or above ``scalingUpRatio``: ask for ``round(ratio)`` more executors (at least one), an
   absolute total, within ``[minExecutors, maxExecutors]``.
4. At or below ``scalingDownRatio``: remove one executor, never below ``minExecutors``
   (default ``max(1, receivers)``) and only one that runs no receiver (nor is scheduled to), holds
   no copy of a block not yet processed (unallocated, or of a batch not completed), and whose
   removal leaves a task slot for batches beside the receivers' (ours; Spark picks at random
   among the executors without a receiver).
5. Log the decision (INFO when it adds or removes, DEBUG otherwise) and post it to the listeners
   (the status page and ``/metrics`` show it), then start the next interval afresh.

The cluster is reached through an :class:`ExecutorAllocationClient`; what it knows of receivers
and blocks through :class:`ReceiverExecutors` (the receiver tracker). Calls out to either are
made outside the manager's lock, which guards only what the listener records.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from reliable_kafka.scheduler.executor_allocation_client import ExecutorAllocationClient
from reliable_kafka.scheduler.listener import StreamingListener
from reliable_kafka.scheduler.listener_events import (
    HOLD,
    SCALE_DOWN,
    SCALE_UP,
    ScalingDecision,
    StreamingListenerBatchCompleted,
    StreamingListenerBatchStarted,
    StreamingListenerScalingDecision,
)
from reliable_kafka.settings import DynamicAllocationSettings
from reliable_kafka.util.clock import Clock
from reliable_kafka.util.recurring_timer import RecurringTimer

logger = logging.getLogger(__name__)

PROCESSING_TIME = "processing time"
WITH_RUNNING = "processing time, running batches so far"
NO_LOAD = "none"


class ReceiverExecutors(Protocol):
    """What the receiver tracker knows that decides which executors may go."""

    def receiver_executors(self) -> Mapping[int, Collection[str]]:
        """Stream id -> the executors its receiver runs on or may start on; empty while that is
        not known (scheduled anywhere, or launched and not yet registered)."""
        ...

    def executors_with_unprocessed_blocks(self) -> Collection[str]:
        """Executors holding a copy of a block not yet processed (unallocated, or in a batch not
        completed)."""
        ...


@dataclass(frozen=True, slots=True)
class _Interval:
    """What the listener recorded since the last decision."""

    processing_ms: int
    completed: int
    running_since_ms: tuple[int, ...]  # when each batch running at the interval's end began


class ExecutorAllocationManager(StreamingListener):
    """``settings``: ``spark.streaming.dynamicAllocation.*``; ``receivers``: the number of receiver
    streams (``minExecutors``' default); ``task_cpus``: ``spark.task.cpus``; ``post``: delivers
    the decision to the listeners."""

    def __init__(
        self,
        client: ExecutorAllocationClient,
        tracker: ReceiverExecutors,
        settings: DynamicAllocationSettings,
        *,
        batch_duration_ms: int,
        receivers: int,
        clock: Clock,
        post: Callable[[StreamingListenerScalingDecision], None],
        task_cpus: int = 1,
    ) -> None:
        self._client = client
        self._tracker = tracker
        self._batch_ms = batch_duration_ms
        self._interval_ms = settings.scaling_interval_ms
        self._up = settings.scaling_up_ratio
        self._down = settings.scaling_down_ratio
        self.min_executors = (
            settings.min_executors if settings.min_executors is not None else max(1, receivers)
        )
        self.max_executors = settings.max_executors if settings.max_executors is not None else math.inf
        self._task_cpus = max(1, task_cpus)
        self._clock = clock
        self._post = post
        self._lock = threading.Lock()
        self._processing_ms = 0
        self._completed = 0
        self._running: dict[int, int] = {}  # batch time -> when its processing began
        # Executors this manager removed that the backend still lists: not counted as live.
        self._removing: set[str] = set()
        self._timer = RecurringTimer(
            clock, self._interval_ms, self.manage_allocation, "streaming-executor-allocation"
        )

    def start(self) -> None:
        self._timer.start()
        logger.info(
            "Streaming dynamic allocation: every %d ms, up at a load of %s, down at %s, "
            "between %s and %s executors",
            self._interval_ms,
            self._up,
            self._down,
            self.min_executors,
            self.max_executors,
        )

    def stop(self) -> None:
        self._timer.stop(interrupt_timer=True)

    # ------------------------------------------------------------ listener (bus thread)

    def on_batch_started(self, event: StreamingListenerBatchStarted) -> None:
        batch = event.batch_info
        if batch.processing_start_time_ms is not None:
            with self._lock:
                self._running[batch.batch_time_ms] = batch.processing_start_time_ms

    def on_batch_completed(self, event: StreamingListenerBatchCompleted) -> None:
        batch = event.batch_info
        failed = any(op.failure_reason is not None for op in batch.output_operation_infos.values())
        with self._lock:
            self._running.pop(batch.batch_time_ms, None)
            # As Spark: a failed batch's time says nothing of the load.
            if not failed and batch.processing_delay_ms is not None:
                self._processing_ms += batch.processing_delay_ms
                self._completed += 1

    # ------------------------------------------------------------ decisions (timer thread)

    def manage_allocation(self, time_ms: int) -> ScalingDecision:
        """Decide for the interval ending now, act on it, log and post it (the timer's callback)."""
        with self._lock:
            interval = _Interval(self._processing_ms, self._completed, tuple(self._running.values()))
            self._processing_ms = self._completed = 0
        try:
            decision = self._decide(time_ms, interval)
        except Exception as exc:
            # A SparkContext stopping under the timer, a cluster manager refusing: the next
            # interval decides afresh.
            logger.warning("Streaming dynamic allocation could not decide at %d ms: %r", time_ms, exc)
            decision = ScalingDecision(time_ms, HOLD, None, NO_LOAD, 0, 0, 0, reason=f"failed: {exc!r}")
        self._report(decision)
        return decision

    def _decide(self, time_ms: int, interval: _Interval) -> ScalingDecision:
        ratio, basis, batches = self._load(time_ms, interval)
        live = self._live_executors()
        decision = ScalingDecision(time_ms, HOLD, ratio, basis, batches, len(live), len(live))
        if ratio is None:
            return _with(decision, reason="no batch completed or running")
        if ratio >= self._up:
            return self._scale_up(decision, live, ratio)
        if ratio <= self._down:
            if not interval.completed:
                return _with(decision, reason="no batch completed: running batches alone remove nothing")
            return self._scale_down(decision, live)
        return _with(decision, reason=f"load between {self._down} and {self._up}")

    def _load(self, time_ms: int, interval: _Interval) -> tuple[float | None, str, int]:
        running_ms = [max(0, time_ms - since) for since in interval.running_since_ms]
        counted = interval.completed + len(running_ms)
        if not counted:
            return None, NO_LOAD, 0
        with_running = (interval.processing_ms + sum(running_ms)) / counted / self._batch_ms
        if interval.completed:
            completed = interval.processing_ms / interval.completed / self._batch_ms
            # Batches that have only just begun would pull the average below Spark's: it stands.
            if completed >= with_running:
                return completed, PROCESSING_TIME, interval.completed
        return with_running, WITH_RUNNING, counted

    def _live_executors(self) -> list[str]:
        ids = self._client.executor_ids()
        self._removing &= set(ids)  # gone now
        return [executor for executor in ids if executor not in self._removing]

    def _scale_up(self, decision: ScalingDecision, live: list[str], ratio: float) -> ScalingDecision:
        wanted = max(1, math.floor(ratio + 0.5))  # Scala's round: halves up
        target = int(max(min(self.max_executors, len(live) + wanted), self.min_executors))
        if target <= len(live):
            return _with(decision, reason=f"at maxExecutors ({self.max_executors})")
        if not self._client.request_total_executors(target):
            return _with(decision, reason=f"the cluster manager refused a total of {target} executors")
        return _with(decision, action=SCALE_UP, target=target, reason=f"requested {target - len(live)} more")

    def _scale_down(self, decision: ScalingDecision, live: list[str]) -> ScalingDecision:
        if len(live) <= self.min_executors:
            return _with(decision, reason=f"at minExecutors ({self.min_executors})")
        receivers = self._tracker.receiver_executors()
        # Spark removes any executor its running receivers are not on; one whose receiver is
        # about to start there (launched before the executors registered, or being relaunched)
        # would lose it, and with it the blocks that receiver had not yet stored. Nothing is
        # removed until every receiver's executor is known.
        unplaced = sorted(sid for sid, executors in receivers.items() if not executors)
        if unplaced:
            return _with(
                decision,
                reason=f"receiver(s) {', '.join(map(str, unplaced))} not yet running on a known "
                "executor: none removed",
            )
        kept = {e for executors in receivers.values() for e in executors}
        kept |= set(self._tracker.executors_with_unprocessed_blocks())
        removable = [e for e in live if e not in kept]
        if not removable:
            return _with(decision, reason="every executor runs a receiver or holds blocks not yet processed")
        cores = self._client.executor_cores()
        # The newest first: it holds the fewest cached blocks and Python workers.
        victim = max(removable, key=_numeric_first)
        slots_left = sum(cores.get(e, 0) for e in live if e != victim) // self._task_cpus
        if slots_left <= len(receivers):
            return _with(
                decision,
                reason=f"removing executor {victim} would leave {slots_left} task slot(s) for "
                f"{len(receivers)} receiver(s) and none for batches",
            )
        if not self._client.kill_executor(victim):
            return _with(
                decision, reason=f"executor {victim} not removed (busy or gone); next interval tries again"
            )
        self._removing.add(victim)
        target = len(live) - 1
        # The kill lowered the backend's target by one, or to 0 when it had none yet: set it to
        # what stays, so that an executor lost later is replaced.
        self._client.request_total_executors(target)
        return _with(
            decision, action=SCALE_DOWN, target=target, executor_id=victim, reason="removed one executor"
        )

    def _report(self, decision: ScalingDecision) -> None:
        level = logging.DEBUG if decision.action == HOLD else logging.INFO
        logger.log(level, "%s", describe(decision))
        self._post(StreamingListenerScalingDecision(decision))


def describe(decision: ScalingDecision) -> str:
    """One line per decision, for the log."""
    if decision.ratio is None:
        load = "no load measured"
    elif decision.basis == PROCESSING_TIME:
        batches = f"{decision.batches} batch(es)"
        load = f"load {decision.ratio:.2f} (average processing time of {batches} / batch interval)"
    else:
        load = f"load {decision.ratio:.2f} ({decision.basis})"
    change = {
        SCALE_UP: f"scaling up from {decision.executors} to {decision.target} executors",
        SCALE_DOWN: f"scaling down from {decision.executors} to {decision.target} executors",
    }.get(decision.action, f"keeping {decision.executors} executors")
    return f"Streaming dynamic allocation: {load}; {change}: {decision.reason}"


def _with(decision: ScalingDecision, **changes: object) -> ScalingDecision:
    return replace(decision, **changes)  # type: ignore[arg-type]


def _numeric_first(executor_id: str) -> tuple[int, int | str]:
    return (0, int(executor_id)) if executor_id.isdigit() else (1, executor_id)

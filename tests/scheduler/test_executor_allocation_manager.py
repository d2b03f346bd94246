"""Streaming dynamic allocation's policy (``scheduler/executor_allocation_manager.py``), with a
fake allocation client and a fake receiver tracker, one scaling interval at a time (each test
calls the timer's callback itself: no clock runs, no timing)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

import pytest

from reliable_kafka.scheduler.executor_allocation_manager import (
    PROCESSING_TIME,
    WITH_RUNNING,
    ExecutorAllocationManager,
)
from reliable_kafka.scheduler.listener_events import (
    HOLD,
    SCALE_DOWN,
    SCALE_UP,
    BatchInfo,
    OutputOperationInfo,
    ScalingDecision,
    StreamingListenerBatchCompleted,
    StreamingListenerBatchStarted,
    StreamingListenerBatchSubmitted,
    StreamingListenerScalingDecision,
)
from reliable_kafka.settings import DynamicAllocationSettings
from tests.support import ManualClock

BATCH_MS = 1000
INTERVAL_MS = 10_000


class FakeCluster:
    """The allocation client: executors with their cores, the totals asked, the kills."""

    def __init__(self, executors: list[str], cores: int = 1) -> None:
        self.executors = list(executors)
        self.cores = {executor: cores for executor in executors}
        self.totals: list[int] = []
        self.killed: list[str] = []
        self.busy: set[str] = set()

    def executor_ids(self) -> list[str]:
        return list(self.executors)

    def executor_cores(self) -> Mapping[str, int]:
        return dict(self.cores)

    def request_total_executors(self, total: int) -> bool:
        self.totals.append(total)
        return True

    def kill_executor(self, executor_id: str) -> bool:
        if executor_id in self.busy:
            return False
        self.killed.append(executor_id)
        return True


class FakeTracker:
    """Receivers by stream id: on one executor, on any of several (scheduled there), or on one
    not known yet (``None``)."""

    def __init__(
        self, receivers: dict[int, str | set[str] | None] | None = None, holding: set[str] | None = None
    ) -> None:
        self.receivers = receivers or {}
        self.holding = holding or set()

    def receiver_executors(self) -> Mapping[int, Collection[str]]:
        return {
            sid: set() if on is None else {on} if isinstance(on, str) else set(on)
            for sid, on in self.receivers.items()
        }

    def executors_with_unprocessed_blocks(self) -> set[str]:
        return set(self.holding)


def manager(
    cluster: FakeCluster,
    tracker: FakeTracker | None = None,
    posted: list[StreamingListenerScalingDecision] | None = None,
    *,
    batch_duration_ms: int = BATCH_MS,
    **settings: object,
) -> ExecutorAllocationManager:
    tracker = tracker or FakeTracker()
    return ExecutorAllocationManager(
        cluster,
        tracker,
        DynamicAllocationSettings(enabled=True, scaling_interval_ms=INTERVAL_MS, **settings),  # type: ignore[arg-type]
        batch_duration_ms=batch_duration_ms,
        receivers=len(tracker.receivers),
        clock=ManualClock(0),
        post=(posted if posted is not None else []).append,
    )


_times = iter(range(BATCH_MS, 10**9, BATCH_MS))


def complete_batches(
    allocation: ExecutorAllocationManager, *processing_ms: int, failed: bool = False
) -> None:
    for ms in processing_ms:
        time_ms = next(_times)
        ops = {0: OutputOperationInfo(time_ms, 0, "op", "op", 0, ms, "boom" if failed else None)}
        batch = BatchInfo(time_ms, {}, time_ms, time_ms, time_ms + ms, ops)
        allocation.onBatchSubmitted(StreamingListenerBatchSubmitted(batch))
        allocation.onBatchCompleted(StreamingListenerBatchCompleted(batch))


def start_batches(allocation: ExecutorAllocationManager, *started_ms: int) -> list[BatchInfo]:
    """Batches submitted and started at each of ``started_ms`` (times on the manager's clock), not
    completed."""
    started = []
    for start_ms in started_ms:
        time_ms = next(_times)
        allocation.onBatchSubmitted(
            StreamingListenerBatchSubmitted(BatchInfo(time_ms, {}, time_ms, None, None))
        )
        batch = BatchInfo(time_ms, {}, time_ms, start_ms, None)
        allocation.onBatchStarted(StreamingListenerBatchStarted(batch))
        started.append(batch)
    return started


def finish(allocation: ExecutorAllocationManager, batch: BatchInfo, end_ms: int) -> None:
    ops = {
        0: OutputOperationInfo(
            batch.batch_time_ms, 0, "op", "op", batch.processing_start_time_ms, end_ms, None
        )
    }
    done = BatchInfo(
        batch.batch_time_ms, {}, batch.submission_time_ms, batch.processing_start_time_ms, end_ms, ops
    )
    allocation.onBatchCompleted(StreamingListenerBatchCompleted(done))


def decide(allocation: ExecutorAllocationManager) -> ScalingDecision:
    return allocation.manage_allocation(INTERVAL_MS)


# ---------------------------------------------------------------- up


def test_a_load_at_the_up_ratio_asks_for_one_more_executor_in_all() -> None:
    cluster = FakeCluster(["1", "2"])
    allocation = manager(cluster)
    complete_batches(allocation, 900, 950, 1000)  # average 950 ms of a 1000 ms batch
    decision = decide(allocation)
    assert (decision.action, decision.basis, decision.batches) == (SCALE_UP, PROCESSING_TIME, 3)
    assert decision.ratio == pytest.approx(0.95)
    assert (decision.executors, decision.target) == (2, 3)
    assert cluster.totals == [3]  # an absolute total, not "one more" on an unknown target


def test_the_request_is_round_ratio_more_within_max_executors() -> None:
    cluster = FakeCluster(["1", "2"])
    allocation = manager(cluster, max_executors=4)
    complete_batches(allocation, 2500)  # ratio 2.5: three more (Scala's round), capped at 4
    assert decide(allocation).target == 4
    assert cluster.totals == [4]
    cluster.executors += ["3", "4"]
    complete_batches(allocation, 3000)
    at_max = decide(allocation)
    assert (at_max.action, at_max.target, at_max.reason) == (HOLD, 4, "at maxExecutors (4)")
    assert cluster.totals == [4]


def test_requests_repeated_while_executors_come_ask_for_no_more() -> None:
    cluster = FakeCluster(["1", "2"])
    allocation = manager(cluster)
    for _ in range(2):
        complete_batches(allocation, 1200)
        decide(allocation)
    assert cluster.totals == [3, 3]


def test_a_load_between_the_ratios_changes_nothing_and_each_interval_starts_afresh() -> None:
    cluster = FakeCluster(["1", "2", "3"])
    allocation = manager(cluster)
    complete_batches(allocation, 500)
    assert decide(allocation).action == HOLD
    nothing = decide(allocation)  # nothing completed or running since
    assert (nothing.action, nothing.ratio, nothing.reason) == (HOLD, None, "no batch completed or running")
    assert cluster.totals == [] and cluster.killed == []


def test_failed_batches_are_not_counted_as_load() -> None:
    cluster = FakeCluster(["1", "2"])
    allocation = manager(cluster)
    complete_batches(allocation, 5000, failed=True)
    complete_batches(allocation, 500)
    decision = decide(allocation)
    assert (decision.ratio, decision.batches, decision.action) == (0.5, 1, HOLD)


# ---------------------------------------------------------------- running batches (not in Spark)


def test_a_batch_running_at_the_interval_end_counts_at_its_time_so_far() -> None:
    """A surge: the idle batches completed fast, the first slow one is still running. Spark's
    average (50 ms) would wait for it to complete, an interval later."""
    cluster = FakeCluster(["1", "2"])
    allocation = manager(cluster)
    complete_batches(allocation, 50, 50, 50)
    start_batches(allocation, INTERVAL_MS - 4000)  # 4 s so far, of a 1 s batch interval
    decision = decide(allocation)
    assert (decision.action, decision.basis, decision.batches) == (SCALE_UP, WITH_RUNNING, 4)
    assert decision.ratio == pytest.approx((3 * 50 + 4000) / 4 / BATCH_MS)
    assert cluster.totals == [3]


def test_receivers_holding_every_slot_leave_a_running_batch_that_scales_up() -> None:
    """Its job started, its tasks wait for a slot: no batch completes, and Spark never scales."""
    cluster = FakeCluster(["1", "2"])
    allocation = manager(cluster, FakeTracker({0: "1", 1: "2"}), max_executors=3)
    start_batches(allocation, 0)  # running the whole interval
    decision = decide(allocation)
    assert (decision.action, decision.basis, decision.ratio) == (SCALE_UP, WITH_RUNNING, 10.0)
    assert cluster.totals == [3]  # round(10) more, within maxExecutors


def test_a_batch_that_only_began_leaves_spark_s_average_as_it_is() -> None:
    cluster = FakeCluster(["1", "2"])
    allocation = manager(cluster)
    complete_batches(allocation, 900, 950, 1000)
    start_batches(allocation, INTERVAL_MS - 10)
    decision = decide(allocation)
    assert (decision.action, decision.basis, decision.batches) == (SCALE_UP, PROCESSING_TIME, 3)
    assert decision.ratio == pytest.approx(0.95)


def test_a_batch_longer_than_the_scaling_interval_is_not_load_while_on_time() -> None:
    """A 30 s batch interval with a 10 s scaling interval: most intervals see no batch complete,
    and one running for 2 s of its 30 is a light load, not an overload."""
    cluster = FakeCluster(["1", "2", "3"])
    allocation = manager(cluster, FakeTracker({0: "1"}), batch_duration_ms=30_000)
    start_batches(allocation, INTERVAL_MS - 2000)
    decision = decide(allocation)
    assert decision.ratio == pytest.approx(2000 / 30_000)
    # Its time so far says how long it takes at least, not at most: nothing is removed on it.
    assert (decision.action, decision.reason) == (
        HOLD,
        "no batch completed: running batches alone remove nothing",
    )
    assert cluster.totals == [] and cluster.killed == []


def test_a_batch_counts_while_it_runs_then_at_its_processing_time_once() -> None:
    cluster = FakeCluster(["1", "2"])
    allocation = manager(cluster, max_executors=2)
    (batch,) = start_batches(allocation, INTERVAL_MS - 3000)
    assert decide(allocation).ratio == pytest.approx(3.0)
    finish(allocation, batch, INTERVAL_MS + 1000)
    second = allocation.manage_allocation(2 * INTERVAL_MS)
    assert (second.basis, second.batches, second.ratio) == (PROCESSING_TIME, 1, pytest.approx(4.0))
    third = allocation.manage_allocation(3 * INTERVAL_MS)
    assert (third.ratio, third.reason) == (None, "no batch completed or running")


# ---------------------------------------------------------------- down


def test_a_light_load_removes_the_newest_executor_without_a_receiver() -> None:
    cluster = FakeCluster(["1", "2", "3", "10"])
    allocation = manager(cluster, FakeTracker({0: "10"}))
    complete_batches(allocation, 100, 200)
    decision = decide(allocation)
    assert (decision.action, decision.executor_id, decision.executors, decision.target) == (
        SCALE_DOWN,
        "3",
        4,
        3,
    )
    assert cluster.killed == ["3"]
    # The kill lowered the backend's target (to 0 when it had none): it is set to what stays.
    assert cluster.totals == [3]


def test_one_executor_per_interval_and_the_removed_one_no_longer_counts() -> None:
    cluster = FakeCluster(["1", "2", "3"], cores=2)
    allocation = manager(cluster, FakeTracker({0: "1"}))
    complete_batches(allocation, 100)
    decide(allocation)
    complete_batches(allocation, 100)
    second = decide(allocation)  # "3" is still listed by the backend, on its way out
    assert (second.executors, second.executor_id) == (2, "2")
    assert cluster.killed == ["3", "2"]


def test_never_below_min_executors_which_defaults_to_the_receivers() -> None:
    cluster = FakeCluster(["1", "2", "3"], cores=2)
    allocation = manager(cluster, FakeTracker({0: "1", 1: "2", 2: "3"}))
    assert allocation.min_executors == 3
    complete_batches(allocation, 10)
    assert decide(allocation).reason == "at minExecutors (3)"
    explicit = manager(FakeCluster(["1", "2"]), min_executors=2)
    complete_batches(explicit, 10)
    assert decide(explicit).reason == "at minExecutors (2)"


def test_no_receiver_executor_is_ever_removed() -> None:
    cluster = FakeCluster(["1", "2", "3"], cores=2)
    allocation = manager(cluster, FakeTracker({0: "2", 1: "3"}), min_executors=1)
    complete_batches(allocation, 10)
    assert decide(allocation).executor_id == "1"
    cluster.executors.remove("1")
    complete_batches(allocation, 10)
    decision = decide(allocation)
    assert (decision.action, decision.reason) == (
        HOLD,
        "every executor runs a receiver or holds blocks not yet processed",
    )
    assert cluster.killed == ["1"]


def test_no_executor_is_removed_while_a_receivers_executor_is_not_known() -> None:
    """Launched before any executor registered (YARN), or being launched again: the receiver may
    start on any executor, the idle-looking one too."""
    cluster = FakeCluster(["1", "2", "3"], cores=2)
    tracker = FakeTracker({0: "1", 1: None}, holding=set())
    allocation = manager(cluster, tracker, min_executors=1)
    complete_batches(allocation, 10)
    decision = decide(allocation)
    assert (decision.action, decision.reason) == (
        HOLD,
        "receiver(s) 1 not yet running on a known executor: none removed",
    )
    tracker.receivers[1] = {"2", "3"}  # scheduled on either: both stay
    complete_batches(allocation, 10)
    assert decide(allocation).reason == "every executor runs a receiver or holds blocks not yet processed"
    tracker.receivers[1] = "2"  # registered on 2
    complete_batches(allocation, 10)
    assert decide(allocation).executor_id == "3"
    assert cluster.killed == ["3"]


def test_no_executor_holding_unprocessed_blocks_is_removed() -> None:
    cluster = FakeCluster(["1", "2", "3", "4"])
    tracker = FakeTracker({0: "1"}, holding={"3", "4"})  # copies of blocks not yet processed
    allocation = manager(cluster, tracker)
    complete_batches(allocation, 10)
    assert decide(allocation).executor_id == "2"
    tracker.holding = {"3"}  # "4"'s blocks were processed since
    complete_batches(allocation, 10)
    assert decide(allocation).executor_id == "4"
    assert cluster.killed == ["2", "4"]


def test_no_removal_that_leaves_receivers_every_slot() -> None:
    cluster = FakeCluster(["1", "2"])  # one core each: the receiver holds executor 1's
    allocation = manager(cluster, FakeTracker({0: "1"}))
    complete_batches(allocation, 10)
    decision = decide(allocation)
    assert decision.action == HOLD
    assert decision.reason == (
        "removing executor 2 would leave 1 task slot(s) for 1 receiver(s) and none for batches"
    )
    assert cluster.killed == []


def test_a_busy_executor_is_not_removed_and_still_counts() -> None:
    cluster = FakeCluster(["1", "2", "3"])
    cluster.busy.add("3")
    allocation = manager(cluster, FakeTracker({0: "1"}))
    complete_batches(allocation, 10)
    decision = decide(allocation)
    assert (decision.action, decision.executors) == (HOLD, 3)
    assert "executor 3 not removed" in decision.reason
    assert cluster.totals == []


# ---------------------------------------------------------------- reporting


def test_each_decision_is_posted_and_changes_are_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster(["1", "2"])
    posted: list[StreamingListenerScalingDecision] = []
    allocation = manager(cluster, posted=posted)
    with caplog.at_level(logging.INFO, logger="reliable_kafka.scheduler.executor_allocation_manager"):
        complete_batches(allocation, 1500)
        decide(allocation)
        complete_batches(allocation, 500)
        decide(allocation)
    assert [event.decision.action for event in posted] == [SCALE_UP, HOLD]
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert line == (
        "Streaming dynamic allocation: load 1.50 (average processing time of 1 batch(es) / batch "
        "interval); scaling up from 2 to 4 executors: requested 2 more"
    )


def test_a_failing_client_is_a_hold_and_the_next_interval_decides_afresh() -> None:
    class Gone(FakeCluster):
        def executor_ids(self) -> list[str]:
            raise RuntimeError("SparkContext stopped")

    posted: list[StreamingListenerScalingDecision] = []
    allocation = manager(Gone(["1"]), posted=posted)
    complete_batches(allocation, 2000)
    decision = decide(allocation)
    assert decision.action == HOLD and "SparkContext stopped" in decision.reason
    assert len(posted) == 1

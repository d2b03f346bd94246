"""The launcher keeps each receiver running: relaunch after the restart delay at the tracker's new
locations, failures reported to the tracker, nothing launched once the tracker stops."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from reliable_kafka.scheduler.receiver_launcher import ReceiverLauncher, backoff_delay_ms
from reliable_kafka.scheduler.receiver_scheduling_policy import ExecutorCacheTaskLocation, TaskLocation
from reliable_kafka.util.clock import ManualClock
from tests.support import wait_until

A = ExecutorCacheTaskLocation("h", "1")
B = ExecutorCacheTaskLocation("h", "2")


class Stream:
    def __init__(self, stream_id: int, previous_launches: int = 0) -> None:
        self.id = stream_id
        self.previous_launches = previous_launches


class Target:
    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.rescheduled: list[int] = []
        self.failures: list[tuple[int, str]] = []
        self.ended: set[int] = set()

    def schedule(self, streams: Sequence[Any]) -> dict[int, list[TaskLocation]]:
        return {stream.id: [A] for stream in streams}

    def reschedule(self, stream_id: int) -> list[TaskLocation]:
        self.rescheduled.append(stream_id)
        return [B]

    def receiver_failed(self, stream_id: int, error: BaseException) -> None:
        self.failures.append((stream_id, str(error)))

    def failure_streak(self, stream_id: int) -> int:
        return 0

    def stream_ended(self, stream_id: int) -> bool:
        return stream_id in self.ended


class Runner:
    """Each incarnation ends at once; the third raises; records where each one ran."""

    keeps_blocks_after_stop = False
    block_fetch_secret = None

    def __init__(self, target: Target, stop_after: int) -> None:
        self.target = target
        self.stop_after = stop_after
        self.runs: list[tuple[int, list[TaskLocation], int]] = []

    def run(self, stream: Any, locations: Sequence[TaskLocation], launch: int) -> None:
        self.runs.append((stream.id, list(locations), launch))
        if launch >= self.stop_after:
            self.target.stopping.set()
        if launch == 3:
            raise RuntimeError("incarnation 3 failed")


def test_a_receiver_whose_job_ends_is_relaunched_where_the_tracker_reschedules_it() -> None:
    target = Target()
    runner = Runner(target, stop_after=4)
    launcher = ReceiverLauncher(target, runner, restart_delay_ms=1)  # type: ignore[arg-type]
    launcher.launch([Stream(7)])  # type: ignore[list-item]
    assert launcher.join(30)
    assert runner.runs == [(7, [A], 1), (7, [B], 2), (7, [B], 3), (7, [B], 4)]
    assert target.rescheduled == [7, 7, 7]
    assert target.failures == [(7, "incarnation 3 failed")]
    assert launcher.launch_count(7) == 4
    assert not launcher.any_running()


def test_a_stream_restored_from_a_checkpoint_starts_at_its_second_launch() -> None:
    """Its receiver reached its source in the driver before: no first contact (a zkQuorum that
    does not answer is then an outage to ride out, not a mistake that ends the stream)."""
    target = Target()
    runner = Runner(target, stop_after=2)
    launcher = ReceiverLauncher(target, runner, restart_delay_ms=1)  # type: ignore[arg-type]
    launcher.launch([Stream(7, previous_launches=1)])  # type: ignore[list-item]
    assert launcher.join(30)
    assert runner.runs == [(7, [A], 2)]


def test_nothing_is_relaunched_once_the_tracker_stops() -> None:
    target = Target()
    runner = Runner(target, stop_after=1)
    launcher = ReceiverLauncher(target, runner, restart_delay_ms=60_000)  # type: ignore[arg-type]
    launcher.launch([Stream(0), Stream(1)])  # type: ignore[list-item]
    wait_until(lambda: not launcher.any_running(), what="both launchers done")
    assert sorted(run[0] for run in runner.runs) == [0, 1]
    assert target.rescheduled == []


def test_a_receiver_that_ended_its_stream_is_not_launched_again() -> None:
    """A receiver that stopped with a FatalReceiverError: its launcher finishes by itself."""
    target = Target()

    class EndingRunner(Runner):
        def run(self, stream: Any, locations: Sequence[TaskLocation], launch: int) -> None:
            self.runs.append((stream.id, list(locations), launch))
            if launch == 1:
                target.ended.add(stream.id)  # the tracker heard the fatal deregistration first
            else:
                target.stopping.set()  # a relaunch: end the test

    runner = EndingRunner(target, stop_after=99)
    launcher = ReceiverLauncher(target, runner, restart_delay_ms=1)  # type: ignore[arg-type]
    launcher.launch([Stream(0)])  # type: ignore[list-item]
    assert launcher.join(30)
    assert runner.runs == [(0, [A], 1)]
    assert target.rescheduled == []
    assert not target.stopping.is_set()


def test_the_restart_delay_doubles_per_failed_launch_up_to_the_cap() -> None:
    assert [backoff_delay_ms(2000, 60_000, streak) for streak in range(8)] == [
        2000,  # the last launch worked
        2000,  # the first failure waits Spark's delay
        4000,
        8000,
        16_000,
        32_000,
        60_000,
        60_000,
    ]
    assert backoff_delay_ms(2000, 60_000, 10_000) == 60_000  # no overflow on a long streak
    assert backoff_delay_ms(2000, 500, 5) == 2000  # a cap below the delay: Spark's delay
    assert backoff_delay_ms(0, 60_000, 5) == 0


class RecordingClock(ManualClock):
    """A manual clock that notes each wait the launcher starts, as a delay from now."""

    def __init__(self) -> None:
        super().__init__(1_000_000)
        self.waits: list[int] = []

    def wait_till_time(self, target_ms: int, interrupt: threading.Event | None = None) -> int:
        self.waits.append(target_ms - self.get_time_ms())
        return super().wait_till_time(target_ms, interrupt)


class FailingTarget(Target):
    """Counts failed launches in a row as the tracker does; a working launch ends the streak."""

    def __init__(self) -> None:
        super().__init__()
        self.streak = 0

    def failure_streak(self, stream_id: int) -> int:
        return self.streak


class StreakRunner:
    """Launches in ``failing`` fail, the others work; the tracker stops at ``last``."""

    keeps_blocks_after_stop = False
    block_fetch_secret = None

    def __init__(self, target: FailingTarget, failing: set[int], last: int) -> None:
        self.target = target
        self.failing = failing
        self.last = last

    def run(self, stream: Any, locations: Sequence[TaskLocation], launch: int) -> None:
        self.target.streak = self.target.streak + 1 if launch in self.failing else 0
        if launch == self.last:
            self.target.stopping.set()


def test_a_receiver_that_keeps_failing_waits_longer_each_time_and_a_working_launch_resets_the_delay() -> None:
    target = FailingTarget()
    # Launches 1-5 fail, launch 6 works (stores a block), launch 7 fails: a streak of its own.
    runner = StreakRunner(target, failing={1, 2, 3, 4, 5, 7}, last=8)
    clock = RecordingClock()
    launcher = ReceiverLauncher(target, runner, 1000, 8000, clock)  # type: ignore[arg-type]
    launcher.launch([Stream(0)])  # type: ignore[list-item]
    try:
        for waits in range(1, 8):
            wait_until(lambda n=waits: len(clock.waits) == n, what=f"restart wait {waits}")  # type: ignore[misc]
            clock.advance(clock.waits[-1])
        assert launcher.join(30)
    finally:
        target.stopping.set()
    assert clock.waits == [1000, 2000, 4000, 8000, 8000, 1000, 1000]
    assert launcher.launch_count(0) == 8


def test_a_stop_does_not_wait_out_a_backoff() -> None:
    target = FailingTarget()
    target.streak = 49
    clock = RecordingClock()
    runner = StreakRunner(target, failing={1}, last=2)
    launcher = ReceiverLauncher(target, runner, 1000, 3_600_000, clock)  # type: ignore[arg-type]
    launcher.launch([Stream(0)])  # type: ignore[list-item]
    wait_until(lambda: clock.waits == [3_600_000], what="the launcher to back off for an hour")
    assert launcher.restart_delay_ms(0) == 3_600_000
    target.stopping.set()
    # The manual clock never moves: only the stop can end the wait.
    assert launcher.join(30)
    assert launcher.launch_count(0) == 1

"""The launcher keeps each receiver running: relaunch after the restart delay at the tracker's new
locations, failures reported to the tracker, nothing launched once the tracker stops."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from reliable_kafka.scheduler.receiver_launcher import ReceiverLauncher
from reliable_kafka.scheduler.receiver_scheduling_policy import ExecutorCacheTaskLocation, TaskLocation
from tests.scheduler.fakes import wait_until

A = ExecutorCacheTaskLocation("h", "1")
B = ExecutorCacheTaskLocation("h", "2")


class Stream:
    def __init__(self, stream_id: int) -> None:
        self.id = stream_id


class Target:
    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.rescheduled: list[int] = []
        self.failures: list[tuple[int, str]] = []

    def schedule(self, streams: Sequence[Any]) -> dict[int, list[TaskLocation]]:
        return {stream.id: [A] for stream in streams}

    def reschedule(self, stream_id: int) -> list[TaskLocation]:
        self.rescheduled.append(stream_id)
        return [B]

    def receiver_failed(self, stream_id: int, error: BaseException) -> None:
        self.failures.append((stream_id, str(error)))


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


def test_nothing_is_relaunched_once_the_tracker_stops() -> None:
    target = Target()
    runner = Runner(target, stop_after=1)
    launcher = ReceiverLauncher(target, runner, restart_delay_ms=60_000)  # type: ignore[arg-type]
    launcher.launch([Stream(0), Stream(1)])  # type: ignore[list-item]
    wait_until(lambda: not launcher.any_running(), what="both launchers done")
    assert sorted(run[0] for run in runner.runs) == [0, 1]
    assert target.rescheduled == []

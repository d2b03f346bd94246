"""RecurringTimer: ticks aligned to the period; graceful and interrupting stops."""

from __future__ import annotations

import threading

from reliable_kafka.receiver import ManualClock, RecurringTimer, SystemClock
from tests.support import wait_until
from tests.support.threads import no_thread_outlives_its_test  # noqa: F401 - autouse: on for this module


def test_ticks_are_aligned_to_multiples_of_the_period() -> None:
    clock = ManualClock(1234)
    ticks: list[int] = []
    timer = RecurringTimer(clock, 100, ticks.append, "test")
    assert timer.start() == 1300
    clock.set_time(1300)
    wait_until(lambda: ticks == [1300], what="first tick")
    clock.set_time(1500)
    wait_until(lambda: ticks == [1300, 1400, 1500], what="catch-up ticks")
    assert timer.stop(interrupt_timer=True) == 1500
    assert ticks == [1300, 1400, 1500]


def test_a_graceful_stop_delivers_the_next_tick_and_no_other() -> None:
    clock = SystemClock()
    ticks: list[int] = []
    ticking: set[threading.Thread] = set()

    def tick(time_ms: int) -> None:
        ticking.add(threading.current_thread())
        ticks.append(time_ms)

    timer = RecurringTimer(clock, 50, tick, "test")
    timer.start()
    wait_until(lambda: len(ticks) >= 1, what="first tick")
    asked_at = clock.get_time_ms()
    last = timer.stop(interrupt_timer=False)
    # The last tick is the one due after the stop was asked for (or one already running then).
    assert last == ticks[-1] > asked_at - 50
    # And no other: the stop returned after the thread that ticks had ended.
    assert ticking and not any(thread.is_alive() for thread in ticking)


def test_an_interrupting_stop_skips_the_pending_tick() -> None:
    clock = ManualClock(0)
    ticks: list[int] = []
    timer = RecurringTimer(clock, 100, ticks.append, "test")
    timer.start()
    assert timer.stop(interrupt_timer=True) == 0
    assert ticks == []


def test_a_failing_callback_does_not_stop_later_ticks() -> None:
    clock = ManualClock(0)
    ticks: list[int] = []

    def callback(time_ms: int) -> None:
        ticks.append(time_ms)
        if time_ms == 100:
            raise RuntimeError("tick failed on purpose")

    timer = RecurringTimer(clock, 100, callback, "test")
    timer.start()
    clock.set_time(200)
    wait_until(lambda: ticks == [100, 200], what="tick after the failure")
    timer.stop(interrupt_timer=True)

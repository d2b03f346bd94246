"""The shared test helpers."""

from __future__ import annotations

import threading

import pytest

from tests.support import ManualClock, wait_for_event, wait_until


def test_wait_until_returns_once_the_condition_holds() -> None:
    done = threading.Event()
    threading.Timer(0.05, done.set).start()
    wait_until(done.is_set, what="the timer")
    assert done.is_set()


def test_wait_until_names_what_it_waited_for_when_it_gives_up() -> None:
    with pytest.raises(AssertionError, match=r"timed out after 0\.05 s waiting for the impossible"):
        wait_until(lambda: False, timeout_s=0.05, what="the impossible")


def test_wait_for_event_names_the_event_when_it_gives_up() -> None:
    with pytest.raises(AssertionError, match="waiting for a set event"):
        wait_for_event(threading.Event(), timeout_s=0.01, what="a set event")


def test_the_manual_clock_serves_both_seams() -> None:
    clock = ManualClock(1_000)
    assert clock() == clock.get_time_ms() == clock.now_ms == 1_000
    clock.now_ms = 2_000
    clock.advance(500)
    assert clock() == 2_500
    woke = threading.Event()
    threading.Thread(target=lambda: (clock.wait_till_time(3_000), woke.set()), daemon=True).start()
    assert not woke.wait(0.05)  # the clock has not reached 3000: the waiter is still waiting
    clock.set_time(3_000)
    wait_for_event(woke, what="the waiter to wake at 3000")

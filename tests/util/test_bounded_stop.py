"""stop_within and join_within: a stop that returns, one that raises, and one that never ends."""

from __future__ import annotations

import logging
import threading

import pytest

from reliable_kafka.util.bounded_stop import join_within, stop_within


def test_a_stop_that_returns_is_waited_for() -> None:
    stopped = threading.Event()
    assert stop_within("a service", stopped.set, timeout_s=None)
    assert stopped.is_set()


def test_the_error_of_a_stop_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("cannot stop")

    with pytest.raises(ValueError, match="cannot stop"):
        stop_within("a service", fail, timeout_s=None)


def test_a_stop_that_never_ends_is_abandoned_and_logged_with_where_it_was_stuck(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()

    def stuck_in_a_dead_dependency() -> None:
        release.wait()

    try:
        with caplog.at_level(logging.WARNING, logger="reliable_kafka.util.bounded_stop"):
            assert not stop_within("the ZooKeeper client", stuck_in_a_dead_dependency, timeout_s=0.05)
        assert "Abandoned waiting for thread stop the ZooKeeper client" in caplog.text
        assert "stuck_in_a_dead_dependency" in caplog.text
    finally:
        release.set()


def test_join_within_reports_whether_the_thread_ended() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, daemon=True)
    thread.start()
    assert not join_within(thread, 0.01)
    release.set()
    assert join_within(thread, None)

"""FailureLog (issue 10, item 6): a retried failure logs its traceback once, then one line per
retry, then one recovery line."""

from __future__ import annotations

import logging

import pytest

from wal.failure_log import FailureLog

logger = logging.getLogger("tests.failure_log")


def test_first_failure_has_the_traceback_then_one_line_each_then_a_recovery_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=logger.name)
    log = FailureLog(logger, "writing the thing")
    for attempt in range(1, 61):
        log.failed(OSError(28, "No space left on device"), f"attempt {attempt}")
    assert log.failing
    log.succeeded()
    log.succeeded()  # nothing more: it was already healthy
    records = caplog.records
    assert len(records) == 61
    assert [r.exc_info is not None for r in records] == [True] + [False] * 60
    assert (
        "writing the thing failed (attempt 1): [Errno 28] No space left on device" in records[0].getMessage()
    )
    assert "failed again (attempt 60), 60 failures in a row" in records[59].getMessage()
    assert "succeeded again after 60 failure(s)" in records[60].getMessage()
    assert not log.failing
    # A new run of failures shows its traceback again.
    log.failed(OSError("again"))
    assert caplog.records[-1].exc_info is not None


def test_a_failure_reported_as_text_is_logged_in_full_once_then_as_the_same_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=logger.name)
    log = FailureLog(logger, "Receiver 0")
    for text in ("NoBrokersError: broker 0 unreachable",) * 3 + ("ValueError: other",):
        log.failed(text, "Error starting receiver 0")
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("Receiver 0 failed (Error starting receiver 0): NoBrokersError: broker 0 unreachable", None),
        ("Receiver 0 failed again (Error starting receiver 0), 2 failures in a row: the same error", None),
        ("Receiver 0 failed again (Error starting receiver 0), 3 failures in a row: the same error", None),
        ("Receiver 0 failed again (Error starting receiver 0), 4 failures in a row: ValueError: other", None),
    ]


def test_a_failure_raised_from_one_already_reported_is_one_line_in_the_next_layer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A write-ahead log, the group-commit log above it and the tracker above that each report
    the same failed write: its traceback once (the inner log's first attempt), then one line
    per attempt and per layer."""
    caplog.set_level(logging.INFO, logger=logger.name)
    inner, outer = FailureLog(logger, "segment write"), FailureLog(logger, "batched write")
    attempts = [OSError(f"SETPERMISSION timed out {n}") for n in (1, 2)]
    for n, error in enumerate(attempts, 1):
        inner.failed(error, f"attempt {n}")
    try:
        raise RuntimeError("write failed after 2 attempts") from attempts[-1]
    except RuntimeError as wrapped:
        outer.failed(wrapped)
    assert [r.exc_info is not None for r in caplog.records] == [True, False, False]
    assert "batched write failed: write failed after 2 attempts" in caplog.records[2].getMessage()
    # An unrelated failure in the outer layer still shows its own traceback.
    outer.succeeded()
    outer.failed(ValueError("something else"))
    assert caplog.records[-1].exc_info is not None


def test_a_layer_above_says_again_at_debug_what_the_layer_below_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One line per retry: the layer that retries logs each attempt; the layers above it give
    their first line (which operation failed) and then count at DEBUG."""
    caplog.set_level(logging.DEBUG, logger=logger.name)
    inner, outer = FailureLog(logger, "segment write"), FailureLog(logger, "batched write")
    for n in range(1, 4):
        error = OSError(f"connection refused {n}")
        inner.failed(error, f"attempt {n}")
        try:
            raise RuntimeError("batched write failed") from error
        except RuntimeError as wrapped:
            outer.failed(wrapped)
    outer_levels = [r.levelno for r in caplog.records if r.getMessage().startswith("batched write")]
    assert outer_levels == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    inner_levels = [r.levelno for r in caplog.records if r.getMessage().startswith("segment write")]
    assert inner_levels == [logging.WARNING] * 3


def test_a_shared_streak_outlives_its_failure_log(caplog: pytest.LogCaptureFixture) -> None:
    """A relaunched receiver's new write-ahead log on the same directory continues the streak
    its predecessor began: no second traceback for the same outage."""
    caplog.set_level(logging.INFO, logger=logger.name)
    what = "write-ahead log write to /checkpoints/app/receivedData/0"
    first = FailureLog(logger, what, shared=True)
    first.failed(OSError("store down"), "attempt 1 of 3")
    del first
    relaunched = FailureLog(logger, what, shared=True)
    assert relaunched.failing
    relaunched.failed(OSError("store down"), "attempt 1 of 3")
    assert [r.exc_info is not None for r in caplog.records] == [True, False]
    assert "2 failures in a row" in caplog.records[1].getMessage()
    # An unshared log of the same name keeps a streak of its own.
    private = FailureLog(logger, what)
    assert not private.failing
    relaunched.succeeded()
    assert "succeeded again after 2 failure(s)" in caplog.records[-1].getMessage()
    assert not FailureLog(logger, what, shared=True).failing

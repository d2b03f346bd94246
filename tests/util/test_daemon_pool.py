"""DaemonThreadPool: futures from daemon workers, and a shutdown bounded once for all of them."""

from __future__ import annotations

import threading

import pytest

from reliable_kafka.util.daemon_pool import DaemonThreadPool


def test_submitted_work_runs_and_its_result_or_error_reaches_the_future() -> None:
    pool = DaemonThreadPool(2, "test-pool")
    assert pool.submit(lambda x: x * 2, 21).result(timeout=10) == 42
    failing = pool.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)
    pool.shutdown(10)
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)


def test_shutdown_waits_for_stuck_workers_once_in_all_not_once_each(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Three workers stuck in a write: the joins share one deadline, so their bounds add up to
    the shutdown's timeout, not three times it."""
    release = threading.Event()
    pool = DaemonThreadPool(3, "stuck-pool")
    futures = [pool.submit(release.wait) for _ in range(3)]
    waits: list[float | None] = []
    real_join = threading.Thread.join

    def join(thread: threading.Thread, timeout: float | None = None) -> None:
        if thread.name.startswith("stuck-pool"):
            waits.append(timeout)
        real_join(thread, timeout)

    monkeypatch.setattr(threading.Thread, "join", join)
    pool.shutdown(0.5)
    release.set()
    assert len(waits) == 3 and all(w is not None for w in waits), waits
    assert sum(w for w in waits if w is not None) <= 0.5 + 1e-6, waits
    assert caplog.text.count("did not finish within 0.5 s") == 3
    assert all(f.result(timeout=10) for f in futures)


def test_shutdown_without_a_timeout_waits_for_the_queue() -> None:
    done: list[int] = []
    pool = DaemonThreadPool(2, "drain-pool")
    for i in range(10):
        pool.submit(done.append, i)
    pool.shutdown()
    assert sorted(done) == list(range(10))

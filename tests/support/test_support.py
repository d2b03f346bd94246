"""The shared test helpers, and the suite's rule that a helper thread's exception fails its test."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import ManualClock, read_json_lines, wait_for_event, wait_until

REPO = Path(__file__).resolve().parents[2]


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


def test_json_lines_leave_out_the_line_being_written(tmp_path: Path) -> None:
    output = tmp_path / "output.jsonl"
    assert read_json_lines(output) == []
    output.write_text('{"kind": "a"}\n\n{"kind": ')
    assert read_json_lines(output) == [{"kind": "a"}]
    with output.open("a") as appending:
        appending.write('"b"}\n')
    assert read_json_lines(output) == [{"kind": "a"}, {"kind": "b"}]


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


def test_an_exception_on_a_helper_thread_fails_the_test(tmp_path: Path) -> None:
    """setup.cfg turns pytest's unhandled-thread-exception warning into an error: run a test whose
    thread fails under the project's configuration and see that test fail."""
    (tmp_path / "test_thread.py").write_text(
        "import threading\n"
        "import pytest\n\n"
        "def test_fails_on_its_thread():\n"
        "    thread = threading.Thread(target=lambda: pytest.fail('failed on the helper thread'))\n"
        "    thread.start()\n"
        "    thread.join()\n"
    )
    started = time.monotonic()
    config = ["-c", str(REPO / "setup.cfg"), "--rootdir", str(tmp_path), "-p", "no:cacheprovider"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *config, "-q", str(tmp_path / "test_thread.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        # The outer run's options (say --record-durations) are its conftest's: unknown in here.
        env={key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"},
    )
    assert run.returncode == 1, (run.returncode, run.stdout, run.stderr, time.monotonic() - started)
    assert "failed on the helper thread" in run.stdout, run.stdout
    assert "1 failed" in run.stdout, run.stdout

"""CtrlCStop: the first Ctrl-C stops and exits with 130; one during a stop gets the old handler."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from reliable_kafka.util.ctrl_c import EXIT_STATUS, CtrlCStop


class Recorder:
    def __init__(self) -> None:
        self.stops = 0
        self.stopping = False
        self.previous_calls = 0

    def stop(self) -> None:
        self.stops += 1

    def previous(self, signum: int, frame: object) -> None:
        self.previous_calls += 1


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recorder = Recorder()
    before = signal.signal(signal.SIGINT, recorder.previous)
    yield recorder
    signal.signal(signal.SIGINT, before)


def test_the_first_ctrl_c_stops_and_exits_130(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    ctrl_c = CtrlCStop(recorder.stop, lambda: recorder.stopping, "now")
    assert ctrl_c.install()
    with pytest.raises(SystemExit) as exited:
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0)  # a bytecode boundary for the handler, without sleeping
    assert exited.value.code == EXIT_STATUS == 130
    assert (recorder.stops, recorder.previous_calls) == (1, 0)
    assert capsys.readouterr().err == (
        "Ctrl-C: stopping the streaming context now; Ctrl-C again stops at once\n"
    )
    ctrl_c.restore()
    assert signal.getsignal(signal.SIGINT) == recorder.previous


def test_ctrl_c_during_a_stop_gets_the_previous_handler(recorder: Recorder) -> None:
    ctrl_c = CtrlCStop(recorder.stop, lambda: recorder.stopping, "now")
    assert ctrl_c.install()
    recorder.stopping = True
    os.kill(os.getpid(), signal.SIGINT)
    signal.sigtimedwait([], 0)
    assert (recorder.stops, recorder.previous_calls) == (0, 1)
    ctrl_c.restore()


def test_not_installed_off_the_main_thread_or_when_ctrl_c_is_ignored(recorder: Recorder) -> None:
    installed: list[bool] = []
    thread = threading.Thread(
        target=lambda: installed.append(CtrlCStop(recorder.stop, lambda: False, "now").install())
    )
    thread.start()
    thread.join()
    assert installed == [False]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    assert not CtrlCStop(recorder.stop, lambda: False, "now").install()
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN

"""A Python application started in a process session of its own, its stdout and stderr collected
as they come."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path


class Output:
    """A child's stdout and stderr, collected as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        for stream in (process.stdout, process.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._lock:
                self.lines.append(line)

    def text(self) -> str:
        with self._lock:
            return "".join(self.lines)


def start_app(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Output]:
    """A Python application in a session of its own (a kill of the session takes its JVM and
    workers too), its output collected as it comes."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return process, Output(process)

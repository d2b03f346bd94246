"""Running a server (a JVM, or a native binary) as a child process we can always clean up."""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Self

from reliable_kafka.local.errors import ClusterStartError

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_LIVE_SERVERS: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


def find_java() -> str:
    """The ``java`` to run servers with: ``$JAVA_HOME/bin/java`` first, then ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ClusterStartError(
            "No 'java' found on PATH or in JAVA_HOME. ZooKeeper and Kafka need a Java runtime "
            "(17 or later works): install one, e.g. 'apt-get install openjdk-17-jre-headless'."
        )
    return java


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if the test process is SIGKILLed, the
    # kernel kills the JVM too, so no orphaned broker keeps a port or a data dir busy.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        return
    os.setsid()


def log_end(log_file: Path) -> int:
    """Where a server's (appended-to) log ends now: what :func:`log_since` reads from, for the
    lines of the start about to begin."""
    return log_file.stat().st_size if log_file.exists() else 0


def log_since(log_file: Path, offset: int) -> str:
    """The log's text from ``offset`` on: one start's lines, where a server says which ports it
    bound or lost."""
    with open(log_file, "rb") as handle:
        handle.seek(offset)
        return handle.read().decode("utf-8", "replace")


class ServerProcess:
    """One server child process (a JVM, or a native binary) with its output in a log file."""

    def __init__(
        self, name: str, command: Sequence[str], log_file: Path, *, env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.log_file = log_file
        self._command = list(command)
        self._env = None if env is None else dict(env)  # None: this process's environment
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> None:
        with self._lock:
            if self.is_running():
                return
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child, closed below
            try:
                logger.info("starting %s: %s", self.name, " ".join(self._command))
                self._process = subprocess.Popen(
                    self._command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent,  # noqa: PLW1509 - single call, before threads matter
                    cwd=self.log_file.parent,
                    env=self._env,
                )
            finally:
                log.close()
            _LIVE_SERVERS.add(self)

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown hooks, no flush beyond the page cache."""
        self._signal_and_wait(signal.SIGKILL, timeout_s=10.0)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if the JVM has not exited within ``timeout_s``."""
        if not self._signal_and_wait(signal.SIGTERM, timeout_s):
            self._signal_and_wait(signal.SIGKILL, timeout_s=10.0)

    def _signal_and_wait(self, sig: signal.Signals, timeout_s: float) -> bool:
        with self._lock:
            process = self._process
            if process is None or process.poll() is not None:
                return True
            try:
                process.send_signal(sig)
            except ProcessLookupError:
                return True
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return False
            logger.info("%s (pid %d) exited with %s", self.name, process.pid, process.returncode)
            return True

    def await_ready(
        self, ready: Callable[[], bool], server: str, doing: str, timeout_s: float, poll_s: float = 0.2
    ) -> None:
        """Poll ``ready`` until it is true. ``ClusterStartError`` with the log's tail when the
        process exits first, or when ``timeout_s`` passes (the process is killed then), worded
        as "<server> exited ..." / "<server> did not <doing> within ..."."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.is_running():
                raise ClusterStartError(
                    f"{server} exited with code {self.exit_code()} during start-up.", self.log_tail()
                )
            if ready():
                return
            time.sleep(poll_s)
        self.kill()
        raise ClusterStartError(f"{server} did not {doing} within {timeout_s:.0f} s.", self.log_tail())

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_file, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 64 * 1024))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class JavaServer(ServerProcess):
    """One JVM child process with its output in a log file."""

    def __init__(
        self,
        name: str,
        main_class: str,
        classpath: str,
        args: Sequence[str],
        log_file: Path,
        *,
        heap: str = "256m",
        jvm_options: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        command = [
            find_java(),
            f"-Xmx{heap}",
            # The stock scripts pass CMS/G1 flags that Java 17 rejects; the serial
            # collector is the right one for a small single-node test server anyway.
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            *jvm_options,
            "-cp",
            classpath,
            main_class,
            *args,
        ]
        super().__init__(name, command, log_file, env=env)


@atexit.register
def _stop_all_servers() -> None:
    for server in list(_LIVE_SERVERS):
        server.kill()


class ManagedServer(ABC):
    """A server of the local cluster: started by a subclass, then killed, stopped, restarted
    (data kept) and inspected the same way whatever it is."""

    DEFAULT_START_TIMEOUT_S = 60.0

    def __init__(self) -> None:
        self._server: ServerProcess | None = None

    @abstractmethod
    def start(self, timeout_s: float) -> None:
        """Start the JVM (``self._server``) and return once it serves."""

    def __enter__(self) -> Self:
        try:
            self.start(self.DEFAULT_START_TIMEOUT_S)
        except BaseException:
            # Failed or interrupted (Ctrl-C) half way: the process is stopped here, since the
            # with-block's exit never runs, and a server left running would outlive (and keep
            # writing to) the data directory its owner removes next.
            self.stop()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def is_running(self) -> bool:
        return self._server is not None and self._server.is_running()

    @property
    def pid(self) -> int | None:
        """The server JVM's process id (benchmarks read its CPU time), None before a start."""
        return self._server.pid if self._server else None

    def kill(self) -> None:
        if self._server is not None:
            self._server.kill()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()

    def restart(self, timeout_s: float | None = None) -> None:
        self.kill()
        self.start(self.DEFAULT_START_TIMEOUT_S if timeout_s is None else timeout_s)

    def log_tail(self, lines: int = 40) -> str:
        return self._server.log_tail(lines) if self._server else ""

"""A Spark standalone cluster of several "hosts" on one machine, for tests of host loss.

``local-cluster[...]`` runs its executors on one host: they share one filesystem, so a block
file written by one is readable by all, and nothing shows what happens when a machine goes away.
Here each worker is a host of its own:

- its own loopback address (127.0.0.2, 127.0.0.3, ...), which the worker, its executors and
  their block servers bind to and which Spark reports as their host;
- with root, its own mount namespace, in which ``/dev/shm`` (where receivers keep blocks in
  memory) and its ``SPARK_LOCAL_DIRS`` are private tmpfs mounts: no other host, nor the driver,
  can see its files, and they vanish with its last process, as a dead machine's memory does.
  Without root the mounts are shared (logged once); addresses and process groups still hold;
- its own session (process group leader): :meth:`LocalSparkHosts.lose_host` SIGKILLs every
  process of it (the worker, its executor JVMs, their Python daemons and workers, which pyspark
  moves to process groups of their own but not out of the session).

The pip pyspark has no ``sbin/start-*.sh``: the Master and the Workers are run as Java classes
from pyspark's ``jars/``, as ``bin/spark-class`` would.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.java import JavaServer, ManagedServer, ServerProcess, find_java, log_end, log_since
from reliable_kafka.local.ports import LOOPBACK

logger = logging.getLogger(__name__)

_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 90.0
# Big enough for the blocks a test receiver keeps in memory; tmpfs takes pages only as used.
_SHM_SIZE = "512m"
# The master binds port 0 for its RPC endpoint and its UI (the kernel picks each as it binds) and
# says which in its log. A port picked free beforehand was taken in between on a loaded machine
# (by any outgoing connection's local port): the master then moved its UI to the next port,
# silently, and the readiness probe asked the old one for 90 s.
_MASTER_URL_LINE = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI_LINE = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")


def spark_home() -> Path:
    """pyspark's install directory (its ``jars/``), found without importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterStartError("pyspark is not installed: the Spark cluster runs its jars")
    return Path(spec.origin).resolve().parent


def scala_version() -> str:
    """The Scala version of pyspark's jars (``spark-core_2.13-*.jar``): the executor launcher
    looks for build directories without it, as a pip install has none."""
    for jar in (spark_home() / "jars").glob("spark-core_*.jar"):
        return jar.name.removeprefix("spark-core_").split("-", 1)[0]
    raise ClusterStartError(f"no spark-core jar in {spark_home() / 'jars'}")


def host_address(index: int) -> str:
    """The loopback address of host ``index`` (0-based): 127.0.0.2, 127.0.0.3, ..."""
    if not 0 <= index < 250:
        raise ValueError(f"host index {index} out of range")
    return f"127.0.0.{index + 2}"


@functools.cache
def private_mounts_unavailable() -> str | None:
    """Why a host cannot have private mounts here (not root, no ``unshare``, or a container
    without the right to mount), or None when it can: tried once per process."""
    if os.geteuid() != 0:
        return "private mounts need root"
    if shutil.which("unshare") is None:
        return "no unshare command"
    with tempfile.TemporaryDirectory(prefix="reliable-kafka-mount-probe-") as probe:
        tried = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--", "mount", "-t", "tmpfs", "tmpfs", probe],
            capture_output=True,
            text=True,
            check=False,
        )
    if tried.returncode != 0:
        return f"a mount namespace with a tmpfs mount failed: {tried.stderr.strip() or tried.returncode}"
    return None


# /proc/<pid>/stat states of a process that is gone but not yet reaped.
_DEAD_STATES = frozenset({"Z", "X", "x"})
_LOSE_TIMEOUT_S = 10.0


def _session_members(session_id: int) -> list[int]:
    """Every live process whose session is ``session_id`` (a zombie is dead: its parent has not
    reaped it yet)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command (which may hold spaces), from its closing parenthesis:
        # state ppid pgrp session ...
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == session_id and fields[0] not in _DEAD_STATES:
            members.append(int(entry.name))
    return members


class SparkHost:
    """One worker and the directories of its host."""

    def __init__(self, index: int, base_dir: Path, *, cores: int, memory_mb: int, private: bool) -> None:
        self.index = index
        self.address = host_address(index)
        self.dir = base_dir / f"host-{index}"
        self.local_dir = self.dir / "local"  # SPARK_LOCAL_DIRS; a private tmpfs with root
        self.work_dir = self.dir / "work"  # executors' logs, kept on disk for after a loss
        self._cores = cores
        self._memory_mb = memory_mb
        self._private = private
        self._server: ServerProcess | None = None

    def start(self, master_url: str) -> None:
        for directory in (self.local_dir, self.work_dir):
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        java = [
            find_java(),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            # C1 only, as the brokers: a test cluster's daemon never runs long enough for C2.
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            "-cp",
            str(spark_home() / "jars" / "*"),
            _WORKER_CLASS,
            "--host",
            self.address,
            "--port",
            "0",
            "--webui-port",
            "0",  # nothing reads a worker's UI; the kernel's port cannot be taken in between
            "--cores",
            str(self._cores),
            "--memory",
            f"{self._memory_mb}m",
            "--work-dir",
            str(self.work_dir),
            master_url,
        ]
        command = java
        if self._private:
            # A mount namespace of its own: /dev/shm and the local dirs are this host's alone.
            mounts = (
                f"mount -t tmpfs -o size={_SHM_SIZE},mode=1777 tmpfs /dev/shm"
                f' && mount -t tmpfs -o mode=0700 tmpfs "{self.local_dir}"'
            )
            command = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                f'{mounts} && exec "$@"',
                "sh",
                *java,
            ]
        self._server = ServerProcess(
            f"spark worker {self.index}", command, self.dir / "worker.log", env=self._env()
        )
        self._server.start()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": str(spark_home()),
                "SPARK_SCALA_VERSION": scala_version(),
                "SPARK_LOCAL_IP": self.address,
                "SPARK_LOCAL_HOSTNAME": self.address,
                "SPARK_LOCAL_DIRS": str(self.local_dir),
                "SPARK_WORKER_DIR": str(self.work_dir),
            }
        )
        return env

    def is_running(self) -> bool:
        return self._server is not None and self._server.is_running()

    def lose(self) -> None:
        """SIGKILL every process of this host, then drop its files, as when the machine dies."""
        server = self._server
        if server is None or server.pid is None:
            return
        # SIGKILL is delivered, not done, when kill() returns, and a process forking meanwhile
        # joins the session: sweep until none is left (a test once found one just after a sweep).
        deadline = time.monotonic() + _LOSE_TIMEOUT_S
        while members := self.processes():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"host {self.index}: processes {members} outlived SIGKILL for {_LOSE_TIMEOUT_S} s"
                )
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        server.kill()  # reaps the worker
        # The private tmpfs mounts died with the namespace; the on-disk files go too.
        shutil.rmtree(self.local_dir, ignore_errors=True)

    def processes(self) -> list[int]:
        """Every live process of this host: the worker, its executors and their Python workers."""
        server = self._server
        if server is None or server.pid is None:
            return []
        return _session_members(server.pid)  # the worker leads its own session (_die_with_parent)

    def log_tail(self, lines: int = 40) -> str:
        return self._server.log_tail(lines) if self._server else ""


class LocalSparkHosts(ManagedServer):
    """A master on 127.0.0.1 and ``hosts`` workers, each a host of its own (see the module).
    As a :class:`ManagedServer`: ``with`` starts it all and stops it all (a failed or
    interrupted start too); ``kill``/``stop`` take every host down with the master."""

    DEFAULT_START_TIMEOUT_S = START_TIMEOUT_S

    def __init__(
        self,
        base_dir: Path,
        *,
        hosts: int = 2,
        cores: int = 2,
        memory_mb: int = 1024,
        private_mounts: bool | None = None,
    ) -> None:
        if hosts < 1:
            raise ValueError(f"a cluster needs at least one host, got {hosts}")
        super().__init__()
        self.base_dir = base_dir
        self._master_url: str | None = None
        self.webui_port: int | None = None
        if private_mounts is None:
            why_not = private_mounts_unavailable()
            private_mounts = why_not is None
            if why_not is not None:
                logger.warning("the hosts share /dev/shm and the local disk: %s", why_not)
        self.private_mounts = private_mounts
        self.hosts = [
            SparkHost(i, base_dir, cores=cores, memory_mb=memory_mb, private=private_mounts)
            for i in range(hosts)
        ]

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``, the port the master bound; known once :meth:`start` returns."""
        if self._master_url is None:
            raise RuntimeError("the Spark master has not started: its port is not known yet")
        return self._master_url

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        log = self.base_dir / "master.log"
        # The log is appended to: only this start's lines name its ports.
        log_start = log_end(log)
        self._server = master = JavaServer(
            "spark master",
            _MASTER_CLASS,
            str(spark_home() / "jars" / "*"),
            ["--host", LOOPBACK, "--port", "0", "--webui-port", "0"],
            log,
            jvm_options=["-XX:TieredStopAtLevel=1"],
        )
        master.start()
        master.await_ready(
            lambda: self._read_bound_ports(log, log_start) and self._state() is not None,
            "The Spark master",
            "answer",
            timeout_s,
        )
        for host in self.hosts:
            host.start(self.master_url)
        self.wait_for_workers(len(self.hosts), timeout_s)

    def _read_bound_ports(self, log: Path, log_start: int) -> bool:
        """True once the master's log (from ``log_start``) named its URL and its UI's port."""
        if self._master_url is None or self.webui_port is None:
            text = log_since(log, log_start)
            if self._master_url is None and (url := _MASTER_URL_LINE.search(text)):
                self._master_url = url.group(1)
            if self.webui_port is None and (ui := _MASTER_UI_LINE.search(text)):
                self.webui_port = int(ui.group(1))
        return self._master_url is not None and self.webui_port is not None

    def _state(self) -> dict[str, Any] | None:
        if self.webui_port is None:
            return None
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.webui_port}/json/", timeout=2) as answer:
                state: dict[str, Any] = json.load(answer)
                return state
        except (OSError, ValueError):
            # ValueError: an empty or partial answer, seen while the master's UI was starting.
            return None

    def alive_hosts(self) -> list[str]:
        """The addresses of the workers the master sees alive."""
        state = self._state() or {}
        return sorted(w["host"] for w in state.get("workers", ()) if w.get("state") == "ALIVE")

    def wait_for_workers(self, count: int, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.alive_hosts()) < count:
            dead = [h for h in self.hosts if not h.is_running()]
            if dead:
                raise ClusterStartError(
                    f"spark worker {dead[0].index} exited during start-up.", dead[0].log_tail()
                )
            if time.monotonic() > deadline:
                raise ClusterStartError(
                    f"{count} Spark workers did not register within {timeout_s:.0f} s "
                    f"(alive: {self.alive_hosts()}).",
                    self.hosts[0].log_tail(),
                )
            time.sleep(0.2)

    def lose_host(self, index: int) -> None:
        """Host ``index`` dies: its worker, executors and Python workers are SIGKILLed, its files gone."""
        self.hosts[index].lose()

    def await_host_gone(self, index: int, timeout_s: float = 60.0) -> None:
        """Until the master no longer lists host ``index`` alive (it notices the lost
        connection at once; its heartbeat timeout is the bound)."""
        deadline = time.monotonic() + timeout_s
        while self.hosts[index].address in self.alive_hosts():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the master still lists host {index} alive after {timeout_s:.0f} s")
            time.sleep(0.2)

    def restart_host(self, index: int, timeout_s: float = START_TIMEOUT_S) -> None:
        """Host ``index`` comes back (empty) and its worker registers again."""
        host = self.hosts[index]
        if host.is_running():
            host.lose()
        host.start(self.master_url)
        deadline = time.monotonic() + timeout_s
        while host.address not in self.alive_hosts():
            if time.monotonic() > deadline:
                raise ClusterStartError(f"spark worker {index} did not register again", host.log_tail())
            time.sleep(0.2)

    def stop(self) -> None:
        for host in self.hosts:
            host.lose()
        super().stop()

    def kill(self) -> None:
        for host in self.hosts:
            host.lose()
        super().kill()

"""CPU seconds of the driver's processes over a time window, from ``resource`` and Linux ``/proc``.

Three figures, because a PySpark driver is two processes and Spark's workers are more:

* ``driver_python``: this Python process (``getrusage(RUSAGE_SELF)``, user + system, every thread:
  in driver placement the receivers' threads are here; the streaming scheduler always is);
* ``driver_jvm``: the driver JVM that PySpark started as a child of this process (Spark's task
  scheduling, block manager, py4j server side), from ``/proc/<pid>/stat``;
* ``spark_others``: the live descendants of the driver JVM (executor JVMs of a ``local-cluster``
  master and the Python workers under them or under the driver JVM), counted for processes alive
  at both ends of the window or started inside it; a process that ended inside the window is lost,
  so this one is a lower bound (with ``spark.python.worker.reuse`` workers live on).

ZooKeeper and Kafka are children of this process too, but not of the driver JVM: left out.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_SPARK_SUBMIT = b"org.apache.spark.deploy.SparkSubmit"


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the fields after its last ")" do not.
    return stat.rsplit(")", 1)[1].split()


def process_cpu_s(pid: int) -> float | None:
    """utime + stime of every thread of ``pid``, or None when it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    # fields[0] is stat field 3 (state): utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    parents = _parents()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def driver_jvm_pid() -> int | None:
    """The Spark driver JVM: the child java process of this one that runs SparkSubmit (PySpark's
    gateway), told apart from the ZooKeeper and Kafka JVMs that are children too."""
    me = os.getpid()
    for pid, parent in _parents().items():
        if parent != me:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if _SPARK_SUBMIT in cmdline:
            return pid
    return None


@dataclass(frozen=True)
class CpuUsage:
    wall_s: float
    driver_python_s: float
    driver_jvm_s: float
    spark_others_s: float


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """``start()`` then ``stop()``: the CPU each group of processes used in between."""

    def __init__(self, jvm_pid: int | None, more_pids: Callable[[], Iterable[int]] | None = None) -> None:
        """``more_pids``: processes outside the driver JVM's tree counted with the others (the
        several-hosts cluster's workers, executors and their Python workers)."""
        self._jvm_pid = jvm_pid
        self._more_pids = more_pids
        self._started = 0.0
        self._python = 0.0
        self._jvm = 0.0
        self._others: dict[int, float] = {}

    def _others_now(self) -> dict[int, float]:
        pids = set() if self._jvm_pid is None else set(descendants(self._jvm_pid))
        if self._more_pids is not None:
            pids.update(self._more_pids())
        found = {}
        for pid in pids:
            cpu = process_cpu_s(pid)
            if cpu is not None:
                found[pid] = cpu
        return found

    def _jvm_now(self) -> float:
        cpu = None if self._jvm_pid is None else process_cpu_s(self._jvm_pid)
        return cpu or 0.0

    def start(self) -> None:
        self._others = self._others_now()
        self._jvm = self._jvm_now()
        self._python = _self_cpu_s()
        self._started = time.monotonic()

    def stop(self) -> CpuUsage:
        wall = time.monotonic() - self._started
        python = _self_cpu_s() - self._python
        jvm = self._jvm_now() - self._jvm
        others = sum(cpu - self._others.get(pid, 0.0) for pid, cpu in self._others_now().items())
        return CpuUsage(wall, python, jvm, others)

"""Python tasks on chosen executors: the one place that touches private PySpark/py4j surface.

PySpark has no public way to give a partition preferred locations or to name the executor a task
runs on, so this module does what Spark's ``ReceiverTracker`` does on the JVM:

* :func:`located_rdd` builds ``SparkContext.makeRDD(Seq[(bytes, Seq[location])])`` through py4j
  (one partition per element, each with its own preferred locations) and wraps it as a PySpark RDD
  whose deserializer hands each element's raw bytes to Python (nothing pickled);
* :func:`executor_locations` / :func:`wait_for_executors` list the live executors (Spark's
  ``ReceiverTracker.getExecutors`` and its dummy job);
* :func:`current_executor` / :func:`current_executor_bind_address` / :func:`task_attempt_number`
  answer, inside a Python worker, where this task runs, which address its executor's servers bind
  to, and which attempt it is.

How a worker knows its executor (:func:`current_executor`), in order:

1. Local masters (``local``, ``local[N]``): the only executor is the driver (id ``"driver"``).
   Its host is what the driver's block manager advertises (``spark.driver.host``), which a worker
   cannot compute for itself, so the driver-side functions of this module put it into the
   context's ``environment`` (the variables PySpark gives every Python worker it starts).
2. Cluster masters: Python workers are children of the executor JVM (``pyspark.daemon`` forks them
   when workers are reused), and every cluster manager starts that JVM as
   ``CoarseGrainedExecutorBackend ... --executor-id <id> --hostname <host>`` (and
   ``--bind-address <address>`` where the manager binds elsewhere than the host it advertises).
   The worker walks its ancestors through Linux ``/proc`` to the first such command line.
3. Kubernetes without a readable ``/proc``: the executor pod's ``SPARK_EXECUTOR_ID`` and
   ``SPARK_EXECUTOR_POD_IP``, which workers inherit.

Limits: step 2 needs Linux ``/proc`` and the same user as the executor (always true for its own
children); a worker of a local master whose function was shipped before any driver-side function
of this module ran has no advertised host and fails (call :func:`executor_locations` first).
Spark splits ``executor_<host>_<id>`` at the first ``_`` after the prefix, so hosts with an
underscore cannot be named this way (Spark's own limit).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pyspark import RDD, SparkContext, TaskContext
from pyspark.serializers import NoOpSerializer

logger = logging.getLogger(__name__)

DRIVER_EXECUTOR_ID = "driver"
# Underscore first: outside the RELIABLE_KAFKA_ prefix that settings read from the environment.
DRIVER_HOST_ENV = "_RELIABLE_KAFKA_DRIVER_HOST"

# Spark's ReceiverTracker.runDummySparkJob: 50 tiny tasks make a dynamically allocated cluster
# request executors; JVM-only, so no Python worker starts for it.
_DUMMY_JOB_TASKS = 50
_DUMMY_JOB_THREAD = "reliable-kafka-executor-wait"
_POLL_INTERVAL_S = 0.1
# A cancelled job's waiter returns as soon as the scheduler handles the cancellation.
_CANCEL_JOIN_S = 30.0
# How often the cancel is repeated while the waiter lives: a job not yet submitted when a cancel
# comes (the waiter thread is slow to reach the JVM on a loaded machine) is not cancelled by it.
_CANCEL_AGAIN_S = 0.5


def located_rdd(sc: SparkContext, elements: Sequence[tuple[bytes, Sequence[str]]]) -> RDD[bytes]:
    """One partition per element, computed where its location strings prefer.

    A location is a Spark task-location string: ``executor_<host>_<executorId>`` (that executor),
    a plain host (any executor there), or none (anywhere). Each partition yields its element's
    bytes unchanged, so ``mapPartitions``/``map`` on the result pipeline in one Python worker.

    Spark's delay scheduling decides, not this function: a task waits ``spark.locality.wait``
    (3 s) per locality level for a free core on its executor, then runs elsewhere on the host,
    then anywhere. And when some partition of the same RDD prefers nothing, Spark's NO_PREF pass
    also hands out host-local tasks at once, so a partition may run on another executor of its
    preferred host. A one-element RDD (a receiver) runs where it says unless that executor has
    no free core for longer than the wait.
    """
    _advertise_driver_host(sc)
    if not elements:
        return sc.emptyRDD()
    jvm = sc._jvm
    assert jvm is not None
    # Each ``jvm.a.b.C`` lookup is a round trip per name part: resolve them once per call, not
    # once per partition (a batch has a partition per block).
    to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
    array_list = jvm.java.util.ArrayList
    tuple2 = jvm.scala.Tuple2
    pairs = array_list()
    for data, locations in elements:
        if not isinstance(data, bytes):
            raise TypeError(f"located_rdd elements must be bytes, got {type(data).__name__}")
        java_locations = array_list()
        for location in locations:
            java_locations.add(str(location))
        pairs.add(tuple2(data, to_seq(java_locations)))
    # makeRDD(Seq[(T, Seq[String])]) is the one SparkContext call that takes per-element
    # locations; its ClassTag argument is the implicit Scala passes for T = Array[Byte].
    byte_array_tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B"))
    jrdd = sc._jsc.sc().makeRDD(to_seq(pairs), byte_array_tag)
    # PythonRDD writes each Array[Byte] as one length-prefixed frame: NoOpSerializer's framing.
    return RDD(jrdd.toJavaRDD(), sc, NoOpSerializer())


def executor_locations(sc: SparkContext) -> list[tuple[str, str]]:
    """Live ``(host, executor_id)`` pairs, sorted; the driver only on a local master.

    Like Spark's ``ReceiverTracker.getExecutors``: a local master has exactly one executor, the
    driver; a cluster master's driver runs no tasks and is left out.
    """
    jsc = sc._jsc.sc()
    if jsc.isLocal():
        return [(_advertise_driver_host(sc), DRIVER_EXECUTOR_ID)]
    # The scheduler's live executors (what tasks can be offered to) joined with the hosts the
    # status store knows; an executor is listed once both have seen it register.
    ids = jsc.getExecutorIds()
    live = {str(ids.apply(i)) for i in range(ids.size())}
    summaries = jsc.statusStore().executorList(True)
    found = set()
    for i in range(summaries.size()):
        summary = summaries.apply(i)
        executor_id, host_port = str(summary.id()), summary.hostPort()
        if executor_id in live and host_port:
            found.add((str(host_port).rsplit(":", 1)[0], executor_id))
    return sorted(found, key=lambda pair: (pair[0], _numeric_first(pair[1])))


def executor_cores(sc: SparkContext) -> int:
    """The cores of the live executors, added up (a cluster master's driver runs no tasks and is
    left out); 0 on a local master, whose task threads are its master URL's business."""
    jsc = sc._jsc.sc()
    if jsc.isLocal():
        return 0
    summaries = jsc.statusStore().executorList(True)
    return sum(
        int(summary.totalCores())
        for summary in (summaries.apply(i) for i in range(summaries.size()))
        if str(summary.id()) != DRIVER_EXECUTOR_ID
    )


def available_processors(sc: SparkContext) -> int:
    """The driver JVM's processors: what ``local[*]`` means (Spark's own count, not Python's)."""
    jvm = sc._jvm
    assert jvm is not None
    return int(jvm.java.lang.Runtime.getRuntime().availableProcessors())


def wait_for_executors(sc: SparkContext, min_executors: int, timeout_s: float) -> list[tuple[str, str]]:
    """The live executors once at least ``min_executors`` are there, or whatever is there after
    ``timeout_s`` (Spark schedules receivers on what it has; the caller decides if too few).

    Runs a small JVM-only job first, as Spark's ReceiverTracker does, so that dynamic allocation
    asks for executors, then polls; the job is cancelled if it still waits for executors when
    this returns.
    """
    if sc._jsc.sc().isLocal():
        return executor_locations(sc)
    found = executor_locations(sc)
    if len(found) >= min_executors:
        return found  # already there (a restarted context): no dummy job, no second of waiting
    deadline = time.monotonic() + timeout_s
    group = f"reliable-kafka-executors-{uuid.uuid4().hex}"
    dummy = threading.Thread(target=_run_dummy_job, args=(sc, group), name=_DUMMY_JOB_THREAD, daemon=True)
    dummy.start()
    # Spark polls only after the dummy job: it ends once executors ran its tasks.
    dummy.join(max(0.0, deadline - time.monotonic()))
    while True:
        found = executor_locations(sc)
        if len(found) >= min_executors or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_INTERVAL_S)
    cancel_deadline = time.monotonic() + _CANCEL_JOIN_S
    while dummy.is_alive() and time.monotonic() < cancel_deadline:
        # No executor came to run it; left alone it would hold a thread until one does.
        sc.cancelJobGroup(group)
        dummy.join(_CANCEL_AGAIN_S)
    if len(found) < min_executors:
        logger.warning(
            "Only %d of %d executors registered within %.1f s", len(found), min_executors, timeout_s
        )
    return found


def current_executor() -> tuple[str, str]:
    """Inside a Python worker: the ``(host, executor_id)`` of the executor running it.

    Constant for the life of a worker process, so it is worked out once (see the module
    docstring for how, and its limits). Raises ``RuntimeError`` when no method applies.
    """
    host, executor_id, _ = _current_executor()
    return host, executor_id


def task_attempt_number() -> int:
    """Inside a task: how many times it ran before (0 on the first attempt)."""
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("task_attempt_number() called outside a Spark task")
    return context.attemptNumber()


def current_executor_bind_address() -> str:
    """Inside a Python worker: the address its executor's servers bind to, as Spark's executor
    backend binds its own (``--bind-address``, else the host it advertises)."""
    return _current_executor()[2]


@functools.cache
def _current_executor() -> tuple[str, str, str]:
    """``(host, executor_id, bind_address)``."""
    driver_host = os.environ.get(DRIVER_HOST_ENV)
    if driver_host:
        return driver_host, DRIVER_EXECUTOR_ID, driver_host
    for argv in _ancestor_command_lines():
        executor = _executor_backend_arguments(argv)
        if executor is not None:
            return executor
    pod_id, pod_ip = os.environ.get("SPARK_EXECUTOR_ID"), os.environ.get("SPARK_EXECUTOR_POD_IP")
    if pod_id and pod_ip:
        return pod_ip, pod_id, pod_ip
    raise RuntimeError(
        "cannot tell which executor this process runs under: no ancestor executor JVM in /proc, "
        f"no {DRIVER_HOST_ENV} (local masters: call located_rdd or executor_locations on the "
        "driver before shipping the function)"
    )


def _executor_backend_arguments(argv: Sequence[str]) -> tuple[str, str, str] | None:
    """``(host, executor_id, bind_address)`` from an executor backend's command line."""
    if "--executor-id" not in argv or "--hostname" not in argv:
        return None
    try:
        executor_id = argv[argv.index("--executor-id") + 1]
        host = argv[argv.index("--hostname") + 1]
        bind_address = argv[argv.index("--bind-address") + 1] if "--bind-address" in argv else host
    except IndexError:
        return None
    return host, executor_id, bind_address


def _ancestor_command_lines() -> Iterator[list[str]]:
    """The argv of each ancestor process, nearest first; nothing where /proc is not there."""
    pid = os.getppid()
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        proc = Path("/proc") / str(pid)
        try:
            argv = proc.joinpath("cmdline").read_bytes().split(b"\0")
            stat = proc.joinpath("stat").read_text()
        except OSError:
            return
        yield [arg.decode(errors="replace") for arg in argv if arg]
        # The command name in stat may hold spaces and parentheses; the fields after it do not.
        pid = int(stat.rsplit(")", 1)[1].split()[1])


def _advertise_driver_host(sc: SparkContext) -> str:
    """On a local master, the driver executor's host, also put where every later Python worker
    of this context finds it (:func:`current_executor` cannot work it out for itself)."""
    jsc = sc._jsc.sc()
    if not jsc.isLocal():
        return ""
    # The host Spark's block manager registers the driver with, as the ReceiverTracker uses.
    host = str(jsc.getConf().get("spark.driver.host"))
    sc.environment[DRIVER_HOST_ENV] = host
    return host


def _run_dummy_job(sc: SparkContext, group: str) -> None:
    try:
        sc.setJobGroup(group, "reliable-kafka: wait for executors", interruptOnCancel=False)
        sc._jsc.sc().range(0, _DUMMY_JOB_TASKS, 1, _DUMMY_JOB_TASKS).count()
    except Exception as exc:  # cancelled on purpose, or the context stopped
        logger.debug("Executor wait job ended early: %s", exc)


def _numeric_first(executor_id: str) -> tuple[int, Any]:
    return (0, int(executor_id)) if executor_id.isdigit() else (1, executor_id)

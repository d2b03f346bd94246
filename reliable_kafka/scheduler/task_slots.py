"""Task slots: how many an application has, and how many its receivers may hold.

A receiver is a task that never ends: it holds one task slot (``spark.task.cpus`` cores) for the
life of the stream. When receivers hold every slot, no batch task ever runs: records are received
and committed, and nothing is output, with no error anywhere (Spark's most asked streaming
question; Spark only documents it). The rules here:

* **Local masters** (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``): receivers take at most
  ``slots - 1`` slots as tasks; the others run in the driver's Python process (driver placement),
  where they hold no slot. The driver process is the executor's process there anyway, so nothing is
  lost by it but the receivers' own worker processes. Logged once at INFO with the arithmetic.
* **Cluster masters**: when the application's cores are known before executors register
  (``local-cluster[N,C,M]``, ``spark.cores.max``, ``spark.executor.instances`` x
  ``spark.executor.cores``), ``start()`` fails if receivers need every slot, naming both numbers
  and the fixes; with dynamic allocation on (executors may come) or a count only measured from the
  executors registered so far (more may come), it is a WARNING instead.

While running, :class:`~reliable_kafka.scheduler.slot_watch.SlotWatch` reports batches that wait
for a slot anyway (executors lost, cores taken by other jobs).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reliable_kafka.util.located_rdd import available_processors, executor_cores

if TYPE_CHECKING:
    from pyspark import SparkContext

logger = logging.getLogger(__name__)

_LOCAL = re.compile(r"local(?:\[\s*(\*|\d+)\s*(?:,\s*\d+\s*)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]")

FIXES = (
    "give the application more cores than it has receivers (local[N], spark.cores.max, "
    "spark.executor.instances x spark.executor.cores), read several topics with one createStream "
    "instead of one stream each, or run the receivers in the driver process "
    "(spark.streaming.receiver.placement=driver)"
)


class ReceiverSlotsError(ValueError):
    """The receivers would hold every task slot: no batch could ever run."""


@dataclass(frozen=True, slots=True)
class TaskSlots:
    """``cores // task_cpus`` task slots, as ``master`` gives them; ``declared``: known from the
    master URL or the configuration, not only measured from the executors registered so far."""

    master: str
    cores: int
    task_cpus: int
    local: bool
    declared: bool
    dynamic_allocation: bool

    @property
    def slots(self) -> int:
        return self.cores // self.task_cpus

    def describe(self) -> str:
        per_task = "" if self.task_cpus == 1 else f" / spark.task.cpus {self.task_cpus}"
        where = self.master if self.declared else f"{self.master}, executors registered so far"
        return f"{self.slots} task slot(s) ({self.cores} core(s){per_task}, {where})"


def local_master_cores(master: str, processors: int) -> int | None:
    """The task threads of a local master URL (``local[*]``: ``processors``); None otherwise."""
    match = _LOCAL.fullmatch(master.strip())
    if match is None:
        return None
    threads = match.group(1)
    if threads is None:
        return 1
    return processors if threads == "*" else int(threads)


def declared_cluster_cores(master: str, conf: dict[str, str]) -> int | None:
    """The cores a cluster master's application is given, where the URL or the configuration says
    so before any executor registers; None where only the registered executors can tell."""
    match = _LOCAL_CLUSTER.fullmatch(master.strip())
    if match is not None:
        return int(match.group(1)) * int(match.group(2))
    if conf.get("spark.cores.max"):
        return int(conf["spark.cores.max"])
    instances, cores = conf.get("spark.executor.instances"), conf.get("spark.executor.cores")
    if instances and cores:
        return int(instances) * int(cores)
    return None


def task_slots(sc: SparkContext) -> TaskSlots:
    """The application's task slots now (cluster masters without a declared count: the cores of
    the executors registered so far)."""
    conf = dict(sc.getConf().getAll())
    master = sc.master
    task_cpus = max(1, int(conf.get("spark.task.cpus", "1")))
    dynamic = conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() == "true"
    local = local_master_cores(master, available_processors(sc))
    if local is not None:
        return TaskSlots(master, local, task_cpus, local=True, declared=True, dynamic_allocation=False)
    declared = declared_cluster_cores(master, conf)
    cores = declared if declared is not None else executor_cores(sc)
    return TaskSlots(
        master, cores, task_cpus, local=False, declared=declared is not None, dynamic_allocation=dynamic
    )


def live_slots(sc: SparkContext) -> int:
    """The slots of the executors alive now (a local master: its task threads)."""
    slots = task_slots(sc)
    if slots.local:
        return slots.slots
    return executor_cores(sc) // slots.task_cpus


def split_local_receivers(stream_ids: Sequence[int], slots: TaskSlots) -> tuple[list[int], list[int]]:
    """Local masters: ``(as tasks, in the driver process)``, so that one slot stays for batches;
    the first streams (by id) run as tasks."""
    as_tasks = max(0, slots.slots - 1)
    ids = sorted(stream_ids)
    on_executors, in_driver = ids[:as_tasks], ids[as_tasks:]
    if in_driver:
        logger.info(
            "%s has %s; %d receiver(s) as tasks would leave none for batches: receiver(s) %s run "
            "as tasks (%d slot(s)) and %s in the driver process, leaving %d slot(s) for batches",
            slots.master,
            slots.describe(),
            len(ids),
            _ids(on_executors) or "none",
            len(on_executors),
            _ids(in_driver),
            slots.slots - len(on_executors),
        )
    return on_executors, in_driver


def check_cluster_receivers(receivers: int, slots: TaskSlots) -> None:
    """Cluster masters: raise when ``receivers`` would hold every slot for certain; warn when
    executors may yet come (dynamic allocation, or a count of the executors registered so far)."""
    if receivers < slots.slots:
        return
    message = (
        f"{receivers} receiver(s) each hold a task slot for the life of the stream, and the "
        f"application has {slots.describe()}: no slot would be left to run batches"
    )
    if slots.declared and not slots.dynamic_allocation:
        raise ReceiverSlotsError(f"{message}. To fix it, {FIXES}.")
    why = (
        "dynamic allocation may add executors"
        if slots.dynamic_allocation
        else "more executors may still register"
    )
    logger.warning("%s unless %s; starting anyway. Otherwise %s.", message, why, FIXES)


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids))

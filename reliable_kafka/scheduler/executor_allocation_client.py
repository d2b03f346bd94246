"""Spark's ``ExecutorAllocationClient`` as streaming dynamic allocation uses it, over py4j.

Three calls, the ones Spark's streaming ``ExecutorAllocationManager`` makes on its client:

* the live executors: ``SparkContext.getExecutorIds()`` (the scheduler backend's executors);
* a new total: ``SparkContext.requestTotalExecutors(n, 0, Map())``, an absolute target, so that a
  request repeated while executors are on their way asks for nothing more (``requestExecutors(n)``
  adds to a target the backend may never have had: on a standalone master the first call would
  set the application's executor limit to ``n``);
* removing one: the scheduler backend's ``killExecutors([id], adjustTargetNumExecutors=true,
  countFailures=false, force=false)``, as Spark's ``client.killExecutor(id)`` does: the target
  drops with it (the cluster manager does not replace it), and a busy executor (running a task)
  is left alone rather than killed under its task. ``SparkContext.killExecutor`` forces.

All three exist with these signatures in Spark 3.5 and 4.x (``private[spark]`` in Scala, public
in the bytecode py4j calls). On a standalone master a new total becomes the application's
executor limit: the master launches executors up to it where workers have free cores and memory
(``spark.executor.cores`` and ``spark.executor.memory`` decide how many fit on a worker), and a
removed executor's resources go back to its worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from reliable_kafka.util.located_rdd import DRIVER_EXECUTOR_ID

if TYPE_CHECKING:
    from pyspark import SparkContext


class ExecutorAllocationClient(Protocol):
    """What the allocation manager asks of the cluster."""

    def executor_ids(self) -> list[str]:
        """The live executors (never the driver)."""
        ...

    def executor_cores(self) -> Mapping[str, int]:
        """Cores of each live executor the status store knows (a new one may be missing)."""
        ...

    def request_total_executors(self, total: int) -> bool:
        """Ask the cluster manager for ``total`` executors in all; False if it refused."""
        ...

    def kill_executor(self, executor_id: str) -> bool:
        """Remove one executor, lowering the target with it; False if not removed (busy, gone)."""
        ...


class SparkExecutorAllocationClient:
    """The SparkContext's own allocation client (its scheduler backend), reached through py4j."""

    def __init__(self, sc: SparkContext) -> None:
        self._sc = sc

    def executor_ids(self) -> list[str]:
        ids = self._sc._jsc.sc().getExecutorIds()
        return [str(ids.apply(i)) for i in range(ids.size()) if str(ids.apply(i)) != DRIVER_EXECUTOR_ID]

    def executor_cores(self) -> Mapping[str, int]:
        summaries = self._sc._jsc.sc().statusStore().executorList(True)
        cores = {}
        for i in range(summaries.size()):
            summary = summaries.apply(i)
            if str(summary.id()) != DRIVER_EXECUTOR_ID:
                cores[str(summary.id())] = int(summary.totalCores())
        return cores

    def request_total_executors(self, total: int) -> bool:
        jvm = self._sc._jvm
        assert jvm is not None
        no_locality = jvm.PythonUtils.toScalaMap({})
        return bool(self._sc._jsc.sc().requestTotalExecutors(total, 0, no_locality))

    def kill_executor(self, executor_id: str) -> bool:
        jvm = self._sc._jvm
        assert jvm is not None
        backend = self._sc._jsc.sc().schedulerBackend()
        killed = backend.killExecutors(jvm.PythonUtils.toSeq([executor_id]), True, False, False)
        return bool(killed.nonEmpty())

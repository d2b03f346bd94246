"""The settings of streaming dynamic allocation, checked at ``start()`` when it is enabled.

Spark checks most of these when its ``ExecutorAllocationManager`` is built in
``JobScheduler.start``; here they come first in ``StreamingContext.start()``, before a receiver
is launched, and each error names the Spark keys to change. What differs from Spark: a ratio
must lie in (0, 1) (Spark only wants it positive), and a local master is refused, where Spark
silently runs no manager (it has no executors to add or remove).
"""

from __future__ import annotations

from collections.abc import Mapping

from reliable_kafka.scheduler.task_slots import local_master_cores
from reliable_kafka.settings import DynamicAllocationSettings

_KEY = "spark.streaming.dynamicAllocation"


class DynamicAllocationError(ValueError):
    """Streaming dynamic allocation cannot run as configured."""


def check_dynamic_allocation(
    settings: DynamicAllocationSettings, conf: Mapping[str, str], master: str
) -> None:
    """Raise :class:`DynamicAllocationError` naming the problem and the keys to change; nothing
    when ``spark.streaming.dynamicAllocation.enabled`` is off."""
    if not settings.enabled:
        return
    problems = _problems(settings, conf, master)
    if problems:
        raise DynamicAllocationError(
            f"{_KEY}.enabled is true, but "
            + "; ".join(problems)
            + f" (turn {_KEY}.enabled off to start anyway)"
        )


def _problems(settings: DynamicAllocationSettings, conf: Mapping[str, str], master: str) -> list[str]:
    problems = []
    if local_master_cores(master, 1) is not None:
        problems.append(
            f"the master is {master}, a local master: its only executor is the driver, so no executor "
            "can be added or removed; use a cluster master (standalone, YARN, Kubernetes)"
        )
    if conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() == "true":
        # As Spark: the core policy removes idle executors, and a receiver's executor with its
        # blocks is never idle by its measure, but its other executors' blocks may be lost.
        problems.append(
            "spark.dynamicAllocation.enabled (core dynamic allocation) is true too: both would "
            "add and remove executors; set spark.dynamicAllocation.enabled=false"
        )
    if int(conf.get("spark.executor.instances", "0") or 0) != 0:
        problems.append(
            "spark.executor.instances is set: a fixed number of executors; leave it unset "
            f"(use {_KEY}.minExecutors and maxExecutors)"
        )
    low, high = settings.min_executors, settings.max_executors
    if low is not None and low < 1:
        problems.append(f"{_KEY}.minExecutors is {low}, must be at least 1")
    if high is not None and high < 1:
        problems.append(f"{_KEY}.maxExecutors is {high}, must be at least 1")
    if low is not None and high is not None and low > high:
        problems.append(f"{_KEY}.minExecutors ({low}) is more than {_KEY}.maxExecutors ({high})")
    up, down = settings.scaling_up_ratio, settings.scaling_down_ratio
    for name, ratio in (("scalingUpRatio", up), ("scalingDownRatio", down)):
        if not 0 < ratio < 1:
            problems.append(f"{_KEY}.{name} is {ratio}, must be between 0 and 1 (exclusive)")
    if down >= up:
        problems.append(
            f"{_KEY}.scalingDownRatio ({down}) must be less than {_KEY}.scalingUpRatio ({up}), "
            "or one load would both add and remove executors"
        )
    return problems

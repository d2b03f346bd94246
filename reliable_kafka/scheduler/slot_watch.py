"""Reports batches that wait for a task slot while receivers hold them (see ``task_slots``).

``start()`` keeps a local master's receivers off the last slot and refuses a cluster that is
known to be too small, but slots can still run out while the stream runs: executors are lost,
dynamic allocation has not added any yet, another job of the application takes the cores. Spark
then says nothing at all; batches queue up behind tasks that never end.

Every batch interval the watch asks Spark's status tracker about the streaming jobs running now:
a batch job with tasks waiting, none of them running, while the application's running tasks fill
every slot, is waiting for a slot. Seen at :data:`STREAK` checks in a row (so the batch has waited
longer than its batch interval several times over, which ``spark.locality.wait`` alone cannot
cause), it is reported once: a WARNING naming the receivers and the slots, and a
:class:`StreamingListenerStreamingError` for the listeners and the status page. It is reported
again only after batch tasks have run in between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reliable_kafka.scheduler.listener_events import StreamingListenerStreamingError
from reliable_kafka.scheduler.task_slots import FIXES, live_slots
from reliable_kafka.util.recurring_timer import RecurringTimer

if TYPE_CHECKING:
    from pyspark import SparkContext

    from reliable_kafka.util.clock import Clock

logger = logging.getLogger(__name__)

STREAK = 3


@dataclass(frozen=True, slots=True)
class SlotUse:
    """One look at the running streaming jobs and the application's slots."""

    waiting_batch_tasks: int
    running_batch_tasks: int
    running_tasks: int  # every job's, receivers' included
    slots: int

    @property
    def batch_waits_for_slot(self) -> bool:
        return (
            self.waiting_batch_tasks > 0
            and self.running_batch_tasks == 0
            and self.running_tasks >= self.slots
        )


class SlotStarvation:
    """The streak rule, apart from Spark: feed it one :class:`SlotUse` per batch interval (None:
    no streaming job running); it returns the message to report, once per streak."""

    def __init__(self, period_ms: int, receivers: Callable[[], int], streak: int = STREAK) -> None:
        self._period_ms = period_ms
        self._receivers = receivers
        self._streak = streak
        self._seen = 0

    @property
    def starved(self) -> bool:
        """Batches have waited for a slot at ``streak`` checks in a row, up to the last one."""
        return self._seen >= self._streak

    def observe(self, use: SlotUse | None) -> str | None:
        if use is None or not use.batch_waits_for_slot:
            self._seen = 0
            return None
        self._seen += 1
        if self._seen != self._streak:
            return None
        return (
            f"Batches are waiting for task slots: no batch task has run for {self._streak} batch "
            f"intervals ({self._period_ms} ms each) while {use.running_tasks} running task(s) hold "
            f"all {use.slots} task slot(s); {self._receivers()} of them are receivers, which never "
            f"end. To fix it, {FIXES}"
        )


def probe_slot_use(sc: SparkContext, job_group: str) -> SlotUse | None:
    """What Spark's status tracker says of the jobs of ``job_group`` now (None: none running)."""
    status = sc.statusTracker()
    in_group = set(status.getJobIdsForGroup(job_group))
    jobs = [job_id for job_id in status.getActiveJobsIds() if job_id in in_group]
    if not jobs:
        return None
    waiting = running = 0
    for job_id in jobs:
        job = status.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = status.getStageInfo(stage_id)
            if stage is None:
                continue
            running += stage.numActiveTasks
            waiting += max(0, stage.numTasks - stage.numActiveTasks - stage.numCompletedTasks)
    stages = (status.getStageInfo(stage_id) for stage_id in status.getActiveStageIds())
    all_running = sum(stage.numActiveTasks for stage in stages if stage is not None)
    return SlotUse(waiting, running, all_running, live_slots(sc))


class SlotWatch:
    """Checks every ``period_ms`` on a timer thread; ``post`` delivers the listener event."""

    def __init__(
        self,
        sc: SparkContext,
        job_group: str,
        *,
        receivers: Callable[[], int],
        post: Callable[[StreamingListenerStreamingError], None],
        clock: Clock,
        period_ms: int,
    ) -> None:
        self._sc = sc
        self._job_group = job_group
        self._post = post
        self._clock = clock
        self._period_ms = period_ms
        self._receivers = receivers
        self._rule = SlotStarvation(period_ms, receivers)
        self._timer = RecurringTimer(clock, period_ms, self._check, "SlotWatch")

    @property
    def period_s(self) -> float:
        return self._period_ms / 1000

    def start(self) -> None:
        self._timer.start()

    def starved_streak(self) -> Callable[[], bool]:
        """A fresh streak, checked once per call: True once batches waited at ``STREAK`` calls
        in a row (a graceful stop asks this instead of waiting for batches that cannot run)."""
        rule = SlotStarvation(self._period_ms, self._receivers)

        def starved() -> bool:
            try:
                rule.observe(probe_slot_use(self._sc, self._job_group))
            except Exception as exc:
                logger.debug("Could not read Spark's task status: %r", exc)
            return rule.starved

        return starved

    def stop(self) -> None:
        self._timer.stop(interrupt_timer=True)

    def _check(self, _time_ms: int) -> None:
        try:
            use = probe_slot_use(self._sc, self._job_group)
        except Exception as exc:  # a stopping SparkContext; the next tick asks again
            logger.debug("Could not read Spark's task status: %r", exc)
            return
        message = self._rule.observe(use)
        if message is not None:
            logger.warning("%s", message)
            self._post(StreamingListenerStreamingError(self._clock.get_time_ms(), message))

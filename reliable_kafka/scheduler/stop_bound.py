"""How long a stop of the streams may take: one figure, named the same way by every message.

An immediate stop waits at most ``spark.streaming.stopTimeout`` for receivers, connectors, the
write-ahead logs and the jobs it leaves. A graceful one first processes what was received, for
``spark.streaming.gracefulStopTimeout`` (ten batch durations unless set: Spark's default), then
has the same ``stopTimeout`` for the rest; the jobs already submitted run on within that sum,
as Spark's job executor runs them on after its generator's timeout. The stop announces this bound
when it begins, the scheduler stops waiting for batches in time to end within it, and what is
given up at the end names the same bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from reliable_kafka.scheduler.job_generator import graceful_stop_timeout_ms
from reliable_kafka.settings import JobSettings
from reliable_kafka.util.bounded_stop import seconds


@dataclass(frozen=True, slots=True)
class StopBound:
    drain_ms: int  # spark.streaming.gracefulStopTimeout; 0 for an immediate stop
    stop_ms: int  # spark.streaming.stopTimeout

    @classmethod
    def of(cls, jobs: JobSettings, batch_duration_ms: int, graceful: bool) -> StopBound:
        drain_ms = graceful_stop_timeout_ms(jobs, batch_duration_ms) if graceful else 0
        return cls(drain_ms, jobs.stop_timeout_ms)

    @property
    def total_ms(self) -> int:
        return self.drain_ms + self.stop_ms

    def __str__(self) -> str:
        """``40 s (spark.streaming.gracefulStopTimeout 20 s + spark.streaming.stopTimeout 20 s)``."""
        if not self.drain_ms:
            return f"{seconds(self.stop_ms)} (spark.streaming.stopTimeout)"
        return (
            f"{seconds(self.total_ms)} (spark.streaming.gracefulStopTimeout {seconds(self.drain_ms)}"
            f" + spark.streaming.stopTimeout {seconds(self.stop_ms)})"
        )

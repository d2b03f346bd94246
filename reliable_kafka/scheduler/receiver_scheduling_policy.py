"""Spark's ``ReceiverSchedulingPolicy``: where receivers should run, plus the tracking records
(``ReceiverTrackingInfo``) and task locations it reasons about.

Two entry points, as in Spark:

* :meth:`ReceiverSchedulingPolicy.schedule_receivers` when the tracker starts: spread all
  receivers evenly over the executors, each receiver's preferred host honoured;
* :meth:`ReceiverSchedulingPolicy.reschedule_receiver` when one receiver must start again:
  its preferred host plus the idle executors, or, with none idle, the least loaded ones.

A receiver may end up with several candidate locations; registration accepts it on any of them.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HostTaskLocation:
    """Any executor on a host (Spark's ``HostTaskLocation``)."""

    host: str

    def __str__(self) -> str:
        return self.host


@dataclass(frozen=True, slots=True)
class ExecutorCacheTaskLocation:
    """One executor (Spark's ``ExecutorCacheTaskLocation``)."""

    host: str
    executor_id: str

    def __str__(self) -> str:
        return f"executor_{self.host}_{self.executor_id}"


TaskLocation = HostTaskLocation | ExecutorCacheTaskLocation


def accepts(locations: Sequence[TaskLocation], host: str, executor_id: str) -> bool:
    """Whether a receiver registering from ``(host, executor_id)`` runs where it was scheduled."""
    for location in locations:
        if isinstance(location, ExecutorCacheTaskLocation):
            if location.executor_id == executor_id and location.host == host:
                return True
        elif location.host == host:
            return True
    return False


class ReceiverState(enum.Enum):
    INACTIVE = "INACTIVE"
    SCHEDULED = "SCHEDULED"
    ACTIVE = "ACTIVE"


@dataclass(frozen=True, slots=True)
class ReceiverErrorInfo:
    last_error_message: str = ""
    last_error: str = ""
    last_error_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class ReceiverTrackingInfo:
    """What the tracker knows about one receiver (Spark's ``ReceiverTrackingInfo``)."""

    receiver_id: int
    state: ReceiverState
    scheduled_locations: tuple[TaskLocation, ...] | None = None
    running_executor: ExecutorCacheTaskLocation | None = None
    name: str | None = None
    error_info: ReceiverErrorInfo | None = None
    # Not in Spark (its receivers are always tasks): how the running receiver runs, "task" or
    # "driver process" (``listener_events.RUNS_AS_*``); "" while none runs.
    runs_as: str = ""

    def with_state(self, state: ReceiverState, **changes: object) -> ReceiverTrackingInfo:
        return replace(self, state=state, **changes)  # type: ignore[arg-type]


class SchedulableReceiver(Protocol):
    """The two things scheduling needs from a receiver."""

    @property
    def stream_id(self) -> int: ...

    @property
    def preferred_location(self) -> str | None: ...


class ReceiverSchedulingPolicy:
    def schedule_receivers(
        self, receivers: Sequence[SchedulableReceiver], executors: Sequence[ExecutorCacheTaskLocation]
    ) -> dict[int, list[TaskLocation]]:
        """Candidate locations per stream id, balancing receivers over executors.

        Receivers with a preferred host get the least loaded executor on that host (or the bare
        host when no executor runs there yet: it may come up later); the others get the least
        loaded executor overall; finally every idle executor goes to the receiver with fewest
        candidates, so a receiver that fails can restart somewhere unused.
        """
        if not receivers:
            return {}
        if not executors:
            return {r.stream_id: [] for r in receivers}
        host_to_executors: dict[str, list[ExecutorCacheTaskLocation]] = {}
        for executor in executors:
            host_to_executors.setdefault(executor.host, []).append(executor)
        # Executor order decides ties, so the result is deterministic.
        load: dict[ExecutorCacheTaskLocation, int] = dict.fromkeys(executors, 0)
        scheduled: list[list[TaskLocation]] = [[] for _ in receivers]

        for i, receiver in enumerate(receivers):
            host = receiver.preferred_location
            if host is None:
                continue
            on_host = host_to_executors.get(host)
            if on_host:
                least = min(on_host, key=load.__getitem__)
                scheduled[i].append(least)
                load[least] += 1
            else:
                scheduled[i].append(HostTaskLocation(host))

        for locations in scheduled:
            if not locations:
                least = min(load, key=load.__getitem__)
                locations.append(least)
                load[least] += 1

        for executor in [e for e, n in load.items() if n == 0]:
            min(scheduled, key=len).append(executor)

        return {r.stream_id: locations for r, locations in zip(receivers, scheduled, strict=True)}

    def reschedule_receiver(
        self,
        receiver_id: int,
        preferred_location: str | None,
        receiver_tracking_info_map: Mapping[int, ReceiverTrackingInfo],
        executors: Sequence[ExecutorCacheTaskLocation],
    ) -> list[TaskLocation]:
        """Candidates for one receiver: its preferred host, then idle or least weighted executors.

        An executor's weight is the receivers running on it (1 each) plus the share of each
        scheduled receiver that may land on it (1 / its number of candidates).
        """
        if not executors:
            return []
        candidates: list[TaskLocation] = []
        if preferred_location is not None:
            candidates.append(HostTaskLocation(preferred_location))

        weights: dict[ExecutorCacheTaskLocation, float] = {}
        for info in receiver_tracking_info_map.values():
            for executor, weight in _executor_weights(info):
                weights[executor] = weights.get(executor, 0.0) + weight

        idle = [e for e in executors if e not in weights]
        if idle:
            candidates.extend(idle)
        elif weights:
            min_weight = min(weights.values())
            candidates.extend(
                e for e, w in sorted(weights.items(), key=lambda item: item[1]) if w == min_weight
            )
        return list(dict.fromkeys(candidates))


def _executor_weights(info: ReceiverTrackingInfo) -> list[tuple[ExecutorCacheTaskLocation, float]]:
    if info.state is ReceiverState.ACTIVE and info.running_executor is not None:
        return [(info.running_executor, 1.0)]
    if info.state is ReceiverState.SCHEDULED and info.scheduled_locations:
        # A receiver scheduled on n candidates runs on each with probability 1/n.
        share = 1.0 / len(info.scheduled_locations)
        return [
            (loc, share) for loc in info.scheduled_locations if isinstance(loc, ExecutorCacheTaskLocation)
        ]
    return []

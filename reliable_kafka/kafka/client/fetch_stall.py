"""A receiver whose consumers cannot fetch says so, instead of waiting in silence.

librdkafka rides out broker outages by retrying forever, which is right for a restart but leaves a
receiver that never reaches its brokers (a wrong address, a firewall, a pre-0.10 broker asked for
``ApiVersionRequest``) looking healthy: no record, no error. Each partition consumer owns a
:class:`FetchWatch`; when its partition has been quiet for a probe interval, the watch asks the
consumer to probe the partition's leader (its log range). A partition is stalled while probes fail,
or while they show records past the consumer's position that never arrive.

State machine of one receiver's :class:`FetchStallMonitor`: *healthy* -> (a partition stalled for
``fetch.stall.timeout.ms``) -> *reported*: one ERROR line and one ``onReceiverError`` naming the
brokers and the likely cause -> (every stalled partition fetched or probed fine again) ->
*healthy*, logged at INFO. Consumers keep retrying throughout: a stall is reported, never fatal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

logger = logging.getLogger(__name__)

# The kafkaParams key: how long a partition may go without a fetch before the receiver reports it.
FETCH_STALL_TIMEOUT_PARAM = "fetch.stall.timeout.ms"
DEFAULT_FETCH_STALL_TIMEOUT_MS = 60_000
# Probes only run on quiet partitions; a few per stall window tell a stall from a pause, and a
# busy cluster with many idle partitions sees at most one log-range request per partition per 10 s.
_PROBES_PER_TIMEOUT = 4
_MAX_PROBE_INTERVAL_S = 10.0

# What a probe of a partition found: None when the partition's leader answered and nothing is
# waiting beyond the consumer's position, else why the partition cannot be fetched.
Probe = Callable[[], str | None]
ErrorReporter = Callable[[str, BaseException], None]


class FetchStallError(RuntimeError):
    """Reported (never raised) when a receiver's partitions could not be fetched for a while."""


@dataclass
class _Stall:
    since: float
    brokers: str
    cause: str


class FetchStallMonitor:
    """One per receiver: collects its partitions' stalls and reports once per stall."""

    def __init__(
        self,
        timeout_ms: int,
        report: ErrorReporter,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_ms / 1000.0
        self.probe_interval_s = min(self.timeout_s / _PROBES_PER_TIMEOUT, _MAX_PROBE_INTERVAL_S)
        self._report = report
        self._clock = clock
        self._lock = threading.Lock()
        self._stalls: dict[TopicAndPartition, _Stall] = {}
        self._reported = False
        # One probe at a time per receiver: its partitions share one client, and a round of
        # probes of hundreds of idle partitions at once would queue behind each other inside it,
        # holding every partition thread (and a stop) for as long as the whole round takes.
        self.probe_gate = threading.Lock()

    def watch(self, tp: TopicAndPartition, brokers: str, probe: Probe) -> FetchWatch:
        return FetchWatch(self, tp, brokers, probe, self._clock)

    @property
    def reported(self) -> bool:
        return self._reported

    def failing(self, tp: TopicAndPartition, brokers: str, since: float, cause: str) -> None:
        """``tp`` has not fetched since ``since`` (clock time), most recently because of ``cause``."""
        with self._lock:
            self._stalls[tp] = _Stall(since, brokers, cause)
            if self._reported or self._clock() - since < self.timeout_s:
                return
            self._reported = True
            message = self._message()
        logger.error("%s", message)
        self._report(message, FetchStallError(message))

    def fetching(self, tp: TopicAndPartition) -> None:
        with self._lock:
            if self._stalls.pop(tp, None) is None or self._stalls or not self._reported:
                return
            self._reported = False
        logger.info("the receiver fetches from Kafka again")

    def _message(self) -> str:
        now = self._clock()
        partitions = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(self._stalls))
        brokers = ", ".join(sorted({stall.brokers for stall in self._stalls.values()}))
        causes = "; ".join(dict.fromkeys(stall.cause for stall in self._stalls.values()))
        longest = max(now - stall.since for stall in self._stalls.values())
        return (
            f"no fetch from Kafka for {longest:.0f} s ({partitions}) from brokers {brokers}: {causes}. "
            f"Still retrying; {FETCH_STALL_TIMEOUT_PARAM} sets how long a stall lasts before it is reported"
        )


class FetchWatch:
    """One partition consumer's side: cheap on the fetch path, probes only when its partition is quiet."""

    def __init__(
        self,
        monitor: FetchStallMonitor,
        tp: TopicAndPartition,
        brokers: str,
        probe: Probe,
        clock: Callable[[], float],
    ) -> None:
        self._monitor = monitor
        self._tp = tp
        self._brokers = brokers
        self._probe = probe
        self._clock = clock
        self._last_fetch = self._last_check = clock()
        self._stalled = False

    def fetched(self) -> None:
        """Records arrived."""
        self._last_fetch = self._last_check = self._clock()
        if self._stalled:
            self._stalled = False
            self._monitor.fetching(self._tp)

    def held(self) -> None:
        """No records because the receiver holds the partition back (fetch admission: it waits
        for its turn): its quiet time starts over, as after a fetch."""
        self.fetched()

    def quiet(self) -> None:
        """A poll returned no record; probes the partition once per probe interval of quiet."""
        now = self._clock()
        if now - self._last_check < self._monitor.probe_interval_s:
            return
        gate = self._monitor.probe_gate
        if not gate.acquire(blocking=False):
            return  # another partition probes now: this one's turn comes at a later quiet poll
        try:
            cause = self._probe()
        finally:
            gate.release()
        self._last_check = self._clock()
        if cause is None:
            self.fetched()
        else:
            self._stalled = True
            self._monitor.failing(self._tp, self._brokers, self._last_fetch, cause)


def likely_cause(error_name: str, detail: str) -> str:
    """A reader's guess at why a probe failed, from librdkafka's error name."""
    if error_name in ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "BROKER_NOT_AVAILABLE"):
        return f"the brokers are unreachable ({detail})"
    if error_name in ("_TIMED_OUT", "REQUEST_TIMED_OUT"):
        return (
            f"no broker answered in time ({detail}); a pre-0.10 broker without "
            "api.version.request=false, or a listener/security.protocol that does not match?"
        )
    return f"{detail}"


NO_RECORDS_CAUSE = (
    "the leader holds records past the consumer's position ({position}..{high}) but fetches return "
    "none: a pre-0.10 broker without api.version.request=false, or a protocol error?"
)

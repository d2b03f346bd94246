"""Committed offsets kept by Kafka's group coordinator (OffsetCommit / OffsetFetch).

The offsets tools read (``kafka-consumer-groups``, Burrow, kafka_exporter), committed through a
confluent-kafka consumer: synchronously, each partition's error checked, the coordinator's
transient errors (moved, loading, unavailable, rebalancing, timed out, connection lost) retried
with backoff for ``retry_for_s``.

Kafka has no conditional write, so the store's two rules are enforced here, before each request:

- never backwards: the last value committed or fetched per partition is kept and a lower one is
  refused. The cache is only trusted while the partition stays ours: it is dropped whenever the
  ownership predicate says no, so a partition that comes back (maybe moved on by another member
  meanwhile) is fetched again before its next commit;
- never a partition not owned: ``owns`` is asked before each request (and each retry), and a
  coordinator that says this member's generation is over refuses the partition as well.

Given a consumer (a group member), the store only borrows it. :meth:`KafkaOffsetStore.standalone`
makes its own non-subscribed consumer: a "simple" committer (generation -1), which the coordinator
accepts while the group has no Kafka members, as with ZooKeeper membership.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from tenacity import Retrying, before_sleep_log, retry_if_exception_type, stop_after_delay, wait_exponential

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.offsets.store import REFUSED, CommitResult, log_repair
from reliable_kafka.util import instruments
from reliable_kafka.util.kafka_errors import kafka_error_of
from reliable_kafka.util.librdkafka_log import with_logger

logger = logging.getLogger(__name__)

RETRIABLE_CODES = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._ALL_BROKERS_DOWN,
    }
)
# This member's generation is over: what it was assigned belongs to someone else now.
_MEMBERSHIP_LOST = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.FENCED_MEMBER_EPOCH,
    }
)

# One OffsetFetch waits this long at most; the retries around it keep to retry_for_s.
_FETCH_TIMEOUT_S = 10.0
# A standalone store's OffsetFetch waits less: its client hears a refused group only between two
# attempts (_raise_if_refused), and librdkafka holds the request for its whole timeout meanwhile.
_STANDALONE_FETCH_TIMEOUT_S = 2.0
# librdkafka holds a commit while it looks for the coordinator for up to session.timeout.ms, which
# a non-subscribed consumer has no other use for: it bounds one attempt of a standalone store.
_STANDALONE_ATTEMPT_MS = 10_000


class _RetriableError(KafkaException):
    """A transient coordinator error; raised to tenacity, re-raised as is when retries run out."""


# The coordinator's refusals: Kafka's answer, never retried (see access_refusal).
_REFUSED_CODES = frozenset({KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED})


def _is_retriable(error: KafkaError) -> bool:
    return error.code() in RETRIABLE_CODES or error.retriable()


def _run_here(request: Callable[[], Any]) -> Any:
    return request()


def _topic_partitions(offsets: Mapping[TopicAndPartition, int]) -> list[TopicPartition]:
    return [TopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]


class KafkaOffsetStore:
    """Fetches and commits one group's offsets through the coordinator; commits only what ``owns``."""

    def __init__(
        self,
        consumer: Consumer,
        group_id: str,
        *,
        owns: Callable[[TopicAndPartition], bool],
        retry_for_s: float = 30.0,
        run: Callable[[Callable[[], Any]], Any] | None = None,
    ) -> None:
        """``run(request)`` makes each request through ``consumer``; a group member's
        :meth:`~KafkaGroupMembership.call` runs it on the member's poll thread."""
        self._consumer = consumer
        self._run = run if run is not None else _run_here
        self._group = group_id
        self._owns = owns
        self._retry_for_s = retry_for_s
        self._closes_consumer = False
        self._closed = False
        # Last offset committed or fetched per owned partition (None: the group has none).
        self._known: dict[TopicAndPartition, int | None] = {}
        self._lock = threading.Lock()  # one request attempt at a time (see _locked)
        self._refused: KafkaError | None = None  # the coordinator refused the group (standalone)

    @classmethod
    def standalone(
        cls,
        consumer_config: Mapping[str, Any],
        group_id: str,
        *,
        owns: Callable[[TopicAndPartition], bool],
        retry_for_s: float = 30.0,
    ) -> KafkaOffsetStore:
        """A store with its own consumer that never subscribes; :meth:`close` closes it."""
        attempt_ms = max(1000, min(_STANDALONE_ATTEMPT_MS, int(retry_for_s * 1000)))
        config = {
            **consumer_config,
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "session.timeout.ms": attempt_ms,
        }
        store = cls(Consumer(with_logger(config)), group_id, owns=owns, retry_for_s=retry_for_s)
        store._closes_consumer = True
        return store

    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(_RetriableError),
            wait=wait_exponential(multiplier=0.05, max=2.0),
            stop=stop_after_delay(self._retry_for_s),
            reraise=True,
            before_sleep=before_sleep_log(logger, logging.DEBUG),
        )

    # -- reads ------------------------------------------------------------------------------

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        tps = sorted(set(partitions))
        if not tps:
            return {}
        return self._fetch(tps)

    def _fetch(self, tps: list[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        fetched: dict[TopicAndPartition, int | None] = self._retrying()(self._locked, self._fetch_once, tps)
        with self._lock:
            self._known.update(fetched)
        return fetched

    def _locked(self, request: Callable[..., Any], *args: Any) -> Any:
        """One attempt of a request, alone on this store: Kafka has no conditional write, so two
        commits of a partition must not pass each other. Held for that attempt only (bounded by
        its timeout), never across the backoff before the next one."""
        with self._lock:
            return request(*args)

    def _fetch_once(self, tps: list[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        self._raise_if_refused()  # before waiting out a request the coordinator will never answer
        request = [TopicPartition(tp.topic, tp.partition) for tp in tps]
        try:
            longest = _STANDALONE_FETCH_TIMEOUT_S if self._closes_consumer else _FETCH_TIMEOUT_S
            timeout = min(longest, self._retry_for_s)
            answered = self._run(lambda: self._consumer.committed(request, timeout=timeout))
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if error is not None and _is_retriable(error):
                self._raise_if_refused()
                raise _RetriableError(error) from None
            raise
        fetched: dict[TopicAndPartition, int | None] = {}
        for answer in answered:
            if answer.error is not None:
                if _is_retriable(answer.error):
                    raise _RetriableError(answer.error)
                raise KafkaException(answer.error)
            # A partition the group never committed comes back as OFFSET_INVALID (-1001).
            offset = answer.offset if answer.offset >= 0 else None
            fetched[TopicAndPartition(answer.topic, answer.partition)] = offset
        return fetched

    # -- commits ----------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        """Commit next offsets to read; returns what happened to each partition.

        Transient coordinator errors are retried for ``retry_for_s``; then the last one is
        raised, and the caller decides (a commit that did not happen only costs re-reading data).
        """
        if not offsets:
            return {}
        for tp, offset in offsets.items():
            if offset < 0:
                raise ValueError(f"cannot commit negative offset {offset} for {tp}")
        started = time.perf_counter()
        try:
            results = self._commit(dict(offsets))
        except Exception:
            instruments.OFFSET_COMMIT_FAILURES.inc()
            raise
        finally:
            instruments.OFFSET_COMMIT_SECONDS.observe(time.perf_counter() - started)
        refused = {tp: result for tp, result in results.items() if result in REFUSED}
        if refused:
            instruments.OFFSET_COMMIT_FAILURES.inc()
            for tp, result in sorted(refused.items()):
                logger.warning(
                    "offset %d for %s of group %s not committed to Kafka: %s",
                    offsets[tp],
                    tp,
                    self._group,
                    result.value,
                )
        return results

    def _commit(self, offsets: dict[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        results: dict[TopicAndPartition, CommitResult] = {}
        owned: dict[TopicAndPartition, int] = {}
        for tp, offset in offsets.items():
            if self._owns(tp):
                owned[tp] = offset
            else:
                with self._lock:
                    self._known.pop(tp, None)
                results[tp] = CommitResult.NOT_OWNER
        with self._lock:
            unknown = [tp for tp in sorted(owned) if tp not in self._known]
        if unknown:
            self._fetch(unknown)
        if owned:
            self._retrying()(self._locked, self._commit_once, owned, results)
        return results

    def _commit_once(
        self, pending: dict[TopicAndPartition, int], results: dict[TopicAndPartition, CommitResult]
    ) -> None:
        """One OffsetCommit of what is still ``pending``; settled partitions leave it. Each attempt
        checks ownership and the never-backwards rule afresh (another commit may have passed
        during the backoff before it)."""
        self._settle_before_sending(pending, results)
        if not pending:
            return
        answered = self._send(pending)
        if answered is None:
            for tp in list(pending):
                self._refuse_not_owner(tp, pending, results)
            return
        retry_on: KafkaError | None = None
        for answer in answered:
            tp = TopicAndPartition(answer.topic, answer.partition)
            if tp not in pending:
                continue
            if answer.error is None:
                self._known[tp] = pending.pop(tp)
                results[tp] = CommitResult.COMMITTED
            elif answer.error.code() in _MEMBERSHIP_LOST:
                self._refuse_not_owner(tp, pending, results)
            elif _is_retriable(answer.error):
                retry_on = answer.error
            else:
                raise KafkaException(answer.error)
        if pending:
            raise _RetriableError(
                retry_on or KafkaError(KafkaError._FAIL, "partitions missing in the answer")
            )

    def _settle_before_sending(
        self, pending: dict[TopicAndPartition, int], results: dict[TopicAndPartition, CommitResult]
    ) -> None:
        """Settles what is no longer owned (NOT_OWNER) or not past the known offset (BACKWARDS,
        UNCHANGED); what remains is sent."""
        for tp in list(pending):
            if not self._owns(tp):  # lost while retrying
                self._refuse_not_owner(tp, pending, results)
                continue
            if tp not in self._known:  # dropped since (ownership was lost and came back): ask again
                self._known.update(self._fetch_once([tp]))
            known = self._known[tp]
            if known is not None and pending[tp] < known:
                results[tp] = CommitResult.BACKWARDS
                del pending[tp]
            elif known == pending[tp]:
                results[tp] = CommitResult.UNCHANGED
                del pending[tp]

    def _send(self, pending: dict[TopicAndPartition, int]) -> list[TopicPartition] | None:
        """The coordinator's answer per partition; None when this member's generation is over."""
        self._raise_if_refused()
        try:
            offsets = _topic_partitions(pending)
            answered: list[TopicPartition] = self._run(
                lambda: self._consumer.commit(offsets=offsets, asynchronous=False)
            )
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if error is not None and error.code() in _MEMBERSHIP_LOST:
                return None
            if error is not None and _is_retriable(error):
                self._raise_if_refused()
                raise _RetriableError(error) from None
            raise
        return answered

    def _raise_if_refused(self) -> None:
        """A standalone store's consumer hears the coordinator refuse the group (an ACL) only as
        an error on its queue, which nothing else reads, and its request times out meanwhile:
        before a request and after a failed one, read that queue (it holds no record: the
        consumer never reads)."""
        if not self._closes_consumer:
            return  # a group member's queue is its poll thread's
        if self._refused is None:
            message = self._consumer.poll(0)
            error = message.error() if message is not None else None
            if error is not None and error.code() in _REFUSED_CODES:
                self._refused = error  # said once: every later request of this client fails so
        if self._refused is not None:
            raise KafkaException(self._refused)

    def _refuse_not_owner(
        self,
        tp: TopicAndPartition,
        pending: dict[TopicAndPartition, int],
        results: dict[TopicAndPartition, CommitResult],
    ) -> None:
        del pending[tp]
        self._known.pop(tp, None)
        results[tp] = CommitResult.NOT_OWNER

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        """Replace a committed offset the broker rejected as out of range by the reset offset.

        Only by an owner, and only if the coordinator still holds ``rejected``; lower is allowed
        here, because an offset past the log end is no position anyone reached.
        """
        result = self._repair(tp, rejected, reset_to)
        log_repair(logger, result, tp, group=f"{self._group}, in Kafka", rejected=rejected, reset_to=reset_to)
        return result

    def _repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        if not self._owns(tp):
            with self._lock:
                self._known.pop(tp, None)
            return CommitResult.NOT_OWNER
        current = self._fetch([tp])[tp]
        if current == reset_to:
            return CommitResult.UNCHANGED
        if current != rejected:
            return CommitResult.CONFLICT
        results: dict[TopicAndPartition, CommitResult] = {}
        self._retrying()(self._locked, self._repair_once, tp, rejected, reset_to, results)
        return results[tp]

    def _repair_once(
        self,
        tp: TopicAndPartition,
        rejected: int,
        reset_to: int,
        results: dict[TopicAndPartition, CommitResult],
    ) -> None:
        """One attempt of a repair: lower than the known offset is allowed here, but only while
        the coordinator (as last seen) still holds ``rejected``."""
        if self._known.get(tp, rejected) not in (rejected, reset_to, None):
            results[tp] = CommitResult.CONFLICT  # another commit passed since the fetch
            return
        self._known[tp] = None  # the never-backwards check does not apply to the repair
        try:
            self._commit_once({tp: reset_to}, results)
        finally:
            if tp not in results:  # the attempt failed: the next one starts from what was fetched
                self._known[tp] = rejected

    def close(self) -> None:
        """Closes the consumer only if :meth:`standalone` made it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._closes_consumer:
            self._consumer.close()

"""A topic a stream names that Kafka does not have: an error once a bound has passed, not empty
batches for ever nor a failure before the topic had a chance to appear.

A receiver's group gets no partitions for such a topic and, left alone, waits for it in silence;
createDirectStream looks its topics up on the driver, before the stream exists. The rule for
both: a topic missing for longer than ``missing.topic.timeout.ms``
(kafkaParams, default 5000; -1: no bound) is a :class:`MissingTopicError` naming it: the receiver
stops, is not launched again, and ``awaitTermination`` raises the error. With auto-creation on
(the consumer's ``allow.auto.create.topics=true``, the brokers' ``auto.create.topics.enable``; see
:mod:`~reliable_kafka.kafka.client.topic_lookup`) the receiver has asked the brokers for the topic,
which creates it: one WARNING, and its records once it exists.

State machine of one receiver's :class:`MissingTopics`, per topic:

    unknown ---answer: exists---------> present (nothing logged)
    unknown ---answer: missing--------> missing since now: one WARNING when waiting is the point
                                        (auto-creation asked, or no bound), else one INFO line
    missing ---answer: exists---------> present, logged at INFO
    missing ---bound passed-----------> MissingTopicError (every topic past the bound, in one)
    any -------answer: refused--------> asked again, neither present nor missing: Kafka has it,
                                        and an ACL refuses it (access_refusal's to judge)

The bound runs from the first answer that says missing: brokers that do not answer (an outage
the fetch-stall report speaks for) prove nothing. :class:`MissingTopicWatch` asks on a thread of
its own until every topic is present, or the error is raised, or the receiver stops;
:func:`wait_for_topics` asks in the caller's thread, for createDirectStream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Set

from reliable_kafka.kafka.client.topic_lookup import (
    AUTO_CREATE_PARAM,
    MISSING_TOPIC_TIMEOUT_PARAM,
    WAIT_FOR_EVER,
    TopicLookup,
)
from reliable_kafka.receiver.fatal_error import FatalReceiverError

logger = logging.getLogger(__name__)

# How often a missing topic is asked for: a few times within the bound, at most twice a second.
_MAX_CHECK_INTERVAL_S = 0.5
_CHECKS_PER_BOUND = 5
# With no bound there is nothing to be quick for: only the "exists now" line waits on it.
_UNBOUNDED_CHECK_INTERVAL_S = 5.0
_JOIN_TIMEOUT_S = 10.0


class MissingTopicError(FatalReceiverError):
    """Topics of the stream that Kafka did not have for longer than ``missing.topic.timeout.ms``."""


def _quoted(topics: Iterable[str]) -> str:
    return ", ".join(f"'{topic}'" for topic in sorted(topics))


class MissingTopics:
    """The per-topic states above; ``now`` is the monotonic clock in seconds (a test's own)."""

    def __init__(
        self,
        topics: Iterable[str],
        timeout_ms: int,
        *,
        asks_to_create: bool,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pending = set(topics)  # not known present yet
        self._missing_since: dict[str, float] = {}
        self._timeout_ms = timeout_ms
        self._asks_to_create = asks_to_create
        self._now = now

    @property
    def settled(self) -> bool:
        """Every topic present: nothing more to ask."""
        return not self._pending

    @property
    def pending(self) -> set[str]:
        return set(self._pending)

    @property
    def check_interval_s(self) -> float:
        if self._timeout_ms == WAIT_FOR_EVER:
            return _UNBOUNDED_CHECK_INTERVAL_S
        return min(_MAX_CHECK_INTERVAL_S, self._timeout_ms / 1000 / _CHECKS_PER_BOUND)

    def answer(self, missing: set[str], refused: Set[str] = frozenset()) -> MissingTopicError | None:
        """Kafka's answer for :attr:`pending`: the topics it does not have, and those it has and
        refuses this client. The error once a topic has been missing for longer than the bound,
        else None."""
        now = self._now()
        for topic in sorted(refused & self._pending):
            self._missing_since.pop(topic, None)  # there after all: still asked, never missing
        for topic in sorted(self._pending - missing - refused):
            self._pending.discard(topic)
            if self._missing_since.pop(topic, None) is not None:
                logger.info("topic '%s' exists now", topic)
        for topic in sorted(missing & self._pending):
            if topic not in self._missing_since:
                self._missing_since[topic] = now
                self._log_missing(topic)
        return self._past_bound(now)

    def _log_missing(self, topic: str) -> None:
        if self._asks_to_create:
            logger.warning(
                "topic '%s' does not exist: asked the brokers to create it (%s=true); waiting for it",
                topic,
                AUTO_CREATE_PARAM,
            )
        elif self._timeout_ms == WAIT_FOR_EVER:
            logger.warning(
                "topic '%s' does not exist; waiting for it (%s=%d)",
                topic,
                MISSING_TOPIC_TIMEOUT_PARAM,
                WAIT_FOR_EVER,
            )
        else:
            logger.info(
                "topic '%s' does not exist; the stream ends unless it exists within %d ms (%s)",
                topic,
                self._timeout_ms,
                MISSING_TOPIC_TIMEOUT_PARAM,
            )

    def _past_bound(self, now: float) -> MissingTopicError | None:
        if self._timeout_ms == WAIT_FOR_EVER:
            return None
        bound_s = self._timeout_ms / 1000
        gone = sorted(topic for topic, since in self._missing_since.items() if now - since >= bound_s)
        if not gone:
            return None
        names = _quoted(gone)
        what = f"topic {names} does not" if len(gone) == 1 else f"topics {names} do not"
        if self._asks_to_create:
            return MissingTopicError(
                f"{what} exist in Kafka, and the brokers did not create it within {self._timeout_ms} ms "
                f"({MISSING_TOPIC_TIMEOUT_PARAM}) of being asked ({AUTO_CREATE_PARAM}=true): their "
                "auto.create.topics.enable is off, or creating it failed; create it"
            )
        return MissingTopicError(
            f"{what} exist in Kafka (missing for {self._timeout_ms} ms, {MISSING_TOPIC_TIMEOUT_PARAM}): "
            "create it; or, where the brokers create topics on first use (auto.create.topics.enable), "
            f"set {AUTO_CREATE_PARAM}=true in kafkaParams; "
            f"or wait for it with {MISSING_TOPIC_TIMEOUT_PARAM}=-1"
        )


class MissingTopicWatch:
    """Asks Kafka about ``topics`` on a thread of its own until :class:`MissingTopics` settles;
    ``on_error`` hears the :class:`MissingTopicError` (once), on that thread."""

    def __init__(
        self,
        topics: Iterable[str],
        lookup: TopicLookup,
        timeout_ms: int,
        on_error: Callable[[str, BaseException], None],
    ) -> None:
        self._lookup = lookup
        self._state = MissingTopics(topics, timeout_ms, asks_to_create=lookup.asks_to_create)
        self._on_error = on_error
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="missing-topics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the watch (bounded: one metadata request may be out)."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_JOIN_TIMEOUT_S)

    def _run(self) -> None:
        try:
            while not self._stopping.is_set() and not self._state.settled:
                missing = self._lookup.missing(self._state.pending)
                if missing is not None:
                    error = self._state.answer(missing, self._lookup.refused)
                    if error is not None:
                        if not self._stopping.is_set():
                            self._on_error("topics missing from Kafka", error)
                        return
                self._stopping.wait(self._state.check_interval_s)
        finally:
            self._lookup.close()


def wait_for_topics(topics: Iterable[str], lookup: TopicLookup, timeout_ms: int) -> None:
    """Return once Kafka has every one of ``topics``; raise :class:`MissingTopicError` once one has
    been missing past ``timeout_ms``. Brokers that do not answer end the wait without a verdict:
    the caller's own lookup then fails on them with its retries and its error. Closes ``lookup``."""
    state = MissingTopics(topics, timeout_ms, asks_to_create=lookup.asks_to_create)
    try:
        while not state.settled:
            missing = lookup.missing(state.pending)
            if missing is None:
                return
            error = state.answer(missing)
            if error is not None:
                raise error
            if not state.settled:
                time.sleep(state.check_interval_s)  # the next question to Kafka, not an event to wait on
    finally:
        lookup.close()

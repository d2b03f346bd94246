"""Spark's ``KafkaCluster`` for the direct approach: what the driver asks Kafka (a topic's
partitions, each partition's first and next offsets), with Spark's retries.

One librdkafka consumer, made on first use, never assigned: it only sends metadata and
list-offsets requests. Lookups retry ``spark.streaming.kafka.maxRetries`` times, waiting
``refresh.leader.backoff.ms`` (0.8's name, 200 ms by default) between attempts, as Spark did
while a leader moved. A lookup that fails while Kafka refuses the client (credentials,
certificate, ACL: see ``access_refusal``) raises that refusal at once: no retry mends it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from reliable_kafka.kafka.client.access_refusal import AccessRefusedError, refusal_error
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.range_reader import LostOffsetsError, RangeConsumer, range_consumer
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.util.kafka_errors import kafka_error_of

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
DEFAULT_BACKOFF_MS = 200
_REQUEST_TIMEOUT_S = 10.0


class KafkaClusterError(RuntimeError):
    """Kafka did not answer a lookup within the retries."""


class KafkaCluster:
    def __init__(self, kafka_params: Mapping[str, Any], max_retries: int = 1) -> None:
        self._kafka_params = dict(kafka_params)
        self._max_retries = max_retries
        self._backoff_s = int(self._kafka_params.get("refresh.leader.backoff.ms", DEFAULT_BACKOFF_MS)) / 1000
        self._consumer: RangeConsumer | None = None
        self._closed = False

    def close(self) -> None:
        self._closed = True
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self, topics: Iterable[str]) -> list[TopicAndPartition]:
        """Every partition of ``topics``, sorted; ``ValueError`` naming a topic Kafka does not have."""
        found: list[TopicAndPartition] = []
        for topic in topics:
            metadata = self._retried(f"the partitions of {topic}", lambda t=topic: self._topic_metadata(t))
            found.extend(TopicAndPartition(topic, p) for p in metadata)
        return sorted(found)

    def topics(self) -> list[str]:
        """Every topic Kafka has, sorted, without its internal ones (``__consumer_offsets``...)."""
        metadata = self._retried("the topics", lambda: self._client().list_topics(timeout=_REQUEST_TIMEOUT_S))
        return sorted(topic for topic in metadata.topics if not topic.startswith("__"))

    def offsets(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, tuple[int, int]]:
        """``(first, next)`` offset of each partition's log: its start and its end."""
        return {
            tp: self._retried(f"the offsets of {tp}", lambda tp=tp: self._watermarks(tp)) for tp in partitions
        }

    def latest_offsets(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int]:
        return {tp: end for tp, (_, end) in self.offsets(partitions).items()}

    def check_ranges(self, ranges: Sequence[OffsetRange]) -> None:
        """Spark's ``checkOffsets``: every range within its partition's log, else an error naming
        it; ranges Kafka no longer has (retention) are ``LostOffsetsError`` ("records lost")."""
        wanted = [r for r in ranges if r.count() > 0]
        topics = sorted({r.topic for r in wanted})
        known = set(self.partitions(topics))
        for r in wanted:
            if TopicAndPartition(r.topic, r.partition) not in known:
                raise ValueError(f"{r}: topic {r.topic} has no partition {r.partition}")
        logs = self.offsets({TopicAndPartition(r.topic, r.partition) for r in wanted})
        lost = []
        for r in wanted:
            start, end = logs[TopicAndPartition(r.topic, r.partition)]
            if r.untilOffset > end:
                raise ValueError(f"{r} goes beyond the end of its partition's log, offset {end}")
            if r.fromOffset < start:
                lost.append(OffsetRange(r.topic, r.partition, r.fromOffset, min(start, r.untilOffset)))
        if lost:
            raise LostOffsetsError(lost, "Kafka no longer has them (retention removed them)")

    def _client(self) -> RangeConsumer:
        if self._closed:
            raise KafkaClusterError("the Kafka lookups of a stopped stream")
        if self._consumer is None:
            self._consumer = range_consumer(self._kafka_params)
        return self._consumer

    def _topic_metadata(self, topic: str) -> list[int]:
        metadata = self._client().list_topics(topic, timeout=_REQUEST_TIMEOUT_S).topics.get(topic)
        error = None if metadata is None else metadata.error
        if metadata is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise ValueError(f"topic {topic!r} does not exist in Kafka")
        if error is not None:
            raise KafkaException(KafkaError(error.code(), f"{topic}: {error.str()}"))  # names the topic
        return sorted(metadata.partitions)

    def _watermarks(self, tp: TopicAndPartition) -> tuple[int, int]:
        low, high = self._client().get_watermark_offsets(
            TopicPartition(tp.topic, tp.partition), timeout=_REQUEST_TIMEOUT_S, cached=False
        )
        return int(low), int(high)

    def _retried(self, what: str, lookup: Callable[[], _T]) -> _T:
        attempts = self._max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return lookup()
            except KafkaException as exc:
                refused = self._refused(exc)
                if refused is not None:
                    raise refused from exc
                if attempt == attempts:
                    raise KafkaClusterError(
                        f"could not look up {what} in {attempts} attempts "
                        f"(spark.streaming.kafka.maxRetries={self._max_retries}): {exc}"
                    ) from exc
                logger.info("looking up %s failed (%s); attempt %d of %d", what, exc, attempt + 1, attempts)
                time.sleep(self._backoff_s)
        raise AssertionError("unreachable")

    def _refused(self, exc: KafkaException) -> AccessRefusedError | None:
        """The refusal ``exc`` is (Kafka's answer), or that the client met while it failed."""
        consumer = self._consumer
        if consumer is None:
            return None
        answer = refusal_error(kafka_error_of(exc), consumer.refusals.identity)
        if answer is not None:
            return answer
        # A lookup does not run the error callbacks, which heard why no broker answered: this
        # client is never assigned, so a poll reads nothing and runs them.
        try:
            consumer.poll(0)
        except (KafkaException, RuntimeError) as failed:
            logger.debug("serving the lookup client's callbacks: %r", failed)
        return consumer.refusals.error()

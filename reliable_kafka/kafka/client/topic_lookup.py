"""Which of a stream's topics Kafka does not have, asked as a consumer asks.

A topic is asked for by name, so that the answer tells "no such topic" (``UNKNOWN_TOPIC_OR_PART``)
from a topic this client may not describe (an ACL hides it from a listing of every topic, and a
listing would make it look missing). Asked by name, a broker with ``auto.create.topics.enable``
creates the topic when the client allows it: librdkafka's consumers do with
``allow.auto.create.topics=true`` only (Kafka's KIP-361; the default is false). Brokers before
0.10 create it on any request by name (their metadata request has no such flag), so a client of
the legacy protocol that does not allow it lists every topic instead.

A topic an ACL hides from this client is there, and refused: :attr:`TopicLookup.refused` names it,
and the client's refusals (see :mod:`~reliable_kafka.kafka.client.access_refusal`) hear of it at
every question, since librdkafka's fetches of such a topic say nothing at all.

Auto-creation, for a stream, is therefore on where both say so: the brokers'
``auto.create.topics.enable`` and the consumer's ``allow.auto.create.topics``. The client does not
read the brokers' setting (``DescribeConfigs`` needs an ACL of its own): it asks, and a topic that
the brokers do not create stays missing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException

from reliable_kafka.kafka.client.consumer import create_consumer

# Types only: the refusal judge imports the receiver package, too heavy for the ZooKeeper wing.
if TYPE_CHECKING:
    from reliable_kafka.kafka.client.access_refusal import AccessRefusals

logger = logging.getLogger(__name__)

# The kafkaParams key (ours): how long a topic of createStream may be missing before the stream
# ends with an error naming it; -1: wait for it for ever.
MISSING_TOPIC_TIMEOUT_PARAM = "missing.topic.timeout.ms"
DEFAULT_MISSING_TOPIC_TIMEOUT_MS = 5000
WAIT_FOR_EVER = -1
# librdkafka's consumer setting: a topic asked for by name may be created by the brokers.
AUTO_CREATE_PARAM = "allow.auto.create.topics"

# Short: a stop waits for a request that is out, and an unanswered one is asked again.
_REQUEST_TIMEOUT_S = 2.0


def allows_auto_creation(client_config: Mapping[str, Any]) -> bool:
    """Whether the consumer lets the brokers create a topic it asks for (librdkafka's reading of
    ``allow.auto.create.topics``: true/false, any case)."""
    value = client_config.get(AUTO_CREATE_PARAM, False)
    return value is True or str(value).strip().lower() == "true"


class TopicLookup:
    """One consumer, never assigned, made at the first question and kept until :meth:`close`."""

    def __init__(
        self, consumer_config: Mapping[str, Any], name: str, refusals: AccessRefusals | None = None
    ) -> None:
        self._config = dict(consumer_config)
        self._name = name
        self._refusals = refusals
        # The topics of the last answer that exist and that this client may not read.
        self.refused: set[str] = set()
        self._consumer: Consumer | None = None
        self.asks_to_create = allows_auto_creation(self._config)
        # A legacy-protocol client's request by name creates the topic whatever it allows.
        self._by_name = self.asks_to_create or self._config.get("api.version.request") not in (False, "false")

    def missing(self, topics: Iterable[str]) -> set[str] | None:
        """The topics Kafka says it does not have; None when the brokers did not answer."""
        self.refused = set()
        try:
            consumer = self._client()
            if not self._by_name:
                known = consumer.list_topics(timeout=_REQUEST_TIMEOUT_S).topics
                return {topic for topic in topics if topic not in known}
            return {topic for topic in topics if self._unknown(consumer, topic)}
        except (KafkaException, ValueError) as exc:
            logger.debug("%s: no metadata answer: %r", self._name, exc)
            return None
        finally:
            self._serve_callbacks()

    def _serve_callbacks(self) -> None:
        """Run the client's pending error callbacks (a refused login among them): a metadata
        request does not, and this client is never polled otherwise. It reads nothing."""
        consumer = self._consumer
        if consumer is not None and self._refusals is not None:
            try:
                consumer.poll(0)
            except (KafkaException, RuntimeError) as exc:
                logger.debug("%s: serving callbacks: %r", self._name, exc)

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = create_consumer(self._config, self._name, self._refusals)
        return self._consumer

    def _unknown(self, consumer: Consumer, topic: str) -> bool:
        metadata = consumer.list_topics(topic, timeout=_REQUEST_TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.partitions:
            return metadata is None
        error = metadata.error
        # No partitions: unknown, or being created by this very request (LEADER_NOT_AVAILABLE): not
        # there yet. A topic an ACL hides from this client is there, and refused.
        if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            self.refused.add(topic)
            if self._refusals is not None:
                self._refusals.observe(KafkaError(error.code(), f"{topic}: {error.str()}"))
            return False
        return True

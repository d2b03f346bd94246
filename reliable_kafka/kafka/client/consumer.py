"""The librdkafka consumers receivers make, each with the error callback and the logger every
client gets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException

from reliable_kafka.kafka.client.error_log import ClientErrorLog
from reliable_kafka.util.librdkafka_log import LibrdkafkaLog

# Types only: the refusal judge imports the receiver package, too heavy for the ZooKeeper wing.
if TYPE_CHECKING:
    from reliable_kafka.kafka.client.access_refusal import AccessRefusals


def create_consumer(config: dict[str, Any], name: str, refusals: AccessRefusals | None = None) -> Consumer:
    """A Consumer, or ``ValueError`` with librdkafka's message (it names the bad key); its
    refusals go to ``refusals``."""
    try:
        return Consumer({**config, "error_cb": ClientErrorLog(name, refusals), "logger": LibrdkafkaLog()})
    except (KafkaException, TypeError, ValueError) as exc:
        raise ValueError(f"kafka params rejected by confluent-kafka: {exc}") from exc

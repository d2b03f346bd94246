"""Writing test records to Kafka and knowing every one of them was acknowledged."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Producer

# produce()'s partition for "the partitioner's choice" (librdkafka's RD_KAFKA_PARTITION_UA).
ANY_PARTITION = -1
ACK_TIMEOUT_S = 60.0


def produce_acked(
    client_config: Mapping[str, Any],
    topic: str,
    messages: Iterable[tuple[bytes | None, bytes | None, int]],
    **record_fields: Any,
) -> dict[int, int]:
    """Send ``(key, value, partition)`` messages, each with ``record_fields`` (``headers``,
    ``timestamp``), and wait until every one is acknowledged; AssertionError naming the first
    failures otherwise. Returns how many went to each partition (``ANY_PARTITION`` counted as is).
    A full local queue is waited out, so generators of any length can be sent.

    Each partition gets the messages once and in the order given, retries included: a broker
    that loses its leadership for a moment (a KRaft broker fenced on a loaded machine) fails the
    requests in flight, and a plain producer's retries then reorder and duplicate them."""
    producer = Producer(in_order_once(client_config))
    errors: list[Any] = []
    counts: Counter[int] = Counter()

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    for key, value, partition in messages:
        while True:
            try:
                producer.produce(
                    topic, value, key=key, partition=partition, on_delivery=on_delivery, **record_fields
                )
                break
            except BufferError:  # the local queue is full: serve acks until there is room
                producer.poll(0.1)
        counts[partition] += 1
        producer.poll(0)
    remaining = producer.flush(ACK_TIMEOUT_S)
    assert remaining == 0 and not errors, f"{remaining} messages unacknowledged, errors {errors[:3]}"
    return dict(counts)


def in_order_once(client_config: Mapping[str, Any]) -> dict[str, Any]:
    """``client_config`` for a producer whose retries neither reorder nor duplicate."""
    config = dict(client_config)
    if str(config.get("api.version.request", "true")).lower() == "false":
        # Kafka 0.9 has no idempotent producer (0.11+): one request in flight keeps the order.
        config.setdefault("max.in.flight.requests.per.connection", 1)
    else:
        config.setdefault("enable.idempotence", True)
    return config

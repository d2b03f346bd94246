"""The ``KafkaError`` a confluent-kafka exception carries, for code that decides by its code."""

from __future__ import annotations

from confluent_kafka import KafkaError


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    """The ``KafkaError`` confluent-kafka put first in ``exc``'s args (a ``KafkaException``, or a
    future's exception), else None."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None

"""What the packed range readers' rule tests script around them: a consumer that only assigns,
the refusals of a SASL user, and librdkafka's end-of-partition event."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from reliable_kafka.kafka.client.access_refusal import AccessRefusals, ClientIdentity


class ScriptedConsumer:
    """The reader's consumer: the reads come from a scripted fetch, so assigning is all it does."""

    def assign(self, _partitions: Any) -> None:
        pass

    def unassign(self) -> None:
        pass


def alice_refusals() -> AccessRefusals:
    return AccessRefusals(ClientIdentity.of({"sasl.username": "alice"}))


def eof() -> KafkaError:
    return KafkaError(KafkaError._PARTITION_EOF)

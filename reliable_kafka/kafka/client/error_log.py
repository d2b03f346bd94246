"""librdkafka's error callback for every client receivers make: each error logged at most every
30 s per error code, at INFO for the ones librdkafka recovers from by itself; refusals (bad
credentials, certificates, ACLs) go to the client's
:class:`~reliable_kafka.kafka.client.access_refusal.AccessRefusals`, which ends their streak."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError

# Types only: the refusal judge imports the receiver package, too heavy for the ZooKeeper wing.
if TYPE_CHECKING:
    from reliable_kafka.kafka.client.access_refusal import AccessRefusals


# Logged under the name these lines have always had, so that logging configurations that quiet or
# route them keep working.
logger = logging.getLogger("reliable_kafka.kafka.client.consumer")

_ERROR_LOG_INTERVAL_S = 30.0

# Errors a broker restart or a leader move produces; librdkafka recovers from them itself.
_TRANSIENT_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._TIMED_OUT,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.NETWORK_EXCEPTION,
    }
)


class ClientErrorLog:
    """librdkafka's error callback, logged at most every 30 s per error code so that a broker
    outage does not flood the log. With ``refusals``, a refusal is theirs to log and judge."""

    def __init__(self, name: str, refusals: AccessRefusals | None = None) -> None:
        self._name = name
        self._last: dict[int, float] = {}
        self.refusals = refusals

    def __call__(self, error: KafkaError) -> None:
        self.log(error)

    def log(self, error: KafkaError) -> None:
        if self.refusals is not None and self.refusals.observe(error) is not None:
            return
        now = time.monotonic()
        if now - self._last.get(error.code(), -_ERROR_LOG_INTERVAL_S) < _ERROR_LOG_INTERVAL_S:
            return
        self._last[error.code()] = now
        level = logging.INFO if error.code() in _TRANSIENT_ERRORS else logging.WARNING
        logger.log(level, "%s: %s (librdkafka recovers by itself where it can)", self._name, error)

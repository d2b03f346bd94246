"""The librdkafka clients receivers make: configuration checked before any connects, and the
error callback every client gets (logged at most every 30 s per error code)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException

from reliable_kafka.kafka.params import is_secret_key
from reliable_kafka.util.kafka_errors import kafka_error_of
from reliable_kafka.util.librdkafka_log import LibrdkafkaLog

logger = logging.getLogger(__name__)
# The configuration check's client has no brokers, and says so; nobody needs to read that.
_quiet_logger = logging.getLogger("reliable_kafka.librdkafka.config_check")
_quiet_logger.propagate = False
_quiet_logger.addHandler(logging.NullHandler())

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
    outage does not flood the log."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._last: dict[int, float] = {}

    def __call__(self, error: KafkaError) -> None:
        self.log(error)

    def log(self, error: KafkaError) -> None:
        now = time.monotonic()
        if now - self._last.get(error.code(), -_ERROR_LOG_INTERVAL_S) < _ERROR_LOG_INTERVAL_S:
            return
        self._last[error.code()] = now
        level = logging.INFO if error.code() in _TRANSIENT_ERRORS else logging.WARNING
        logger.log(level, "%s: %s (librdkafka recovers by itself where it can)", self._name, error)


def create_consumer(config: dict[str, Any], name: str) -> Consumer:
    """A Consumer, or ``ValueError`` with librdkafka's message (it names the bad key)."""
    try:
        return Consumer({**config, "error_cb": ClientErrorLog(name), "logger": LibrdkafkaLog()})
    except (KafkaException, TypeError, ValueError) as exc:
        raise ValueError(f"kafka params rejected by confluent-kafka: {exc}") from exc


# librdkafka's callbacks and logger: the only config values that are not plain data.
_CALLBACK_KEYS = frozenset({"error_cb", "throttle_cb", "stats_cb", "oauth_cb", "on_commit", "logger"})
_QUOTED_PROPERTY = re.compile(r'property:? "([^"]+)"')


def check_client_config(config: Mapping[str, Any]) -> None:
    """``ValueError`` naming the key when librdkafka would refuse ``config`` (an unknown key, a
    bad value, a value of the wrong type). Builds a client without brokers: nothing connects."""
    for key, value in config.items():
        if key in _CALLBACK_KEYS:
            continue
        if not isinstance(value, str | int | float | bool):
            raise ValueError(
                f"kafka param {key}: expected a string, number or boolean, got {type(value).__name__}"
            )
    probe = {k: v for k, v in config.items() if k not in ("bootstrap.servers", "metadata.broker.list")}
    probe.setdefault("group.id", "reliable-kafka-config-check")
    probe["logger"] = _quiet_logger
    try:
        Consumer(probe).close()
    except (KafkaException, TypeError, ValueError) as exc:
        error = kafka_error_of(exc)
        text = error.str() if error is not None else str(exc)
        match = _QUOTED_PROPERTY.search(text)
        key = match.group(1) if match else None
        if key is not None and is_secret_key(key):
            # librdkafka quotes the value, and this one is a secret.
            raise ValueError(f"kafka param {key}: invalid value (rejected by librdkafka)") from None
        named = f"kafka param {key}: " if key is not None else "kafka params: "
        raise ValueError(f"{named}{text}") from None

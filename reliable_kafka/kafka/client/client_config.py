"""Kafka params checked against librdkafka before any client connects: ``ValueError`` naming the
bad key (never echoing a secret's value)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException

from reliable_kafka.kafka.client.params import closest_param
from reliable_kafka.util.kafka_errors import kafka_error_of
from reliable_kafka.util.secret_keys import is_secret_key

# The configuration check's client has no brokers, and says so; nobody needs to read that.
_quiet_logger = logging.getLogger("reliable_kafka.librdkafka.config_check")
_quiet_logger.propagate = False
_quiet_logger.addHandler(logging.NullHandler())

# librdkafka's callbacks and logger: the only config values that are not plain data.
_CALLBACK_KEYS = frozenset({"error_cb", "throttle_cb", "stats_cb", "oauth_cb", "on_commit", "logger"})
_QUOTED_PROPERTY = re.compile(r'property:? "([^"]+)"')
_UNKNOWN_PROPERTY = "No such configuration property"


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
        closest = closest_param(key) if key is not None and _UNKNOWN_PROPERTY in text else None
        hint = f"; did you mean {closest}?" if closest else ""
        raise ValueError(f"{named}{text}{hint}") from None

"""librdkafka's log lines, through Python logging, at the level they deserve here.

A client built without a ``logger`` prints its log to stderr itself (``%4|...|CONFWARN|...``),
past the application's logging configuration. Every client this package builds passes
:data:`LOGGER_CONFIG` (or a :class:`LibrdkafkaLog`) so that its lines reach the
``reliable_kafka.librdkafka`` logger instead, where a user can filter them like any other.
"""

from __future__ import annotations

import logging
from typing import Any

_librdkafka_logger = logging.getLogger("reliable_kafka.librdkafka")

# Brokers older than 0.10 need these, and librdkafka calls them deprecated (support for those
# brokers ends in librdkafka 3). Set for such a broker, the deprecation is no news to anyone; every
# other CONFWARN (a deprecated or ignored key we or the user passed) stays a WARNING, to be fixed.
_LEGACY_BROKER_KEYS = ("api.version.request", "broker.version.fallback", "api.version.fallback.ms")
# Connection failures and request timeouts during a broker outage are retried by librdkafka;
# clients report them through their error callbacks (rate-limited) and the receivers report a
# fetch stall once, so the per-attempt log lines are detail.
_RETRIED_FACILITIES = frozenset({"FAIL", "ERROR", "REQTMOUT"})


class LibrdkafkaLog:
    """A librdkafka ``logger``: ``log(level, fmt, *args)`` as confluent-kafka calls it."""

    def log(self, level: int, fmt: str, *args: Any) -> None:
        facility = str(args[0]) if args else ""
        text = str(args[-1]) if args else ""
        if facility == "CONFWARN" and "deprecated" in text and _names_a_legacy_key(text):
            level = logging.DEBUG
        elif facility in _RETRIED_FACILITIES and level > logging.INFO:
            level = logging.INFO
        _librdkafka_logger.log(level, fmt, *args)


def _names_a_legacy_key(text: str) -> bool:
    return any(f"property {key} " in text for key in _LEGACY_BROKER_KEYS)


def with_logger(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with librdkafka's log routed through Python logging."""
    return {**config, "logger": LibrdkafkaLog()}

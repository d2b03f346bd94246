"""librdkafka's and kazoo's log lines reach Python logging at the level they deserve."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer

from reliable_kafka.util.kazoo_log import KazooLog
from reliable_kafka.util.librdkafka_log import LibrdkafkaLog, with_logger

_FMT = "%s [%s] %s"


def levels(caplog: pytest.LogCaptureFixture, facility: str, text: str, level: int) -> list[int]:
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="reliable_kafka.librdkafka"):
        LibrdkafkaLog().log(level, _FMT, facility, "rdkafka#producer-1", text)
    return [record.levelno for record in caplog.records]


def test_only_the_deprecation_of_the_keys_old_brokers_need_is_lowered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    legacy = "[thrd:app]: Configuration property api.version.request is deprecated: ..."
    assert levels(caplog, "CONFWARN", legacy, logging.WARNING) == [logging.DEBUG]
    other = "[thrd:app]: Configuration property queue.buffering.backpressure.threshold is deprecated: ..."
    assert levels(caplog, "CONFWARN", other, logging.WARNING) == [logging.WARNING]
    refused = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"
    assert levels(caplog, "FAIL", refused, logging.ERROR) == [logging.INFO]
    assert levels(caplog, "PROTOERR", "Protocol parse failure", logging.ERROR) == [logging.ERROR]


def test_a_real_client_logs_through_python_logging(capfd: pytest.CaptureFixture[str]) -> None:
    config = {
        "bootstrap.servers": "127.0.0.1:1",
        "api.version.request": False,
        "broker.version.fallback": "0.9.0.1",
    }
    producer = Producer(with_logger(config))
    producer.poll(0.5)
    del producer
    # Nothing printed by librdkafka itself: its lines went to the logger.
    assert "CONFWARN" not in capfd.readouterr().err


def test_kazoo_drops_are_quiet_only_while_we_close(caplog: pytest.LogCaptureFixture) -> None:
    log = KazooLog(logging.getLogger("kazoo.client"))
    with caplog.at_level(logging.DEBUG, logger="kazoo.client"):
        log.warning("Connection dropped: %s", "socket connection broken")
        log.closing = True
        log.warning("Connection dropped: %s", "socket connection broken")
        log.warning("Transition to CONNECTING")
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.DEBUG, logging.WARNING]

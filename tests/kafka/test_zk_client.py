"""The kazoo client's log masks ZooKeeper secrets (unit test of the filter, no ZooKeeper)."""

from __future__ import annotations

import logging

import pytest
from kazoo.protocol.serialization import Auth

from reliable_kafka.kafka.client.zk.client import MaskZooKeeperSecrets, kazoo_logger


def test_digest_credentials_and_session_passwords_are_masked_in_kazoos_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(1, logger="kazoo.client")
    kazoo_logger.debug("Sending request(xid=%s): %s", None, Auth(0, "digest", "rk-user:s3cret'pw"))
    kazoo_logger.log(5, "Session created, session_id: %r session_passwd: %s\n  timeout", 7, b"c0ffee")
    kazoo_logger.log(5, "Read response Connect(session_id=7, passwd=%r, read_only=False)", b"\x9c'~\"")
    kazoo_logger.debug("Received EVENT: %s", "a harmless line")
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "Sending request(xid=None): Auth(auth_type=0, scheme='digest', auth='***')",
        "Session created, session_id: 7 session_passwd: '***'\n  timeout",
        "Read response Connect(session_id=7, passwd='***', read_only=False)",
        "Received EVENT: a harmless line",
    ]
    assert "s3cret" not in caplog.text and "c0ffee" not in caplog.text and "x9c" not in caplog.text


def test_a_record_that_cannot_be_formatted_keeps_its_arguments_out_of_the_log() -> None:
    record = logging.LogRecord("kazoo.client.masked", logging.DEBUG, __file__, 1, "%d %s", ("x", "pw"), None)
    assert MaskZooKeeperSecrets().filter(record)
    assert "pw" not in record.getMessage()

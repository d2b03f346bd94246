"""Whether the brokers answer ``ApiVersionRequest``, asked with one request before any client starts.

librdkafka opens every broker connection with ``ApiVersionRequest`` (Kafka 0.10+). A 0.9 broker
does not know it and never answers (checked here: the connection stays open and silent);
librdkafka then falls back to the protocol of ``broker.version.fallback`` (0.10.0 by default),
which a 0.9 broker does not speak either, so an unchanged pyspark 2.4 direct-stream app against
a 0.9 cluster would read nothing. ``createStream`` learns the brokers' generation from their
ZooKeeper registrations (``zk.broker_discovery.legacy_protocol_config``); the direct approach has
only the broker list, so it asks one broker the question librdkafka would: an answer means 0.10
or later; silence on an open connection, or the connection dropped, a broker before 0.10.

Plain connections only: over TLS or SASL the question needs the client's own handshake, and the
user's ``broker.version.fallback`` (or a broker of 0.10 or later, which such setups have) decides.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Mapping
from typing import Any

from reliable_kafka.kafka.client.zk.broker_discovery import API_VERSION_REQUEST, BROKER_VERSION_FALLBACK

logger = logging.getLogger(__name__)

_API_VERSIONS_KEY = 18
_CORRELATION_ID = 0x524B  # any value: the answer must carry it back
_CLIENT_ID = b"reliable-kafka-probe"
PRE_010_FALLBACK = "0.9.0.1"
# A broker of 0.10 or later answers within milliseconds; a loaded one within a second or two.
DEFAULT_PROBE_TIMEOUT_S = 3.0


def api_versions_request() -> bytes:
    """ApiVersionRequest v0: header (key, version, correlation id, client id), empty body."""
    header = struct.pack(">hhih", _API_VERSIONS_KEY, 0, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    return struct.pack(">i", len(header)) + header


def answers_api_versions(host: str, port: int, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> bool | None:
    """True: the broker answered (0.10+); False: it kept silent or dropped the connection (older);
    None: no answer either way (unreachable, or an answer that is not Kafka's)."""
    try:
        conn = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        logger.debug("ApiVersionRequest to %s:%d: %r", host, port, exc)
        return None
    with conn:
        try:
            conn.settimeout(timeout_s)
            conn.sendall(api_versions_request())
            head = _read_exactly(conn, 8)
        except (TimeoutError, ConnectionResetError):
            return False
        except OSError as exc:
            logger.debug("ApiVersionRequest to %s:%d: %r", host, port, exc)
            return None
    if head is None:
        return False  # closed without a word: what a broker before 0.10 does
    _size, correlation_id = struct.unpack(">ii", head)
    return True if correlation_id == _CORRELATION_ID else None


def _read_exactly(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _plaintext(params: Mapping[str, Any]) -> bool:
    return str(params.get("security.protocol", "plaintext")).strip().lower() == "plaintext"


def _brokers(servers: str) -> list[tuple[str, int]]:
    found = []
    for entry in servers.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if sep and host and port.isdigit():
            found.append((host.strip("[]"), int(port)))
    return found


def legacy_protocol_params(
    servers: str, params: Mapping[str, Any], timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
) -> dict[str, Any]:
    """librdkafka settings for ``servers`` on top of ``params``: empty unless the first broker that
    answers either way is older than 0.10 and ``params`` decide neither key themselves."""
    if API_VERSION_REQUEST in params or BROKER_VERSION_FALLBACK in params or not _plaintext(params):
        return {}
    for host, port in _brokers(servers):
        answered = answers_api_versions(host, port, timeout_s)
        if answered is None:
            continue
        if answered:
            return {}
        logger.info(
            "Broker %s:%d does not answer ApiVersionRequest (Kafka before 0.10): using %s=false and "
            "%s=%s (set either key in kafkaParams to decide yourself)",
            host,
            port,
            API_VERSION_REQUEST,
            BROKER_VERSION_FALLBACK,
            PRE_010_FALLBACK,
        )
        return {API_VERSION_REQUEST: False, BROKER_VERSION_FALLBACK: PRE_010_FALLBACK}
    return {}

"""What Kafka itself registers in ZooKeeper: live brokers and each topic's partitions.

Brokers write ``/brokers/ids/<id>``: JSON with ``host``/``port`` (0.8), ``endpoints`` from 0.9 on
(``"<listener>://host:port"``; in 0.9 the listener name is the security protocol), and from 0.10.2
on ``listener_security_protocol_map`` from listener names (``INTERNAL``, ``EXTERNAL``...) to
protocols. The controller writes ``/brokers/topics/<topic>`` (``{"partitions": {"0": [replicas]}}``).

A registration's ``version`` tells the broker's protocol generation: 1 is 0.8 (``host``/``port``
only), 2 is 0.9 (``endpoints``), 3 is 0.10.0 (``rack``), 4 is 0.10.2 (listener names), 5 is 2.7+
(``features``). Brokers before 0.10 do not answer librdkafka's ``ApiVersionRequest`` (a 0.9 broker
fails on it and the request times out), so clients of them need ``api.version.request=false`` and a
``broker.version.fallback``; :func:`legacy_protocol_config` derives both from the registrations.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from reliable_kafka.kafka.client.zk.paths import BROKER_IDS_PATH, broker_path, topic_path

logger = logging.getLogger(__name__)

# The kafkaParams key that names the listener to connect through, for brokers that register several
# listeners with the same security protocol (one for inside a network, one for outside).
LISTENER_NAME_PARAM = "broker.listener.name"
_PROBE_TIMEOUT_S = 3.0

# librdkafka's settings for brokers without ApiVersionRequest; a user who sets either one decides.
API_VERSION_REQUEST = "api.version.request"
BROKER_VERSION_FALLBACK = "broker.version.fallback"
# Registration version -> the newest release that writes it (all of a release line speak the same
# protocol). Version 3 (0.10.0) and later answer ApiVersionRequest.
_PRE_010_FALLBACKS = {1: "0.8.2.2", 2: "0.9.0.1"}
_announced_fallbacks: set[str] = set()
_announced_lock = threading.Lock()


class NoBrokersError(RuntimeError):
    """No live broker registered in ZooKeeper has an endpoint this client can use."""


@dataclass(frozen=True)
class BrokerEndpoint:
    listener: str
    security_protocol: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.listener}://{self.address} ({self.security_protocol})"


def broker_endpoints(registration: bytes) -> list[BrokerEndpoint]:
    """Every endpoint one broker registration announces, with its security protocol."""
    try:
        info = json.loads(registration.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return []
    if not isinstance(info, dict):
        return []
    protocol_map = info.get("listener_security_protocol_map")
    if not isinstance(protocol_map, dict):
        protocol_map = {}
    protocols = {str(name).upper(): str(protocol).upper() for name, protocol in protocol_map.items()}
    endpoints: list[BrokerEndpoint] = []
    for endpoint in info.get("endpoints") or ():
        if not isinstance(endpoint, str) or "://" not in endpoint:
            continue
        listener, _, address = endpoint.partition("://")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            continue
        listener = listener.upper()
        # Before listener names (0.9, 0.10.0/1), the name in an endpoint is its protocol.
        endpoints.append(BrokerEndpoint(listener, protocols.get(listener, listener), host, int(port)))
    host, port = info.get("host"), info.get("port")
    if not endpoints and host and isinstance(port, int) and port > 0:
        endpoints.append(BrokerEndpoint("PLAINTEXT", "PLAINTEXT", str(host), port))  # 0.8
    return endpoints


def matching_endpoints(
    endpoints: Iterable[BrokerEndpoint],
    security_protocol: str = "PLAINTEXT",
    listener_name: str | None = None,
) -> list[BrokerEndpoint]:
    """The endpoints a client with ``security_protocol`` may use; only ``listener_name``'s if given."""
    protocol = security_protocol.upper()
    return [
        endpoint
        for endpoint in endpoints
        if endpoint.security_protocol == protocol
        and (listener_name is None or endpoint.listener == listener_name.upper())
    ]


def broker_address(
    registration: bytes, security_protocol: str = "PLAINTEXT", listener_name: str | None = None
) -> str | None:
    """``host:port`` of the first endpoint of one registration that fits (no reachability check)."""
    candidates = matching_endpoints(broker_endpoints(registration), security_protocol, listener_name)
    return candidates[0].address if candidates else None


def tcp_reachable(endpoint: BrokerEndpoint, timeout_s: float = _PROBE_TIMEOUT_S) -> str | None:
    """None when a TCP connection to ``endpoint`` opens, else why it did not."""
    host = endpoint.host.strip("[]")  # an IPv6 literal is registered in brackets
    try:
        with socket.create_connection((host, endpoint.port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def discover_bootstrap_servers(
    zk: KazooClient,
    security_protocol: str = "PLAINTEXT",
    listener_name: str | None = None,
    *,
    probe: Callable[[BrokerEndpoint], str | None] = tcp_reachable,
) -> str:
    """A ``bootstrap.servers`` list with one reachable endpoint of each live broker.

    An endpoint fits when its listener's security protocol (from the broker's
    ``listener_security_protocol_map``) is ``security_protocol`` and, if ``listener_name`` is
    given, its listener has that name. A broker with several fitting endpoints (an internal and an
    external listener, both PLAINTEXT) contributes the first one that accepts a TCP connection, so
    that an address only reachable inside the brokers' network is never handed to the consumers.
    """
    addresses: list[str] = []
    problems: list[str] = []
    registrations = broker_registrations(zk)
    for broker_id in sorted(registrations, key=lambda b: (len(b), b)):
        registered = broker_endpoints(registrations[broker_id])
        candidates = matching_endpoints(registered, security_protocol, listener_name)
        if not candidates:
            problems.append(
                f"broker {broker_id} registers no fitting endpoint among "
                f"[{', '.join(map(str, registered)) or 'none'}]"
            )
            continue
        unreachable = []
        for endpoint in candidates:
            why = probe(endpoint)
            if why is None:
                addresses.append(endpoint.address)
                break
            unreachable.append(f"{endpoint}: {why}")
        else:
            problems.append(f"broker {broker_id}: no endpoint reachable ({'; '.join(unreachable)})")
    for problem in problems:
        logger.warning("broker discovery: %s; skipped", problem)
    if not addresses:
        wanted = f"a {security_protocol.upper()} endpoint" + (
            f" on listener {listener_name.upper()}" if listener_name else ""
        )
        raise NoBrokersError(
            f"no live Kafka broker under {BROKER_IDS_PATH} has {wanted} that this client can reach"
            + (f": {'; '.join(problems)}" if problems else " (no broker is registered)")
            + f". Name the listener to use with the kafkaParams key '{LISTENER_NAME_PARAM}', set "
            "'security.protocol', or give 'bootstrap.servers'."
        )
    return ",".join(addresses)


def registration_version(registration: bytes) -> int | None:
    """The ``version`` field of a broker registration (None when unreadable)."""
    try:
        info = json.loads(registration.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    version = info.get("version") if isinstance(info, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def broker_registrations(zk: KazooClient) -> dict[str, bytes]:
    """``{broker id: registration}`` of every live broker."""
    try:
        broker_ids = zk.get_children(BROKER_IDS_PATH)
    except NoNodeError:
        return {}
    registrations: dict[str, bytes] = {}
    for broker_id in broker_ids:
        try:
            registrations[broker_id], _ = zk.get(broker_path(broker_id))
        except NoNodeError:
            continue  # deregistered between the listing and the read
    return registrations


def legacy_protocol_fallback(registrations: Mapping[str, bytes]) -> str | None:
    """The ``broker.version.fallback`` the oldest pre-0.10 broker needs; None when all are 0.10+.

    During a rolling upgrade the oldest broker decides: a client speaks one protocol to all.
    """
    versions = [registration_version(data) for data in registrations.values()]
    legacy = sorted(v for v in versions if v is not None and v in _PRE_010_FALLBACKS)
    return _PRE_010_FALLBACKS[legacy[0]] if legacy else None


def legacy_protocol_config(zk: KazooClient, client_config: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka settings a client of the registered brokers needs on top of ``client_config``.

    Empty unless a registered broker is older than 0.10 and ``client_config`` sets neither
    ``api.version.request`` nor ``broker.version.fallback``: an unchanged pyspark 2.4 app against a
    0.9 cluster would otherwise receive nothing, its requests timing out in silence.
    """
    if API_VERSION_REQUEST in client_config or BROKER_VERSION_FALLBACK in client_config:
        return {}
    fallback = legacy_protocol_fallback(broker_registrations(zk))
    if fallback is None:
        return {}
    with _announced_lock:
        first = fallback not in _announced_fallbacks
        _announced_fallbacks.add(fallback)
    if first:
        logger.info(
            "ZooKeeper registers brokers older than 0.10: using %s=false and %s=%s for them "
            "(set either key in kafkaParams to decide yourself)",
            API_VERSION_REQUEST,
            BROKER_VERSION_FALLBACK,
            fallback,
        )
    return {API_VERSION_REQUEST: False, BROKER_VERSION_FALLBACK: fallback}


def parse_topic_partitions(data: bytes | None) -> list[int]:
    """Sorted partition ids from a ``/brokers/topics/<topic>`` value (empty if none)."""
    if not data:
        return []
    try:
        partitions = json.loads(data.decode("utf-8")).get("partitions") or {}
        return sorted(int(p) for p in partitions)
    except (UnicodeDecodeError, ValueError, AttributeError):
        logger.warning("unreadable topic registration %r", data[:200])
        return []


def topic_partitions(zk: KazooClient, topics: Iterable[str]) -> dict[str, list[int]]:
    """``{topic: sorted partitions}``; a topic that does not exist yet has none."""
    result: dict[str, list[int]] = {}
    for topic in topics:
        try:
            data, _ = zk.get(topic_path(topic))
        except NoNodeError:
            data = None
        result[topic] = parse_topic_partitions(data)
    return result

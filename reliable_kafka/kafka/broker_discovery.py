"""What Kafka itself registers in ZooKeeper: live brokers and each topic's partitions.

Brokers write ``/brokers/ids/<id>`` (JSON with ``host``/``port``, and ``endpoints`` from 0.9 on);
the controller writes ``/brokers/topics/<topic>`` (``{"partitions": {"0": [replicas]}}``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from reliable_kafka.kafka.zk_paths import BROKER_IDS_PATH, broker_path, topic_path

logger = logging.getLogger(__name__)


class NoBrokersError(RuntimeError):
    """No live broker is registered in ZooKeeper."""


def broker_address(registration: bytes, security_protocol: str = "PLAINTEXT") -> str | None:
    """``host:port`` from one broker registration, preferring the endpoint for our protocol."""
    try:
        info = json.loads(registration.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    wanted = f"{security_protocol.upper()}://"
    for endpoint in info.get("endpoints") or ():
        if isinstance(endpoint, str) and endpoint.upper().startswith(wanted):
            return endpoint[len(wanted) :]
    host, port = info.get("host"), info.get("port")
    if host and isinstance(port, int) and port > 0:
        return f"{host}:{port}"
    return None


def discover_bootstrap_servers(zk: KazooClient, security_protocol: str = "PLAINTEXT") -> str:
    """A ``bootstrap.servers`` list of every live broker, for when the user gave none."""
    addresses: list[str] = []
    try:
        broker_ids = zk.get_children(BROKER_IDS_PATH)
    except NoNodeError:
        broker_ids = []
    for broker_id in sorted(broker_ids):
        try:
            data, _ = zk.get(broker_path(broker_id))
        except NoNodeError:
            continue  # deregistered between the listing and the read
        address = broker_address(data, security_protocol)
        if address is None:
            logger.warning("broker %s has no %s endpoint in ZooKeeper; skipped", broker_id, security_protocol)
            continue
        addresses.append(address)
    if not addresses:
        raise NoBrokersError(
            f"no live Kafka broker with a {security_protocol} endpoint under {BROKER_IDS_PATH}"
        )
    return ",".join(addresses)


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

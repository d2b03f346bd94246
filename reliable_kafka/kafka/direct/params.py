"""``kafkaParams`` as pyspark 2.4's ``createDirectStream`` and ``createRDD`` took them.

The direct approach has no consumer group: it needs the brokers (``metadata.broker.list``, 0.8's
name, or ``bootstrap.servers``) and reads ``auto.offset.reset`` (``smallest``/``largest`` or the
newer names); every other key goes to librdkafka, as for ``createStream``. ``group.id`` is
optional: the readers never commit, and librdkafka's consumer wants one, so a fixed one stands in.
Against brokers older than 0.10 (asked once, see ``broker_protocol_probe``) the legacy protocol
settings are added, as ``createStream`` adds them from the brokers' ZooKeeper registrations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reliable_kafka.kafka.client.broker_protocol_probe import legacy_protocol_params
from reliable_kafka.kafka.client.client_config import check_client_config
from reliable_kafka.kafka.client.params import KafkaParams, parse_kafka_params

# What the readers' librdkafka consumers are called when kafkaParams names no group.
DEFAULT_GROUP_ID = "reliable-kafka-direct"


@dataclass(frozen=True)
class DirectKafkaParams:
    """The caller's params with ``group.id`` filled in (what executors get, plain data) and
    their parsed form. Both may hold secrets: log them only through ``redacted``."""

    params: dict[str, Any] = field(repr=False)
    parsed: KafkaParams


def direct_kafka_params(kafka_params: Any) -> DirectKafkaParams:
    """``TypeError``/``ValueError`` naming what is wrong; the caller's dict is not modified."""
    if not isinstance(kafka_params, Mapping):
        raise TypeError(f"kafkaParams should be dict, got {type(kafka_params).__name__}")
    params = dict(kafka_params)
    if not (params.get("metadata.broker.list") or params.get("bootstrap.servers")):
        raise ValueError(
            "kafkaParams needs the brokers: 'metadata.broker.list' (or 'bootstrap.servers'), "
            "as host:port[,host:port...]"
        )
    params.setdefault("group.id", DEFAULT_GROUP_ID)
    servers = str(params.get("bootstrap.servers") or params["metadata.broker.list"])
    params.update(legacy_protocol_params(servers, params))
    parsed = parse_kafka_params(params)
    # librdkafka's keys and values are checked now, not by the first task that reads.
    check_client_config(parsed.consumer_config(""))
    return DirectKafkaParams(params, parsed)

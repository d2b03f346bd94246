"""The options of ``spark.readStream.format("reliable-kafka")``, checked before a query starts.

Spark's Kafka source's names where they mean the same: ``kafka.*`` (the client's settings, the
prefix dropped), ``subscribe`` / ``subscribePattern`` / ``assign`` (exactly one),
``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``includeHeaders``. Then the
group, as ``createStream`` takes it in ``kafkaParams``: ``group.id`` (required),
``offsets.storage`` (``zookeeper``, ``kafka``, or ``dual``: Kafka with ``dual.commit.enabled``),
``dual.commit.enabled``, ``zookeeper.connect`` and the other ``zookeeper.*`` keys; the offsets
registry (``kafka.offsets.registry``) picks the store from them as it does for createStream.

Spark hands a Python data source its options with lower-cased names, so the model's aliases are
lower case; users write them in any case. An unknown option is an error naming the closest known
one: a misspelt ``maxOffsetsPerTriger`` would otherwise read without a bound, in silence.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from reliable_kafka.kafka.client.client_config import check_client_config
from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

KAFKA_PREFIX = "kafka."
ZOOKEEPER_PREFIX = "zookeeper."
# Spark's special offsets in startingOffsets' JSON.
EARLIEST, LATEST = -2, -1

# kafka.* keys the source owns: what it means is an option of its own (or its job).
_OWNED_CLIENT_KEYS = {
    "group.id": "the group is the option group.id (without the kafka. prefix)",
    "auto.offset.reset": "use startingOffsets (earliest, latest or JSON)",
    "enable.auto.commit": "the source commits the group's offsets itself, after each batch",
    "key.deserializer": "keys are binary, as in Spark's Kafka source",
    "value.deserializer": "values are binary, as in Spark's Kafka source",
}
_ALIASES = {
    "group.id": "group_id",
    "subscribe": "subscribe",
    "subscribepattern": "subscribe_pattern",
    "assign": "assign",
    "startingoffsets": "starting_offsets",
    "maxoffsetspertrigger": "max_offsets_per_trigger",
    "failondataloss": "fail_on_data_loss",
    "includeheaders": "include_headers",
    "offsets.storage": "offsets_storage",
    "dual.commit.enabled": "dual_commit_enabled",
}
# Spark's names, as users write them, for messages.
_SPARK_NAMES = (
    "group.id",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "maxOffsetsPerTrigger",
    "failOnDataLoss",
    "includeHeaders",
    "offsets.storage",
    "dual.commit.enabled",
    "zookeeper.connect",
    "kafka.bootstrap.servers",
)


class KafkaSourceOptions(BaseModel):
    """The source's options, parsed; :meth:`of` builds it from what Spark hands the source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kafka: dict[str, str] = Field(repr=False, description="kafka.* without the prefix; may hold secrets")
    zookeeper: dict[str, str] = Field(default_factory=dict, repr=False, description="zookeeper.* keys")
    group_id: str = Field(min_length=1, description="group.id")
    subscribe: list[str] | None = None
    subscribe_pattern: str | None = None
    assign: list[TopicAndPartition] | None = None
    starting_offsets: Literal["earliest", "latest"] | dict[TopicAndPartition, int] = "latest"
    max_offsets_per_trigger: int | None = Field(None, gt=0)
    fail_on_data_loss: bool = True
    include_headers: bool = False
    offsets_storage: Literal["zookeeper", "kafka", "dual"] | None = None
    dual_commit_enabled: bool | None = None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> KafkaSourceOptions:
        """``ValueError`` naming the option when one is unknown, missing or wrong."""
        fields: dict[str, Any] = {"kafka": {}, "zookeeper": {}}
        unknown = []
        for name, value in options.items():
            key = name.lower()
            if key.startswith(KAFKA_PREFIX):
                fields["kafka"][key.removeprefix(KAFKA_PREFIX)] = value
            elif key.startswith(ZOOKEEPER_PREFIX):
                fields["zookeeper"][key] = value
            elif key in _ALIASES:
                fields[_ALIASES[key]] = value
            else:
                unknown.append(name)
        if unknown:
            raise ValueError("; ".join(_unknown(name) for name in sorted(unknown)))
        if "group_id" not in fields:
            raise ValueError(
                "option group.id is required: the consumer group whose offsets the query starts from "
                "and commits to (the group.id of the createStream app it takes over)"
            )
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise ValueError(f'format "reliable-kafka": {_spark_names(str(exc))}') from None

    @field_validator("kafka")
    @classmethod
    def _client_settings(cls, value: dict[str, str]) -> dict[str, str]:
        for key, why in _OWNED_CLIENT_KEYS.items():
            if key in value:
                raise ValueError(f"kafka.{key} is not an option of this source: {why}")
        if not value.get("bootstrap.servers"):
            raise ValueError("kafka.bootstrap.servers is required (host:port[,host:port...])")
        return value

    @field_validator("subscribe", mode="before")
    @classmethod
    def _topics(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        topics = [topic.strip() for topic in value.split(",") if topic.strip()]
        if not topics:
            raise ValueError("subscribe names no topic: give topic[,topic...]")
        return topics

    @field_validator("subscribe_pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"subscribePattern {value!r} is not a regular expression: {exc}") from None
        return value

    @field_validator("assign", mode="before")
    @classmethod
    def _assigned(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        parsed = _json_object("assign", value, '{"topic": [0, 1]}')
        partitions = []
        for topic, numbers in parsed.items():
            if not isinstance(numbers, list) or not all(isinstance(p, int) for p in numbers):
                raise ValueError(
                    f'assign: {topic!r} needs a list of partition numbers, as {{"topic": [0, 1]}}'
                )
            partitions += [TopicAndPartition(topic, p) for p in numbers]
        if not partitions:
            raise ValueError("assign names no partition")
        return sorted(partitions)

    @field_validator("starting_offsets", mode="before")
    @classmethod
    def _starting(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.lower() in ("earliest", "latest"):
            return text.lower()
        parsed = _json_object("startingOffsets", text, '{"topic": {"0": 23, "1": -2}}')
        offsets = {}
        for topic, by_partition in parsed.items():
            if not isinstance(by_partition, dict):
                raise ValueError(f'startingOffsets: {topic!r} needs {{"partition": offset}}')
            for partition, offset in by_partition.items():
                if not str(partition).isdigit() or not isinstance(offset, int) or offset < EARLIEST:
                    raise ValueError(
                        f"startingOffsets: {topic} partition {partition!r} offset {offset!r}: expected a "
                        "partition number and an offset >= 0, -2 (earliest) or -1 (latest)"
                    )
                offsets[TopicAndPartition(topic, int(partition))] = offset
        return offsets

    @model_validator(mode="after")
    def _one_subscription_and_a_reachable_group(self) -> Self:
        given = [name for name, value in self._subscriptions().items() if value is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of subscribe, subscribePattern, assign"
                + (f" (got {', '.join(given)})" if given else " (the topics to read)")
            )
        # The group's params as createStream's parse them: offsets.storage=zookeeper without
        # zookeeper.connect, a bad zookeeper.* value... fail here, with the key's name.
        parse_kafka_params(self.group_params())
        # librdkafka's keys and values: kafka.fetch.max.bytez fails now, not in the first task.
        check_client_config(parse_kafka_params(self.reader_params()).consumer_config(""))
        return self

    def _subscriptions(self) -> dict[str, object]:
        return {
            "subscribe": self.subscribe,
            "subscribePattern": self.subscribe_pattern,
            "assign": self.assign,
        }

    def reader_params(self) -> dict[str, str]:
        """What the readers' and the driver's lookup clients take: the client settings and the
        group's id, no ZooKeeper (the brokers are given; the group's store is not theirs)."""
        return {**self.kafka, "group.id": self.group_id}

    def group_params(self) -> dict[str, str]:
        """The group's ``kafkaParams`` as ``createStream`` would take them, for its offset store."""
        params = {**self.kafka, **self.zookeeper, "group.id": self.group_id}
        if self.offsets_storage == "dual":
            params.update({"offsets.storage": "kafka", "dual.commit.enabled": "true"})
        elif self.offsets_storage is not None:
            params["offsets.storage"] = self.offsets_storage
        if self.dual_commit_enabled is not None and self.offsets_storage != "dual":
            params["dual.commit.enabled"] = str(self.dual_commit_enabled).lower()
        return params


def _json_object(option: str, text: str, example: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{option} is not JSON ({exc}); expected e.g. {example}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{option}: expected a JSON object, e.g. {example}")
    return parsed


def _unknown(name: str) -> str:
    closest = difflib.get_close_matches(name.lower(), [n.lower() for n in _SPARK_NAMES], n=1, cutoff=0.75)
    hint = ""
    if closest:
        hint = f"; did you mean {next(n for n in _SPARK_NAMES if n.lower() == closest[0])}?"
    return f'unknown option {name!r} of format "reliable-kafka"{hint}'


def _spark_names(message: str) -> str:
    """pydantic's message with the options' own names instead of the model's fields."""
    for spark_name in _SPARK_NAMES:
        field = _ALIASES.get(spark_name.lower())
        if field is not None and field != spark_name:
            message = re.sub(rf"\b{field}\b", spark_name, message)
    return message

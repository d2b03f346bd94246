"""``KafkaUtils.createDirectStream``'s checks and where the stream starts.

pyspark 2.4's rules: ``topics`` a list (a dict is a ``TypeError``), ``kafkaParams`` a dict with
the brokers, ``fromOffsets`` ``{TopicAndPartition: offset}`` naming exactly the partitions to
read (its topics must be ``topics``). Without ``fromOffsets`` every partition of the topics is
read from its log's start (``auto.offset.reset=smallest``) or end (``largest``, the default).
A ``fromOffsets`` offset outside its partition's log is moved as ``auto.offset.reset`` says, and
logged, as 2.4's readers handled ``OffsetOutOfRange``. A topic Kafka does not have follows
createStream's rule (``kafka/client/missing_topics.py``): a ``ValueError`` naming it once it has
been missing for ``missing.topic.timeout.ms``; with ``allow.auto.create.topics=true`` the brokers
are asked to create it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from reliable_kafka.kafka.client.missing_topics import MissingTopicError, wait_for_topics
from reliable_kafka.kafka.client.params import OffsetReset
from reliable_kafka.kafka.client.topic_lookup import TopicLookup
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.kafka_cluster import KafkaCluster
from reliable_kafka.kafka.direct.params import DirectKafkaParams

logger = logging.getLogger(__name__)

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def checked_topics(topics: Any) -> list[str]:
    if not isinstance(topics, list):
        raise TypeError(f"topics should be list, got {type(topics).__name__}")
    if not topics:
        raise ValueError("topics must name at least one topic")
    for topic in topics:
        if not isinstance(topic, str) or not _TOPIC_NAME.fullmatch(topic):
            raise ValueError(f"invalid topic name {topic!r}: use 1-249 of [a-zA-Z0-9._-]")
    return sorted(set(topics))


def checked_from_offsets(from_offsets: Any, topics: list[str]) -> dict[TopicAndPartition, int]:
    if from_offsets is None:
        return {}
    if not isinstance(from_offsets, Mapping):
        raise TypeError(
            f"fromOffsets should be dict (TopicAndPartition -> int), got {type(from_offsets).__name__}"
        )
    checked: dict[TopicAndPartition, int] = {}
    for tp, offset in from_offsets.items():
        if not (isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str) and isinstance(tp[1], int)):
            raise TypeError(f"fromOffsets keys should be TopicAndPartition, got {tp!r}")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise TypeError(f"fromOffsets[{tp}] should be an int offset, got {offset!r}")
        checked[TopicAndPartition(*tp)] = offset
    named = sorted({tp.topic for tp in checked})
    if checked and named != topics:
        # pyspark 2.4's helper refused the same mismatch.
        raise ValueError(f"the topics {topics} are not the topics of fromOffsets {named}")
    return checked


def await_direct_topics(params: DirectKafkaParams, topics: list[str]) -> None:
    """Return once Kafka has every topic; a ``ValueError`` naming those it still did not have after
    ``missing.topic.timeout.ms`` (an argument error of createDirectStream, as in pyspark 2.4)."""
    servers = str(params.params.get("bootstrap.servers") or params.params["metadata.broker.list"])
    lookup = TopicLookup(params.parsed.consumer_config(servers), f"createDirectStream of {', '.join(topics)}")
    try:
        wait_for_topics(topics, lookup, params.parsed.missing_topic_timeout_ms)
    except MissingTopicError as exc:
        raise ValueError(str(exc)) from None


def starting_offsets(
    cluster: KafkaCluster, topics: list[str], from_offsets: dict[TopicAndPartition, int], reset: OffsetReset
) -> dict[TopicAndPartition, int]:
    """The first offset to read of every partition the stream reads."""
    known = cluster.partitions(topics)
    if not from_offsets:
        logs = cluster.offsets(known)
        return {tp: start if reset == "smallest" else end for tp, (start, end) in logs.items()}
    unknown = sorted(set(from_offsets) - set(known))
    if unknown:
        raise ValueError(f"fromOffsets names partitions Kafka does not have: {', '.join(map(str, unknown))}")
    logs = cluster.offsets(from_offsets)
    chosen: dict[TopicAndPartition, int] = {}
    for tp, offset in sorted(from_offsets.items()):
        start, end = logs[tp]
        if start <= offset <= end:
            chosen[tp] = offset
            continue
        chosen[tp] = start if reset == "smallest" else end
        logger.warning(
            "fromOffsets[%s]=%d is outside its log [%d, %d]: starting at %d (auto.offset.reset=%s)",
            tp,
            offset,
            start,
            end,
            chosen[tp],
            reset,
        )
    return chosen

"""``KafkaUtils``: pyspark 2.4's ``pyspark.streaming.kafka`` entry points, brought back.

``createDirectStream`` and ``createRDD`` read exact offset ranges without a receiver (Spark's
direct approach; see ``direct_kafka_input_dstream`` and ``kafka_rdd``). ``createStream``: same
signature and defaults as pyspark 2.4 (``topics`` maps topic -> number of consumer threads,
``storageLevel`` defaults to ``MEMORY_AND_DISK_2``, keys and values are UTF-8 decoded), returning
a DStream of ``(key, value)``. Differences, all additive:

* ``settings=KafkaStreamSettings(...)`` instead of the positional arguments (environment
  variables ``RELIABLE_KAFKA_*`` fill it, see ``reliable_kafka.settings``);
* ``messageHandler``, as pyspark's ``createDirectStream`` had it: a function of a
  :class:`KafkaMessageAndMetadata` (topic, partition, offset, key, message) whose result is the
  stream's element, for sinks that need the offsets of each record;
* every batch RDD has ``offsetRanges()``;
* the caller's ``kafkaParams`` dict is not modified (pyspark wrote into it), and a
  ``zookeeper.connect``/``group.id`` in it that contradicts the arguments is an error.

Decoders and the message handler run when a batch is computed, on the executors; blocks keep the
raw bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel as PySparkStorageLevel

from reliable_kafka.dstream.streaming_context import StreamingContextLike
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.broker import Broker
from reliable_kafka.kafka.direct.create_direct_stream import (
    await_direct_topics,
    checked_from_offsets,
    checked_topics,
    starting_offsets,
)
from reliable_kafka.kafka.direct.create_rdd import create_rdd
from reliable_kafka.kafka.direct.direct_kafka_input_dstream import DirectKafkaInputDStream
from reliable_kafka.kafka.direct.kafka_cluster import KafkaCluster
from reliable_kafka.kafka.direct.kafka_rdd import KafkaRDD
from reliable_kafka.kafka.direct.message_and_metadata import KeyValueDecoder, utf8_decoder
from reliable_kafka.kafka.direct.offset_commit import committer_for
from reliable_kafka.kafka.direct.params import direct_kafka_params
from reliable_kafka.kafka.receiver.decode_errors import DeadLetterWriter, DecodeErrors, check_decode_errors
from reliable_kafka.kafka.receiver.kafka_input_dstream import KafkaInputDStream
from reliable_kafka.kafka.record_decoder import KafkaRecordDecoder, MessageHandler
from reliable_kafka.settings import KafkaStreamSettings

if TYPE_CHECKING:
    from pyspark import SparkContext


def _check_context(ssc: object) -> None:
    # pyspark's own StreamingContext (a 2.4 app whose imports were half changed) has no graph or
    # settings: refuse it here rather than with an AttributeError deep in a DStream.
    if not isinstance(ssc, StreamingContextLike):
        raise TypeError(
            "ssc should be a reliable_kafka.StreamingContext, got "
            f"{type(ssc).__module__}.{type(ssc).__name__}"
        )


# pyspark 2.4 put this into every createStream's params; a value the caller gives wins here.
_DEFAULT_ZOOKEEPER_CONNECTION_TIMEOUT_MS = "10000"
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_DEFAULT_STORAGE_LEVEL = PySparkStorageLevel.MEMORY_AND_DISK_2
# With the write-ahead log on, the log is the block's second copy: Spark cuts the default's
# replication to 1 and warns that 2 is unnecessary, a warning no user who kept the default can act
# on. A default does not warn; only a replication the user asked for does.
_DEFAULT_STORAGE_LEVEL_WITH_WAL = PySparkStorageLevel.MEMORY_AND_DISK


class KafkaUtils:
    @staticmethod
    def createStream(  # noqa: PLR0917 - pyspark's positional signature
        ssc: StreamingContextLike,
        zkQuorum: str | None = None,
        groupId: str | None = None,
        topics: Mapping[str, int] | None = None,
        kafkaParams: Mapping[str, Any] | None = None,
        storageLevel: Any = None,
        keyDecoder: KeyValueDecoder = utf8_decoder,
        valueDecoder: KeyValueDecoder = utf8_decoder,
        *,
        messageHandler: MessageHandler | None = None,
        settings: KafkaStreamSettings | None = None,
        decodeErrors: DecodeErrors | None = None,
        deadLetterTopic: str | None = None,
    ) -> KafkaInputDStream:
        """Create an input stream that pulls messages from Kafka brokers through a consumer group.

        :param ssc: the ``reliable_kafka.StreamingContext``
        :param zkQuorum: ZooKeeper quorum (``hostname:port,hostname:port,..[/chroot]``); None
            for no ZooKeeper: then ``kafkaParams`` needs ``bootstrap.servers``, and Kafka's
            group coordinator splits the partitions among the group's receivers
        :param groupId: the group id of this consumer
        :param topics: topic -> number of consumer threads (they count in the group's range
            assignment; each owned partition is read by a thread of its own)
        :param kafkaParams: more Kafka 0.8 consumer params and librdkafka settings; ours:
            ``missing.topic.timeout.ms`` (default 5000, -1: no bound), how long a topic Kafka
            does not have may stay missing before ``awaitTermination`` raises a
            ``FatalReceiverError`` naming it (with ``allow.auto.create.topics=true`` the
            receiver asks the brokers to create it)
        :param storageLevel: where received blocks are kept (a pyspark or reliable_kafka
            ``StorageLevel``, or a level's name as pyspark spells it); by default
            ``MEMORY_AND_DISK_2``, or ``MEMORY_AND_DISK`` with the receiver write-ahead log on
        :param keyDecoder: decodes each key (bytes or ``None``)
        :param valueDecoder: decodes each value (bytes or ``None``)
        :param messageHandler: if given, the stream's elements are ``messageHandler(m)`` of each
            :class:`KafkaMessageAndMetadata` instead of ``(key, value)``
        :param settings: the whole stream as :class:`KafkaStreamSettings`, instead of
            ``zkQuorum``/``groupId``/``topics``/``kafkaParams``/``storageLevel``
        :param decodeErrors: what a record the decoders or the handler fail on does to its
            batch: ``"fail"`` it (default; the error names topic, partition and offset),
            ``"skip"`` the record, or write it to ``deadLetterTopic`` (``"deadletter"``);
            skipped and dead-lettered records are counted in the listener's batch info
            (``StreamInputInfo.metadata``); with ``settings``, its ``decode_errors``
        :param deadLetterTopic: the topic of ``decodeErrors="deadletter"`` (with ``settings``,
            its ``dead_letter_topic``)
        :return: a DStream; with the receiver write-ahead log on, nothing received is lost
        """
        _check_context(ssc)
        _checked_decoders(keyDecoder, valueDecoder, messageHandler)
        if settings is not None:
            arguments = {
                "zkQuorum": zkQuorum,
                "groupId": groupId,
                "topics": topics,
                "kafkaParams": kafkaParams,
                "decodeErrors": decodeErrors,
                "deadLetterTopic": deadLetterTopic,
            }
            given = [name for name, value in arguments.items() if value is not None]
            if storageLevel is not None:
                given.append("storageLevel")
            if given:
                raise TypeError(
                    f"give either settings or {', '.join(given)}, not both: settings holds them all"
                )
            params, topic_threads, level = _from_settings(settings)
            level_is_default = "storage_level" not in settings.model_fields_set
        else:
            params = _params_from_arguments(zkQuorum, groupId, kafkaParams)
            level_is_default = storageLevel is None
            level = _DEFAULT_STORAGE_LEVEL if level_is_default else storageLevel
            topic_threads = _checked_topics(topics)
        if level_is_default and ssc.settings.wal.enable:
            level = _DEFAULT_STORAGE_LEVEL_WITH_WAL
        if settings is not None:
            decodeErrors, deadLetterTopic = settings.decode_errors, settings.dead_letter_topic
        mode: DecodeErrors = decodeErrors or "fail"
        check_decode_errors(mode, deadLetterTopic)
        dead_letter = DeadLetterWriter(deadLetterTopic, params) if deadLetterTopic else None
        decoder = KafkaRecordDecoder(
            keyDecoder, valueDecoder, messageHandler, decode_errors=mode, dead_letter=dead_letter
        )
        return KafkaInputDStream(ssc, params, topic_threads, level, decoder)

    @staticmethod
    def createDirectStream(  # noqa: PLR0917 - pyspark's positional signature
        ssc: StreamingContextLike,
        topics: list[str],
        kafkaParams: Mapping[str, Any],
        fromOffsets: Mapping[TopicAndPartition, int] | None = None,
        keyDecoder: KeyValueDecoder = utf8_decoder,
        valueDecoder: KeyValueDecoder = utf8_decoder,
        messageHandler: MessageHandler | None = None,
    ) -> DirectKafkaInputDStream:
        """Create a stream that reads Kafka without a receiver (pyspark 2.4's signature).

        Each batch is, per partition, the offsets from the previous batch's end to the latest
        (bounded by ``spark.streaming.kafka.maxRatePerPartition``, and by backpressure's rate
        when ``spark.streaming.backpressure.enabled``). Nothing is committed to Kafka or
        ZooKeeper unless ``StreamingSettings.kafka.commit_completed_batches`` is on: then each
        completed batch's offsets go to the group of ``kafkaParams``' ``group.id``, for lag
        tools only. With a checkpoint directory, ``getOrCreate`` after a driver crash runs the
        pending batches again with exactly their ranges, then goes on from there.

        :param ssc: the ``reliable_kafka.StreamingContext``
        :param topics: list of topic names
        :param kafkaParams: ``metadata.broker.list`` (or ``bootstrap.servers``),
            ``auto.offset.reset`` (``smallest``/``largest``, default ``largest``),
            ``missing.topic.timeout.ms`` (default 5000, -1: no bound: how long a topic Kafka does
            not have may stay missing before this raises a ``ValueError`` naming it; with
            ``allow.auto.create.topics=true`` the brokers are asked to create it) and librdkafka
            settings
        :param fromOffsets: ``{TopicAndPartition: offset}``: where to start, and which
            partitions to read; by default every partition of ``topics``, from
            ``auto.offset.reset``
        :param keyDecoder: decodes each key (bytes or ``None``)
        :param valueDecoder: decodes each value (bytes or ``None``)
        :param messageHandler: if given, the stream's elements are ``messageHandler(m)`` of each
            :class:`KafkaMessageAndMetadata` instead of ``(key, value)``
        :return: a DStream whose RDDs (in ``foreachRDD`` and ``transform``) have ``offsetRanges()``
        """
        _check_context(ssc)
        decoder = KafkaRecordDecoder(*_checked_decoders(keyDecoder, valueDecoder, messageHandler))
        names = checked_topics(topics)
        params = direct_kafka_params(kafkaParams)
        requested = checked_from_offsets(fromOffsets, names)
        committer = None
        if ssc.settings.kafka.commit_completed_batches:
            if not kafkaParams.get("group.id"):
                raise ValueError(
                    "commit_completed_batches needs kafkaParams' group.id: the group whose offsets "
                    "show the direct stream's progress"
                )
            committer = committer_for(f"Direct Kafka stream of {', '.join(names)}", params.params)
        await_direct_topics(params, names)
        cluster = KafkaCluster(params.params, ssc.settings.kafka.max_retries)
        try:
            offsets = starting_offsets(cluster, names, requested, params.parsed.group.auto_offset_reset)
            return DirectKafkaInputDStream(ssc, params.params, offsets, decoder, cluster, committer=committer)
        except BaseException:
            cluster.close()
            if committer is not None:
                committer.stop(5.0)
            raise

    @staticmethod
    def createRDD(  # noqa: PLR0917 - pyspark's positional signature
        sc: SparkContext,
        kafkaParams: Mapping[str, Any],
        offsetRanges: list[OffsetRange],
        leaders: Mapping[TopicAndPartition, Broker] | None = None,
        keyDecoder: KeyValueDecoder = utf8_decoder,
        valueDecoder: KeyValueDecoder = utf8_decoder,
        messageHandler: MessageHandler | None = None,
    ) -> KafkaRDD:
        """Create an RDD of exactly the records of ``offsetRanges`` (pyspark 2.4's signature).

        :param sc: the SparkContext
        :param kafkaParams: ``metadata.broker.list`` (or ``bootstrap.servers``) and librdkafka
            settings
        :param offsetRanges: list of :class:`OffsetRange` (one partition of the RDD each;
            ``untilOffset`` is exclusive)
        :param leaders: ``{TopicAndPartition: Broker}``: the host each partition's task prefers
            (None or empty: any)
        :param keyDecoder: decodes each key (bytes or ``None``)
        :param valueDecoder: decodes each value (bytes or ``None``)
        :param messageHandler: if given, the RDD's elements are ``messageHandler(m)`` of each
            :class:`KafkaMessageAndMetadata` instead of ``(key, value)``
        :return: a :class:`KafkaRDD`, with ``offsetRanges()``. Ranges are checked against Kafka
            first: one beyond its partition's log end is a ``ValueError``, one Kafka no longer
            has (retention) a ``LostOffsetsError`` ("records lost: ...")
        """
        decoder = KafkaRecordDecoder(*_checked_decoders(keyDecoder, valueDecoder, messageHandler))
        return create_rdd(sc, kafkaParams, offsetRanges, leaders, decoder)


def _checked_decoders(
    key_decoder: Any, value_decoder: Any, message_handler: Any
) -> tuple[KeyValueDecoder, KeyValueDecoder, MessageHandler | None]:
    for name, function in (("keyDecoder", key_decoder), ("valueDecoder", value_decoder)):
        if not callable(function):
            raise TypeError(f"{name} should be callable, got {function!r}")
    if message_handler is not None and not callable(message_handler):
        raise TypeError(f"messageHandler should be callable, got {message_handler!r}")
    return key_decoder, value_decoder, message_handler


def _params_from_arguments(
    zk_quorum: str | None, group_id: str | None, kafka_params: Mapping[str, Any] | None
) -> dict[str, Any]:
    if zk_quorum is not None and not isinstance(zk_quorum, str):
        raise TypeError(
            f"zkQuorum should be a str (host:port[,host:port...][/chroot]) or None, got {zk_quorum!r}"
        )
    if not isinstance(group_id, str):
        raise TypeError(f"groupId should be a str, got {group_id!r}")
    if not group_id.strip():
        raise ValueError("groupId must not be empty")
    if kafka_params is None:
        kafka_params = {}
    if not isinstance(kafka_params, Mapping):
        raise TypeError(f"kafkaParams should be dict, got {type(kafka_params).__name__}")
    params = dict(kafka_params)
    owned = {"group.id": group_id}
    if zk_quorum:
        owned["zookeeper.connect"] = zk_quorum
        params.setdefault("zookeeper.connection.timeout.ms", _DEFAULT_ZOOKEEPER_CONNECTION_TIMEOUT_MS)
    elif not params.get("zookeeper.connect") and not (
        params.get("bootstrap.servers") or params.get("metadata.broker.list")
    ):
        raise ValueError(
            "neither zkQuorum nor kafkaParams['bootstrap.servers'] is given: a ZooKeeper quorum, or the "
            "brokers whose group coordinator keeps the group, is needed"
        )
    # Spark's createStream overwrote these keys; a contradiction is more likely a mistake.
    for key, value in owned.items():
        given = params.get(key)
        if given is not None and str(given).strip() != value:
            raise ValueError(f"kafkaParams[{key!r}]={given!r} contradicts the argument {value!r}")
        params[key] = value
    return params


def _checked_topics(topics: Mapping[str, int] | None) -> dict[str, int]:
    if not isinstance(topics, Mapping):
        # pyspark 2.4's words, then the form it means: a list of names is the usual mistake
        # (createDirectStream takes one), so the example is made of the names given.
        given = topics if isinstance(topics, list | tuple | set) else ()
        names = [name for name in given if isinstance(name, str)][:3]
        example = {name: 1 for name in names or ["events"]}
        raise TypeError(
            f"topics should be dict of topic -> number of consumer threads, e.g. {example!r}, "
            f"as in pyspark 2.4's createStream; got {type(topics).__name__}"
        )
    if not topics:
        raise ValueError("topics must name at least one topic")
    checked: dict[str, int] = {}
    for topic, threads in topics.items():
        if not isinstance(topic, str) or not _TOPIC_NAME.fullmatch(topic):
            raise ValueError(f"invalid topic name {topic!r}: use 1-249 of [a-zA-Z0-9._-]")
        if not isinstance(threads, int) or isinstance(threads, bool):
            raise TypeError(f"topics[{topic!r}] should be an int number of consumer threads, got {threads!r}")
        if threads < 1:
            raise ValueError(f"topics[{topic!r}] needs at least one consumer thread, got {threads}")
        checked[topic] = threads
    return checked


def _from_settings(settings: KafkaStreamSettings) -> tuple[dict[str, Any], dict[str, int], str]:
    if not isinstance(settings, KafkaStreamSettings):
        raise TypeError(f"settings should be a KafkaStreamSettings, got {type(settings).__name__}")
    zookeeper, group = settings.zookeeper, settings.group
    owned: dict[str, Any] = {
        "group.id": group.group_id,
        "auto.offset.reset": group.auto_offset_reset,
        "auto.commit.interval.ms": str(group.auto_commit_interval_ms),
        "rebalance.max.retries": str(group.rebalance_max_retries),
        "rebalance.backoff.ms": str(group.rebalance_backoff_ms),
    }
    if group.consumer_id is not None:
        owned["consumer.id"] = group.consumer_id
    if group.offsets_storage is not None:
        owned["offsets.storage"] = group.offsets_storage
    if group.dual_commit_enabled is not None:
        owned["dual.commit.enabled"] = str(group.dual_commit_enabled).lower()
    if group.partition_assignment_strategy is not None:
        owned["partition.assignment.strategy"] = group.partition_assignment_strategy
    if zookeeper is not None:
        owned["zookeeper.connect"] = zookeeper.connect
        owned["zookeeper.session.timeout.ms"] = str(zookeeper.session_timeout_ms)
        owned["zookeeper.connection.timeout.ms"] = str(zookeeper.connection_timeout_ms)
    if zookeeper is not None and zookeeper.auth_credentials is not None:
        credentials = zookeeper.auth_credentials.get_secret_value()
        if zookeeper.auth_scheme == "sasl":
            user, _, password = credentials.partition(":")
            owned["zookeeper.sasl.username"], owned["zookeeper.sasl.password"] = user, password
        else:
            owned["zookeeper.auth"] = credentials
    params: dict[str, Any] = dict(settings.kafka_params)
    for key, value in owned.items():
        if key in params and str(params[key]).strip() != str(value):
            # Never echo the value: zookeeper.auth and zookeeper.sasl.password are secrets.
            raise ValueError(
                f"settings.kafka_params[{key!r}] contradicts the structured settings; set it there only"
            )
        params[key] = value
    return params, _checked_topics(settings.topics), settings.storage_level

"""createStream's argument checks, the receiver it picks, and Spark's error for a WAL without checkpoint.

No Kafka is contacted: a stream validates its arguments when created and builds its receiver only
when the context starts.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark import StorageLevel as PySparkStorageLevel

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.kafka import KafkaInputDStream, KafkaReceiver, ReliableKafkaReceiver, utf8_decoder
from reliable_kafka.kafka.kafka_utils import KafkaRecordDecoder
from reliable_kafka.kafka.offsets.registry import storage_of
from reliable_kafka.receiver.wal_block_handler import RECEIVER_WAL_WITHOUT_CHECKPOINT
from reliable_kafka.settings import (
    ConsumerGroupSettings,
    KafkaStreamSettings,
    StreamingSettings,
    WriteAheadLogSettings,
    ZooKeeperSettings,
)
from reliable_kafka.storage import StorageLevel

ZK = "127.0.0.1:2181"


def test_utf8_decoder_is_pysparks() -> None:
    assert utf8_decoder(None) is None
    assert utf8_decoder("é".encode()) == "é"


def test_record_decoder_gives_key_value_pairs() -> None:
    assert KafkaRecordDecoder()((b"k", b"v", "t", 0, 5)) == ("k", "v")
    assert KafkaRecordDecoder()((None, None, "t", 0, 5)) == (None, None)
    handled = KafkaRecordDecoder(messageHandler=lambda m: (m.topic, m.partition, m.offset, m.key, m.message))
    assert handled((b"k", b"v", "t", 3, 7)) == ("t", 3, 7, "k", "v")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"topics": {}}, ValueError, "at least one topic"),
        (
            {"topics": ["t", "u"]},
            TypeError,
            r"topics should be dict of topic -> number of consumer threads, e\.g\. \{'t': 1, 'u': 1\}, "
            r"as in pyspark 2\.4's createStream; got list$",
        ),
        ({"topics": None}, TypeError, r"topics should be dict .*got NoneType$"),
        ({"topics": {"t": 0}}, ValueError, "at least one consumer thread"),
        ({"topics": {"t": -2}}, ValueError, "at least one consumer thread"),
        ({"topics": {"t": 1.5}}, TypeError, "number of consumer threads"),
        ({"topics": {"t": True}}, TypeError, "number of consumer threads"),
        ({"topics": {"bad topic": 1}}, ValueError, "invalid topic name"),
        ({"zkQuorum": "localhost"}, ValueError, "zookeeper.connect"),
        ({"zkQuorum": "localhost:99999"}, ValueError, "zookeeper.connect"),
        ({"zkQuorum": "a:1,:2"}, ValueError, "zookeeper.connect"),
        ({"zkQuorum": ""}, ValueError, r"neither zkQuorum nor kafkaParams\['bootstrap.servers'\]"),
        ({"zkQuorum": None}, ValueError, r"neither zkQuorum nor kafkaParams\['bootstrap.servers'\]"),
        (
            {"kafkaParams": {"partition.assignment.strategy": "roundrobin"}},
            ValueError,
            "assigns by range only",
        ),
        ({"zkQuorum": 2181}, TypeError, "zkQuorum should be a str"),
        ({"groupId": ""}, ValueError, "groupId must not be empty"),
        ({"groupId": None}, TypeError, "groupId should be a str"),
        ({"kafkaParams": [("a", "b")]}, TypeError, "kafkaParams should be dict"),
        ({"kafkaParams": {"group.id": "other"}}, ValueError, "contradicts"),
        ({"kafkaParams": {"auto.offset.reset": "sometimes"}}, ValueError, "auto.offset.reset"),
        (
            {"kafkaParams": {"fetch.wiat.max.ms": "100"}},
            ValueError,
            r"kafka param fetch\.wiat\.max\.ms: No such",
        ),
        (
            {"kafkaParams": {"auto.offset.rest": "smallest"}},
            ValueError,
            r"kafka param auto\.offset\.rest: No such .*; did you mean auto\.offset\.reset\?$",
        ),
        ({"kafkaParams": {"security.protocol": "PLAINTEXTX"}}, ValueError, "kafka param security.protocol"),
        ({"kafkaParams": {"fetch.wait.max.ms": [100]}}, ValueError, "fetch.wait.max.ms: expected a string"),
        ({"storageLevel": "MEMORY_SOMEWHERE"}, ValueError, "unknown storage level"),
        ({"keyDecoder": "utf-8"}, TypeError, "keyDecoder should be callable"),
        ({"messageHandler": 3}, TypeError, "messageHandler should be callable"),
    ],
)
def test_bad_arguments_fail_at_create_stream(
    spark_context: Any, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    ssc = StreamingContext(spark_context, 1)
    arguments: dict[str, Any] = {"zkQuorum": ZK, "groupId": "g", "topics": {"t": 1}, **kwargs}
    with pytest.raises(error, match=match):
        KafkaUtils.createStream(ssc, **arguments)
    assert ssc.graph.get_input_streams() == [], "a rejected stream must not join the graph"


def test_not_our_streaming_context_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"reliable_kafka\.StreamingContext"):
        KafkaUtils.createStream(object(), ZK, "g", {"t": 1})  # type: ignore[arg-type]


def test_the_wal_setting_picks_the_receiver(spark_context: Any) -> None:
    ssc = StreamingContext(spark_context, 1)
    stream = KafkaUtils.createStream(ssc, ZK, "g", {"t": 1})
    assert isinstance(stream, KafkaInputDStream)
    assert stream.name == f"Kafka stream [{stream.id}]"
    # The SparkConf of the test session leaves the WAL off: Spark's default.
    assert type(stream.get_receiver()) is KafkaReceiver

    wal_on = StreamingContext(spark_context, 1, StreamingSettings(wal=WriteAheadLogSettings(enable=True)))
    reliable = KafkaUtils.createStream(wal_on, ZK, "g", {"t": 3}, {"zookeeper.session.timeout.ms": "4000"})
    receiver = reliable.get_receiver()
    assert type(receiver) is ReliableKafkaReceiver
    assert receiver.topics == {"t": 3}
    assert receiver.params.zookeeper.session_timeout_ms == 4000
    # pyspark 2.4's default connection timeout, unless the caller sets one.
    assert receiver.params.zookeeper.connection_timeout_ms == 10000
    # The default, with the write-ahead log as the second copy: one copy, and no warning about it.
    assert receiver.storage_level == StorageLevel.of(PySparkStorageLevel.MEMORY_AND_DISK)
    explicit = KafkaUtils.createStream(
        wal_on, ZK, "g", {"t": 3}, storageLevel=PySparkStorageLevel.MEMORY_AND_DISK_2
    )
    assert explicit.get_receiver().storage_level == StorageLevel.of(PySparkStorageLevel.MEMORY_AND_DISK_2)


def test_wal_on_from_the_spark_conf(spark_context: Any) -> None:
    conf = {**dict(spark_context.getConf().getAll()), "spark.streaming.receiver.writeAheadLog.enable": "true"}
    ssc = StreamingContext(spark_context, 1, StreamingSettings.from_spark_conf(conf))
    assert type(KafkaUtils.createStream(ssc, ZK, "g", {"t": 1}).get_receiver()) is ReliableKafkaReceiver


def test_the_reliable_receiver_without_the_wal_when_asked_in_the_spark_conf(spark_context: Any) -> None:
    conf = {
        **dict(spark_context.getConf().getAll()),
        "spark.streaming.receiver.reliableWithoutWriteAheadLog": "true",
    }
    settings = StreamingSettings.from_spark_conf(conf)
    assert not settings.wal.enable and settings.receiver.reliable_without_wal
    ssc = StreamingContext(spark_context, 1, settings)
    stream = KafkaUtils.createStream(
        ssc, ZK, "g", {"t": 1}, storageLevel=PySparkStorageLevel.MEMORY_AND_DISK_2
    )
    receiver = stream.receiver_descriptor().build()  # as an executor builds it
    assert type(receiver) is ReliableKafkaReceiver
    assert receiver.storage_level.replication == 2


def test_wal_without_checkpoint_is_sparks_error(spark_context: Any) -> None:
    ssc = StreamingContext(spark_context, 1, StreamingSettings(wal=WriteAheadLogSettings(enable=True)))
    stream = KafkaUtils.createStream(ssc, ZK, "g", {"t": 1})
    stream.pprint()
    with pytest.raises(
        ValueError, match="Cannot enable receiver write-ahead log without checkpoint directory"
    ):
        ssc.start()
    assert ssc.getState().value == "STOPPED"
    assert RECEIVER_WAL_WITHOUT_CHECKPOINT.startswith("Cannot enable receiver write-ahead log")


def test_no_zookeeper_needs_bootstrap_servers_and_takes_the_coordinators_strategies(
    spark_context: Any,
) -> None:
    ssc = StreamingContext(spark_context, 1)
    stream = KafkaUtils.createStream(
        ssc,
        None,
        "g",
        {"t": 1},
        {"bootstrap.servers": "b:9092", "partition.assignment.strategy": "cooperative-sticky"},
    )
    assert stream.params.zookeeper is None
    assert stream.params.group.assignment_strategy == "cooperative-sticky"
    assert stream.receiver_descriptor().build().params.zookeeper is None
    settings = KafkaStreamSettings(
        group=ConsumerGroupSettings(group_id="orders"),
        topics={"orders": 1},
        kafka_params={"bootstrap.servers": "b:9092"},
    )
    assert KafkaUtils.createStream(ssc, settings=settings).params.zookeeper is None
    with pytest.raises(ValueError, match=r"neither zookeeper nor kafka_params\['bootstrap.servers'\]"):
        KafkaStreamSettings(group=ConsumerGroupSettings(group_id="orders"), topics={"orders": 1})


def test_kafka_stream_settings(spark_context: Any) -> None:
    settings = KafkaStreamSettings(
        zookeeper=ZooKeeperSettings(connect="zk1:2181,zk2:2181/kafka", session_timeout_ms=5000),
        group=ConsumerGroupSettings(group_id="orders", auto_offset_reset="smallest"),
        topics={"orders": 2, "refunds": 1},
        kafka_params={"fetch.wait.max.ms": "50"},
        storage_level="MEMORY_AND_DISK_SER",
    )
    ssc = StreamingContext(spark_context, 1)
    stream = KafkaUtils.createStream(ssc, settings=settings)
    assert stream.topics == {"orders": 2, "refunds": 1}
    assert stream.receiver_storage_level == StorageLevel.MEMORY_AND_DISK_SER
    params = stream.params
    assert params.zookeeper.connect == "zk1:2181,zk2:2181/kafka"
    assert params.zookeeper.session_timeout_ms == 5000
    assert params.group.group_id == "orders"
    assert params.group.auto_offset_reset == "smallest"
    assert params.client_config["fetch.wait.max.ms"] == "50"


def test_kafka_stream_settings_log_in_to_zookeeper_with_sasl_or_digest(spark_context: Any) -> None:
    ssc = StreamingContext(spark_context, 1)

    def zookeeper_params(scheme: str) -> Any:
        settings = KafkaStreamSettings(
            zookeeper=ZooKeeperSettings(connect=ZK, auth_scheme=scheme, auth_credentials="alice:hunter2"),
            group=ConsumerGroupSettings(group_id="g"),
            topics={"t": 1},
        )
        return KafkaUtils.createStream(ssc, settings=settings).params.zookeeper

    sasl = zookeeper_params("sasl")
    assert (sasl.sasl.mechanism, sasl.sasl.username, sasl.sasl.password) == ("DIGEST-MD5", "alice", "hunter2")
    assert sasl.auth is None and sasl.set_acl
    digest = zookeeper_params("digest")
    assert (digest.auth, digest.sasl, digest.set_acl) == ("alice:hunter2", None, True)
    with pytest.raises(ValueError, match=r"zookeeper\.sasl\.password is required") as info:
        KafkaUtils.createStream(
            ssc,
            settings=KafkaStreamSettings(
                zookeeper=ZooKeeperSettings(connect=ZK, auth_scheme="sasl", auth_credentials="hunter2"),
                group=ConsumerGroupSettings(group_id="g"),
                topics={"t": 1},
            ),
        )
    assert "hunter2" not in str(info.value)


def test_kafka_stream_settings_choose_the_offset_store(spark_context: Any) -> None:
    ssc = StreamingContext(spark_context, 1)

    def group_params(**group: Any) -> Any:
        settings = KafkaStreamSettings(
            zookeeper=ZooKeeperSettings(connect=ZK),
            group=ConsumerGroupSettings(group_id="g", **group),
            topics={"t": 1},
        )
        return KafkaUtils.createStream(ssc, settings=settings).params.group

    assert (group_params().offsets_storage, group_params().dual_commit_enabled) == ("zookeeper", False)
    dual = group_params(offsets_storage="kafka")
    assert (dual.offsets_storage, dual.dual_commit_enabled) == ("kafka", True)
    kafka_only = group_params(offsets_storage="kafka", dual_commit_enabled=False)
    assert storage_of(kafka_only) == "kafka"
    with pytest.raises(ValueError, match="offsets_storage"):
        ConsumerGroupSettings(group_id="g", offsets_storage="broker")


def test_kafka_stream_settings_choose_the_assignment_strategy_of_a_group_without_zookeeper(
    spark_context: Any,
) -> None:
    ssc = StreamingContext(spark_context, 1)

    def stream(zookeeper: ZooKeeperSettings | None, strategy: str) -> Any:
        settings = KafkaStreamSettings(
            zookeeper=zookeeper,
            group=ConsumerGroupSettings(group_id="g", partition_assignment_strategy=strategy),
            topics={"t": 1},
            kafka_params={"bootstrap.servers": "broker:9092"},
        )
        return KafkaUtils.createStream(ssc, settings=settings)

    assert stream(None, "cooperative-sticky").params.group.assignment_strategy == "cooperative-sticky"
    assert stream(None, "roundrobin").params.group.assignment_strategy == "roundrobin"
    with pytest.raises(ValueError, match="assigns by range only"):
        stream(ZooKeeperSettings(connect=ZK), "roundrobin")
    with pytest.raises(ValueError, match="partition_assignment_strategy"):
        ConsumerGroupSettings(group_id="g", partition_assignment_strategy="sticky")


def test_kafka_stream_settings_choose_what_decode_errors_do(spark_context: Any) -> None:
    base = {
        "zookeeper": ZooKeeperSettings(connect=ZK),
        "group": ConsumerGroupSettings(group_id="g"),
        "topics": {"t": 1},
    }
    ssc = StreamingContext(spark_context, 1)
    skipping = KafkaUtils.createStream(ssc, settings=KafkaStreamSettings(**base, decode_errors="skip"))
    assert skipping.decoder is not None and skipping.decoder.decode_errors == "skip"  # type: ignore[attr-defined]
    dead = KafkaStreamSettings(**base, decode_errors="deadletter", dead_letter_topic="dead")
    assert KafkaUtils.createStream(ssc, settings=dead).decoder.dead_letter.topic == "dead"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="decode_errors"):
        KafkaStreamSettings(**base, decode_errors="ignore")
    with pytest.raises(ValueError, match="needs deadLetterTopic"):
        KafkaUtils.createStream(ssc, settings=KafkaStreamSettings(**base, decode_errors="deadletter"))


def test_kafka_stream_settings_exclude_the_positional_arguments(spark_context: Any) -> None:
    settings = KafkaStreamSettings(
        zookeeper=ZooKeeperSettings(connect=ZK), group=ConsumerGroupSettings(group_id="g"), topics={"t": 1}
    )
    ssc = StreamingContext(spark_context, 1)
    with pytest.raises(TypeError, match="either settings or zkQuorum, topics"):
        KafkaUtils.createStream(ssc, ZK, topics={"t": 1}, settings=settings)
    with pytest.raises(TypeError, match="storageLevel"):
        KafkaUtils.createStream(ssc, storageLevel=PySparkStorageLevel.DISK_ONLY, settings=settings)
    with pytest.raises(TypeError, match="decodeErrors"):
        KafkaUtils.createStream(ssc, decodeErrors="skip", settings=settings)
    contradicting = settings.model_copy(update={"kafka_params": {"group.id": "other"}})
    with pytest.raises(ValueError, match=r"kafka_params\['group.id'\] contradicts"):
        KafkaUtils.createStream(ssc, settings=contradicting)

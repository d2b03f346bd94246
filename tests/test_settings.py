"""Settings: Spark's defaults, SparkConf keys, environment, and errors that name the field."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from reliable_kafka.settings import (
    KafkaStreamSettings,
    ReceiverSettings,
    StreamingSettings,
    ZooKeeperSettings,
    parse_time_ms,
)


def test_defaults_are_sparks() -> None:
    settings = StreamingSettings()
    assert settings.receiver.block_interval_ms == 200
    assert settings.receiver.block_queue_size == 10
    assert settings.receiver.max_rate == 0
    assert settings.receiver.block_store_timeout_s == 30
    assert settings.receiver.restart_delay_ms == 2000
    assert settings.receiver.max_restart_delay_ms == 60_000  # ours: Spark restarts every 2 s for ever
    assert settings.wal.enable is False
    assert settings.wal.rolling_interval_s == 60
    assert settings.wal.max_failures == 3
    assert settings.wal.driver_allow_batching is True
    assert settings.jobs.concurrent_jobs == 1
    # Ours: a batch's blocks kept in one place are read by one task up to 128 MiB.
    assert settings.receiver.block_rdd_max_partition_bytes == 128 << 20
    assert settings.backpressure.enabled is False
    assert (settings.backpressure.pid_proportional, settings.backpressure.pid_integral) == (1.0, 0.2)
    assert (settings.backpressure.pid_derived, settings.backpressure.pid_min_rate) == (0.0, 100.0)


def test_spark_conf_keys_are_read() -> None:
    settings = StreamingSettings.from_spark_conf(
        {
            "spark.streaming.blockInterval": "50ms",
            "spark.streaming.receiver.writeAheadLog.enable": "true",
            "spark.streaming.receiver.blockStoreTimeout": "1min",
            "spark.streaming.receiver.maxRestartDelay": "30s",
            "spark.streaming.concurrentJobs": "3",
            "spark.streaming.backpressure.pid.minRate": "10",
            "spark.streaming.blockRDD.maxPartitionBytes": "16m",
            "spark.app.name": "ignored",
        }
    )
    assert settings.receiver.block_rdd_max_partition_bytes == 16 << 20
    assert settings.receiver.block_interval_ms == 50
    assert settings.wal.enable is True
    assert settings.receiver.block_store_timeout_s == 60
    assert settings.receiver.max_restart_delay_ms == 30_000
    assert settings.jobs.concurrent_jobs == 3
    assert settings.backpressure.pid_min_rate == 10.0


def test_overrides_win_over_the_spark_conf() -> None:
    settings = StreamingSettings.from_spark_conf(
        {"spark.streaming.receiver.writeAheadLog.enable": "false"}, wal={"enable": True}
    )
    assert settings.wal.enable is True


def test_environment_is_read_with_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELIABLE_KAFKA_RECEIVER__BLOCK_INTERVAL_MS", "75")
    monkeypatch.setenv("RELIABLE_KAFKA_WAL__ENABLE", "true")
    settings = StreamingSettings()
    assert settings.receiver.block_interval_ms == 75
    assert settings.wal.enable is True


def test_a_bad_spark_value_names_the_key() -> None:
    with pytest.raises(ValueError, match=r"spark\.streaming\.blockInterval='soon'"):
        StreamingSettings.from_spark_conf({"spark.streaming.blockInterval": "soon"})
    with pytest.raises(ValueError, match=r"writeAheadLog\.enable='yes'"):
        StreamingSettings.from_spark_conf({"spark.streaming.receiver.writeAheadLog.enable": "yes"})


def test_a_bad_value_names_the_field() -> None:
    with pytest.raises(ValidationError, match="block_interval_ms"):
        ReceiverSettings(block_interval_ms=0)
    with pytest.raises(ValidationError, match="concurrent_jobs"):
        StreamingSettings.from_spark_conf({"spark.streaming.concurrentJobs": "0"})


def test_time_strings() -> None:
    assert parse_time_ms("200ms", "ms") == 200
    assert parse_time_ms("2s", "ms") == 2000
    assert parse_time_ms("1min", "s") == 60_000
    assert parse_time_ms("30", "s") == 30_000
    with pytest.raises(ValueError, match="not a time"):
        parse_time_ms("2 fortnights", "s")


def test_kafka_stream_settings_validate_topics_and_zookeeper() -> None:
    settings = KafkaStreamSettings(
        zookeeper={"connect": "127.0.0.1:2181/kafka"}, group={"group_id": "g"}, topics={"events": 2}
    )
    assert settings.topics == {"events": 2}
    assert settings.group.auto_offset_reset == "largest"
    with pytest.raises(ValidationError, match="topics"):
        KafkaStreamSettings(zookeeper={"connect": "127.0.0.1:2181"}, group={"group_id": "g"}, topics={})
    with pytest.raises(ValidationError, match="at least one consumer thread"):
        KafkaStreamSettings(zookeeper={"connect": "127.0.0.1:2181"}, group={"group_id": "g"}, topics={"t": 0})
    with pytest.raises(ValidationError, match="connect"):
        ZooKeeperSettings(connect="localhost")


def test_zookeeper_credentials_are_never_shown() -> None:
    zk = ZooKeeperSettings(connect="127.0.0.1:2181", auth_scheme="digest", auth_credentials="user:hunter2")
    assert "hunter2" not in repr(zk)
    assert "hunter2" not in str(zk.model_dump())
    assert zk.auth_credentials is not None and zk.auth_credentials.get_secret_value() == "user:hunter2"
    with pytest.raises(ValidationError, match="go together"):
        ZooKeeperSettings(connect="127.0.0.1:2181", auth_scheme="digest")


def kafka_stream(**fields: object) -> KafkaStreamSettings:
    return KafkaStreamSettings(
        zookeeper={"connect": "zk:2181"}, group={"group_id": "g"}, topics={"t": 1}, **fields
    )


def test_a_misspelt_keyword_fails_and_names_the_field() -> None:
    with pytest.raises(ValidationError, match="recevier"):
        StreamingSettings(recevier={"block_interval_ms": 100})
    with pytest.raises(ValidationError, match="kafka_param"):
        kafka_stream(kafka_param={"client.id": "c"})


def test_the_environment_may_hold_the_other_models_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELIABLE_KAFKA_ZOOKEEPER__CONNECT", "zk:2181")
    monkeypatch.setenv("RELIABLE_KAFKA_GROUP__GROUP_ID", "g")
    monkeypatch.setenv("RELIABLE_KAFKA_TOPICS", '{"t": 2}')
    monkeypatch.setenv("RELIABLE_KAFKA_RECEIVER__BLOCK_INTERVAL_MS", "100")
    assert StreamingSettings().receiver.block_interval_ms == 100
    assert KafkaStreamSettings().topics == {"t": 2}


def test_the_storage_level_is_checked_at_construction() -> None:
    assert kafka_stream(storage_level="memory_and_disk_ser_2").storage_level == "MEMORY_AND_DISK_2"
    with pytest.raises(ValidationError, match="storage_level") as info:
        kafka_stream(storage_level="MEMORY_AND_DISKK")
    assert "unknown storage level" in str(info.value)


def test_kafka_params_secrets_are_masked_in_repr_and_str() -> None:
    settings = kafka_stream(
        kafka_params={"sasl.password": "hunter2", "ssl.key.pem": "-----BEGIN KEY", "client.id": "c"}
    )
    for shown in (repr(settings), str(settings)):
        assert "hunter2" not in shown and "BEGIN KEY" not in shown
        assert "'client.id': 'c'" in shown
    # Only the display is masked: the receiver still gets the real values.
    assert settings.kafka_params["sasl.password"] == "hunter2"


def test_given_fields_override_the_spark_conf_which_overrides_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RELIABLE_KAFKA_UI__PORT", "4099")
    monkeypatch.setenv("RELIABLE_KAFKA_UI__HOST", "127.0.0.9")
    conf = {"spark.streaming.ui.port": "4070", "spark.streaming.receiver.writeAheadLog.enable": "true"}
    resolved = StreamingSettings.resolve(conf, StreamingSettings(ui={"port": 4061}))
    assert (resolved.ui.port, resolved.ui.host, resolved.wal.enable) == (4061, "127.0.0.9", True)
    # A section given as a model counts only the fields it was built with.
    from reliable_kafka.settings import UISettings

    resolved = StreamingSettings.resolve(conf, StreamingSettings(ui=UISettings(retained_batches=7)))
    assert (resolved.ui.port, resolved.ui.retained_batches) == (4070, 7)
    assert StreamingSettings.resolve(conf).ui.port == 4070
    assert StreamingSettings.resolve({}).ui.port == 4099


def test_an_unknown_streaming_key_warns_once_naming_the_closest_known_key(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import reliable_kafka.settings as settings_module

    monkeypatch.setattr(settings_module, "_warned_conf_keys", set())
    conf = {
        "spark.streaming.receiver.writeAheadLog.enabled": "true",  # a typo of ...enable
        "spark.streaming.receiver.writeAheadLog.class": "org.example.Log",  # Spark's, not used here
        "spark.streaming.blockInterval": "100ms",
        "spark.executor.memory": "1g",  # not a streaming key: not ours to judge
    }
    with caplog.at_level(logging.WARNING, logger="reliable_kafka.settings"):
        settings = StreamingSettings.from_spark_conf(conf)
        StreamingSettings.from_spark_conf(conf)
    assert settings.wal.enable is False and settings.receiver.block_interval_ms == 100
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "spark.streaming.receiver.writeAheadLog.class is a Spark Streaming setting that reliable-kafka "
        "does not use; ignored",
        "unknown setting spark.streaming.receiver.writeAheadLog.enabled ignored; did you mean "
        "spark.streaming.receiver.writeAheadLog.enable?",
    ]


def test_topics_from_the_environment_take_sparks_form_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELIABLE_KAFKA_ZOOKEEPER__CONNECT", "127.0.0.1:2181")
    monkeypatch.setenv("RELIABLE_KAFKA_GROUP__GROUP_ID", "g")
    for raw, expected in (
        ("words:1", {"words": 1}),
        ("words:2, clicks", {"words": 2, "clicks": 1}),
        ('{"words": 3}', {"words": 3}),
    ):
        monkeypatch.setenv("RELIABLE_KAFKA_TOPICS", raw)
        assert KafkaStreamSettings().topics == expected, raw
    monkeypatch.setenv("RELIABLE_KAFKA_TOPICS", "words:many")
    with pytest.raises(ValidationError, match=r'topics are "topic:threads,topic:threads".*\'words:many\''):
        KafkaStreamSettings()


def test_kafka_params_take_numbers_and_booleans_as_create_stream_does() -> None:
    params = {"fetch.min.bytes": 1, "enable.partition.eof": False, "bootstrap.servers": "127.0.0.1:9092"}
    settings = kafka_stream(kafka_params=params)
    assert settings.kafka_params == {
        "fetch.min.bytes": "1",
        "enable.partition.eof": "false",
        "bootstrap.servers": "127.0.0.1:9092",
    }


def test_a_refused_value_names_the_spark_key_or_variable_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValidationError) as refused:
        StreamingSettings.from_spark_conf({"spark.streaming.blockInterval": "0ms"})
    assert refused.value.__notes__ == [
        "receiver.block_interval_ms was read from the SparkConf's spark.streaming.blockInterval"
    ]
    monkeypatch.setenv("RELIABLE_KAFKA_UI__PORT", "70000")
    with pytest.raises(ValidationError) as refused:
        StreamingSettings()
    assert refused.value.__notes__ == ["ui.port was read from the environment's RELIABLE_KAFKA_UI__PORT"]
    with pytest.raises(ValidationError) as refused:
        StreamingSettings.from_spark_conf({})
    assert refused.value.__notes__ == ["ui.port was read from the environment's RELIABLE_KAFKA_UI__PORT"]
    # A value the code gave has no other source to name.
    with pytest.raises(ValidationError) as refused:
        StreamingSettings(ui={"port": 70000})
    assert not getattr(refused.value, "__notes__", [])


def test_settings_copied_with_an_update_or_validated_keep_what_the_code_gave() -> None:
    """model_copy(update=...) bypasses __init__: its sections were dropped by resolve() (a test's
    ui port 0 became the SparkConf's default 4050)."""
    from reliable_kafka.settings import UISettings

    conf = {"spark.streaming.ui.port": "4070", "spark.streaming.receiver.writeAheadLog.enable": "true"}
    base = StreamingSettings(receiver=ReceiverSettings(block_interval_ms=100))
    copied = base.model_copy(update={"ui": UISettings(port=0, lag_refresh_ms=0)})
    resolved = StreamingSettings.resolve(conf, copied)
    assert (resolved.ui.port, resolved.ui.lag_refresh_ms) == (0, 0)
    assert resolved.receiver.block_interval_ms == 100  # given to the original
    assert resolved.wal.enable is True  # from the SparkConf
    validated = StreamingSettings.model_validate({"ui": {"port": 4061}})
    assert StreamingSettings.resolve(conf, validated).ui.port == 4061

"""Settings: Spark's defaults, SparkConf keys, environment, and errors that name the field."""

from __future__ import annotations

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
            "spark.app.name": "ignored",
        }
    )
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
    assert kafka_stream(storage_level="memory_and_disk_ser_2").storage_level == "MEMORY_AND_DISK_SER_2"
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

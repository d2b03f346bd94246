"""Configuration: pydantic settings with Spark's defaults, read from the environment or a SparkConf.

Two models:

* :class:`StreamingSettings` — everything Spark keeps under ``spark.streaming.*`` (receiver,
  write-ahead logs, jobs, backpressure). Env prefix ``RELIABLE_KAFKA_``, nested fields joined
  with ``__``: ``RELIABLE_KAFKA_RECEIVER__BLOCK_INTERVAL_MS=100``.
* :class:`KafkaStreamSettings` — one Kafka input stream: ZooKeeper, consumer group, topics,
  extra Kafka params. Same prefix: ``RELIABLE_KAFKA_ZOOKEEPER__CONNECT=zk1:2181``.

Bad values fail at construction with pydantic's messages, which name the field. So do unknown
keyword arguments (a misspelt field must not be dropped silently). The environment source still
ignores unknown ``RELIABLE_KAFKA_*`` variables, since both models share the prefix and each sees
the other's variables.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from reliable_kafka.rpc.tls import TlsFiles, tls_files
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util.secret_keys import redacted

logger = logging.getLogger(__name__)

ENV_PREFIX = "RELIABLE_KAFKA_"
_TOPICS_FORMAT = (
    'topics are "topic:threads,topic:threads" (threads default to 1, as Spark\'s topic:numThreads) '
    'or a JSON object such as {"words": 1}'
)

_TIME_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_TIME_STRING = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def parse_time_ms(value: str | int | float, default_unit: str) -> int:
    """Spark's time strings (``200ms``, ``2s``, ``1min``); a bare number is in ``default_unit``."""
    if isinstance(value, int | float):
        return int(value * _TIME_UNITS_MS[default_unit])
    match = _TIME_STRING.match(value.lower())
    if match is None or (match.group(2) or default_unit) not in _TIME_UNITS_MS:
        raise ValueError(f"{value!r} is not a time: use a number with one of {sorted(_TIME_UNITS_MS)}")
    return int(float(match.group(1)) * _TIME_UNITS_MS[match.group(2) or default_unit])


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
}
_BYTE_STRING = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")


def parse_bytes(value: str | int) -> int:
    """Spark's byte strings (``64m``, ``1g``, ``512k``); a bare number is in bytes."""
    if isinstance(value, int):
        return value
    match = _BYTE_STRING.match(value.lower())
    if match is None or match.group(2) not in _BYTE_UNITS:
        raise ValueError(f"{value!r} is not a size: use a number of bytes, or one with k, m or g")
    return int(match.group(1)) * _BYTE_UNITS[match.group(2)]


def _parse_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered not in {"true", "false"}:
        raise ValueError(f"{value!r} is not a boolean: use true or false")
    return lowered == "true"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class ReceiverSettings(_Section):
    block_interval_ms: int = Field(200, gt=0, description="spark.streaming.blockInterval")
    block_queue_size: int = Field(10, gt=0, description="spark.streaming.blockQueueSize")
    max_buffered_bytes: int = Field(
        64 << 20,
        gt=0,
        description=(
            "spark.streaming.receiver.maxBufferedBytes (not in Spark): bytes a receiver holds "
            "received and not yet stored (its block buffer and block queue); its sources wait "
            "beyond it"
        ),
    )
    max_rate: int = Field(0, ge=0, description="spark.streaming.receiver.maxRate; 0 = unlimited")
    block_store_timeout_s: int = Field(30, gt=0, description="spark.streaming.receiver.blockStoreTimeout")
    restart_delay_ms: int = Field(2000, ge=0, description="spark.streaming.receiverRestartDelay")
    max_restart_delay_ms: int = Field(
        60_000,
        ge=0,
        description=(
            "spark.streaming.receiver.maxRestartDelay: a receiver that keeps failing waits twice as "
            "long before each restart, from spark.streaming.receiverRestartDelay up to this"
        ),
    )
    store_max_attempts: int = Field(
        4, ge=1, description="attempts to store a block before the receiver stops"
    )
    block_rdd_max_partition_bytes: int = Field(
        128 << 20,
        ge=0,
        description=(
            "spark.streaming.blockRDD.maxPartitionBytes (not in Spark): a batch's consecutive "
            "blocks kept in the same place are read by one task, up to this many bytes (fewer "
            "when the batch is large enough to give every core of the context a share of it); "
            "0 = one partition per block, as in Spark"
        ),
    )
    reliable_without_wal: bool = Field(
        False,
        description=(
            "spark.streaming.receiver.reliableWithoutWriteAheadLog (not in Spark): the reliable Kafka "
            "receiver (offsets committed once a block is stored) with the write-ahead log off too; "
            "with a level of replication 2, once both copies are stored"
        ),
    )
    placement: Literal["executors", "driver"] = Field(
        "executors",
        description=(
            "spark.streaming.receiver.placement: receivers run as long-running tasks on Spark's "
            "executors (as in Spark), or as threads of the driver's Python process"
        ),
    )
    tracker_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="spark.streaming.receiver.trackerPort: the driver's tracker socket; 0 = a free port",
    )
    block_server_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="spark.streaming.receiver.blockServerPort: the port of each receiver's block server "
        "(other hosts' batch tasks fetch blocks from it), for firewalls, as spark.blockManager.port; "
        "0 = a free port",
    )
    port_max_retries: int = Field(
        16,
        ge=0,
        description="spark.port.maxRetries: a fixed tracker or block server port that is taken is "
        "followed by the next ones, this many (receivers sharing a host take successive ports)",
    )
    # TLS on the tracker socket and block fetches (executor placement); paths valid on every node.
    tls_cert_file: str | None = Field(None, description="spark.streaming.receiver.tls.certFile (PEM)")
    tls_key_file: str | None = Field(None, description="spark.streaming.receiver.tls.keyFile (PEM)")
    tls_ca_file: str | None = Field(
        None, description="spark.streaming.receiver.tls.caFile: trusted CAs (default: the certificate)"
    )

    def tls(self) -> TlsFiles | None:
        """The receiver sockets' TLS files, or None when TLS is off."""
        return tls_files(self.tls_cert_file, self.tls_key_file, self.tls_ca_file)

    @model_validator(mode="after")
    def _tls_files_together(self) -> Self:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError(
                "spark.streaming.receiver.tls.certFile and spark.streaming.receiver.tls.keyFile "
                "go together: set both for TLS, or neither"
            )
        if self.tls_ca_file is not None and self.tls_cert_file is None:
            raise ValueError("spark.streaming.receiver.tls.caFile needs certFile and keyFile too")
        return self


class WriteAheadLogSettings(_Section):
    """The receivers' data log (``receiver_*``) and the driver's metadata log (``driver_*``)."""

    enable: bool = Field(False, description="spark.streaming.receiver.writeAheadLog.enable")
    rolling_interval_s: int = Field(60, gt=0)
    max_failures: int = Field(3, ge=1)
    close_file_after_write: bool = False
    fsync: bool = Field(True, description="fsync each record before write() returns")
    driver_rolling_interval_s: int = Field(60, gt=0)
    driver_max_failures: int = Field(3, ge=1)
    driver_close_file_after_write: bool = False
    driver_allow_batching: bool = Field(True, description="group commit of driver metadata events")
    driver_batching_timeout_ms: int = Field(5000, gt=0)


class BackpressureSettings(_Section):
    enabled: bool = False
    initial_rate: int | None = Field(None, gt=0)
    pid_proportional: float = Field(1.0, ge=0)
    pid_integral: float = Field(0.2, ge=0)
    pid_derived: float = Field(0.0, ge=0)
    pid_min_rate: float = Field(100.0, gt=0)


class DirectKafkaSettings(_Section):
    """The direct approach's knobs (``KafkaUtils.createDirectStream``), with Spark's defaults."""

    max_rate_per_partition: int = Field(
        0,
        ge=0,
        description="spark.streaming.kafka.maxRatePerPartition: records/s per partition; 0 = unlimited",
    )
    min_rate_per_partition: int = Field(
        1,
        ge=1,
        description="spark.streaming.kafka.minRatePerPartition: records/s per partition that "
        "backpressure never goes below",
    )
    max_retries: int = Field(
        1, ge=0, description="spark.streaming.kafka.maxRetries: retries of the driver's offset lookups"
    )
    # Ours, not Spark's (SPARK-27549): lag tools see a direct stream's progress.
    commit_completed_batches: bool = Field(
        False,
        description="commit each completed batch's offsets to the group of kafkaParams' group.id "
        "(Kafka; ZooKeeper with offsets.storage=zookeeper; both with offsets.storage=kafka and "
        "zookeeper.connect, 0.8's dual commit); watching only",
    )


class JobSettings(_Section):
    concurrent_jobs: int = Field(1, ge=1, description="spark.streaming.concurrentJobs")
    unpersist: bool = Field(True, description="spark.streaming.unpersist")
    stop_gracefully_on_shutdown: bool = False
    graceful_stop_timeout_ms: int | None = Field(None, gt=0, description="default: 10 batch durations")
    # Ours, not Spark's (the JVM's shutdown hooks have their own timeout): how long stop() waits
    # for receivers, connectors, WAL and Spark after any graceful drain before abandoning them;
    # a graceful stop's whole bound is the two timeouts' sum (scheduler/stop_bound.py).
    stop_timeout_ms: int = Field(20_000, gt=0, description="spark.streaming.stopTimeout")


class CheckpointSettings(_Section):
    """The checkpoint directory's lease (``checkpoint_lease.py``): one driver at a time writes it."""

    # Ours, not Spark's: how long a driver's lease outlives its last renewal. A dead driver's
    # checkpoint waits this long for the next one (at most; none when it ran on the same host).
    lease_timeout_ms: int = Field(
        30_000,
        ge=100,
        description="spark.streaming.checkpoint.leaseTimeout: a driver's lease on its checkpoint "
        "that is not renewed for this long is taken over by the next driver",
    )


class UISettings(_Section):
    """The driver's status page and ``/metrics`` (``reliable_kafka.ui``)."""

    enabled: bool = Field(True, description="spark.streaming.ui.enabled")
    port: int = Field(
        4050, ge=0, le=65535, description="spark.streaming.ui.port; the next free one if taken; 0 = any"
    )
    host: str = Field("127.0.0.1", min_length=1, description="spark.streaming.ui.host")
    retained_batches: int = Field(1000, gt=0, description="spark.streaming.ui.retainedBatches")
    lag_refresh_ms: int = Field(
        2000, ge=0, description="spark.streaming.ui.lagRefreshInterval: reuse of a consumer lag lookup"
    )
    console_progress: bool = Field(
        False,
        description="spark.streaming.ui.showConsoleProgress: keep Spark's console progress bar, which "
        "redraws between the batches' output (off, as in Spark's streaming examples)",
    )


class DynamicAllocationSettings(_Section):
    """Streaming dynamic allocation (``scheduler/executor_allocation_manager.py``), with Spark's
    defaults. Checked at ``start()`` when enabled (``scheduler/executor_allocation.py``), where
    the message can name the Spark keys and the master."""

    enabled: bool = Field(False, description="spark.streaming.dynamicAllocation.enabled")
    scaling_interval_ms: int = Field(
        60_000, gt=0, description="spark.streaming.dynamicAllocation.scalingInterval"
    )
    min_executors: int | None = Field(
        None,
        description="spark.streaming.dynamicAllocation.minExecutors; default max(1, receivers)",
    )
    max_executors: int | None = Field(
        None, description="spark.streaming.dynamicAllocation.maxExecutors; default unbounded"
    )
    scaling_up_ratio: float = Field(0.9, description="spark.streaming.dynamicAllocation.scalingUpRatio")
    scaling_down_ratio: float = Field(0.3, description="spark.streaming.dynamicAllocation.scalingDownRatio")


# spark.streaming.* key -> (section, field, parser)
_SPARK_KEYS: dict[str, tuple[str, str, Any]] = {
    "spark.streaming.blockInterval": ("receiver", "block_interval_ms", lambda v: parse_time_ms(v, "ms")),
    "spark.streaming.blockQueueSize": ("receiver", "block_queue_size", int),
    "spark.streaming.receiver.maxBufferedBytes": ("receiver", "max_buffered_bytes", parse_bytes),
    "spark.streaming.receiver.maxRate": ("receiver", "max_rate", int),
    "spark.streaming.blockRDD.maxPartitionBytes": ("receiver", "block_rdd_max_partition_bytes", parse_bytes),
    "spark.streaming.receiver.blockStoreTimeout": (
        "receiver",
        "block_store_timeout_s",
        lambda v: parse_time_ms(v, "s") // 1000,
    ),
    "spark.streaming.receiverRestartDelay": (
        "receiver",
        "restart_delay_ms",
        lambda v: parse_time_ms(v, "ms"),
    ),
    "spark.streaming.receiver.maxRestartDelay": (
        "receiver",
        "max_restart_delay_ms",
        lambda v: parse_time_ms(v, "ms"),
    ),
    "spark.streaming.receiver.placement": ("receiver", "placement", lambda v: v.strip().lower()),
    "spark.streaming.receiver.trackerPort": ("receiver", "tracker_port", int),
    "spark.streaming.receiver.blockServerPort": ("receiver", "block_server_port", int),
    "spark.streaming.receiver.reliableWithoutWriteAheadLog": (
        "receiver",
        "reliable_without_wal",
        _parse_bool,
    ),
    "spark.port.maxRetries": ("receiver", "port_max_retries", int),
    "spark.streaming.receiver.tls.certFile": ("receiver", "tls_cert_file", str),
    "spark.streaming.receiver.tls.keyFile": ("receiver", "tls_key_file", str),
    "spark.streaming.receiver.tls.caFile": ("receiver", "tls_ca_file", str),
    "spark.streaming.receiver.writeAheadLog.enable": ("wal", "enable", _parse_bool),
    "spark.streaming.receiver.writeAheadLog.rollingIntervalSecs": ("wal", "rolling_interval_s", int),
    "spark.streaming.receiver.writeAheadLog.maxFailures": ("wal", "max_failures", int),
    "spark.streaming.receiver.writeAheadLog.closeFileAfterWrite": (
        "wal",
        "close_file_after_write",
        _parse_bool,
    ),
    "spark.streaming.driver.writeAheadLog.rollingIntervalSecs": ("wal", "driver_rolling_interval_s", int),
    "spark.streaming.driver.writeAheadLog.maxFailures": ("wal", "driver_max_failures", int),
    "spark.streaming.driver.writeAheadLog.closeFileAfterWrite": (
        "wal",
        "driver_close_file_after_write",
        _parse_bool,
    ),
    "spark.streaming.driver.writeAheadLog.allowBatching": ("wal", "driver_allow_batching", _parse_bool),
    "spark.streaming.driver.writeAheadLog.batchingTimeout": (
        "wal",
        "driver_batching_timeout_ms",
        lambda v: parse_time_ms(v, "ms"),
    ),
    "spark.streaming.backpressure.enabled": ("backpressure", "enabled", _parse_bool),
    "spark.streaming.backpressure.initialRate": ("backpressure", "initial_rate", int),
    "spark.streaming.backpressure.pid.proportional": ("backpressure", "pid_proportional", float),
    "spark.streaming.backpressure.pid.integral": ("backpressure", "pid_integral", float),
    "spark.streaming.backpressure.pid.derived": ("backpressure", "pid_derived", float),
    "spark.streaming.backpressure.pid.minRate": ("backpressure", "pid_min_rate", float),
    "spark.streaming.kafka.maxRatePerPartition": ("kafka", "max_rate_per_partition", int),
    "spark.streaming.kafka.maxRetries": ("kafka", "max_retries", int),
    "spark.streaming.kafka.minRatePerPartition": ("kafka", "min_rate_per_partition", int),
    "spark.streaming.concurrentJobs": ("jobs", "concurrent_jobs", int),
    "spark.streaming.unpersist": ("jobs", "unpersist", _parse_bool),
    "spark.streaming.stopGracefullyOnShutdown": ("jobs", "stop_gracefully_on_shutdown", _parse_bool),
    "spark.streaming.gracefulStopTimeout": (
        "jobs",
        "graceful_stop_timeout_ms",
        lambda v: parse_time_ms(v, "ms"),
    ),
    "spark.streaming.stopTimeout": ("jobs", "stop_timeout_ms", lambda v: parse_time_ms(v, "ms")),
    "spark.streaming.checkpoint.leaseTimeout": (
        "checkpoint",
        "lease_timeout_ms",
        lambda v: parse_time_ms(v, "ms"),
    ),
    "spark.streaming.ui.enabled": ("ui", "enabled", _parse_bool),
    "spark.streaming.ui.port": ("ui", "port", int),
    "spark.streaming.ui.host": ("ui", "host", str),
    "spark.streaming.ui.retainedBatches": ("ui", "retained_batches", int),
    "spark.streaming.ui.lagRefreshInterval": ("ui", "lag_refresh_ms", lambda v: parse_time_ms(v, "ms")),
    "spark.streaming.ui.showConsoleProgress": ("ui", "console_progress", _parse_bool),
    "spark.streaming.dynamicAllocation.enabled": ("dynamic_allocation", "enabled", _parse_bool),
    "spark.streaming.dynamicAllocation.scalingInterval": (
        "dynamic_allocation",
        "scaling_interval_ms",
        lambda v: parse_time_ms(v, "s"),
    ),
    "spark.streaming.dynamicAllocation.minExecutors": ("dynamic_allocation", "min_executors", int),
    "spark.streaming.dynamicAllocation.maxExecutors": ("dynamic_allocation", "max_executors", int),
    "spark.streaming.dynamicAllocation.scalingUpRatio": ("dynamic_allocation", "scaling_up_ratio", float),
    "spark.streaming.dynamicAllocation.scalingDownRatio": (
        "dynamic_allocation",
        "scaling_down_ratio",
        float,
    ),
}


# Spark's spark.streaming.* keys that do nothing here: a user who sets one expects an effect.
_SPARK_KEYS_WITHOUT_EFFECT = frozenset(
    {
        "spark.streaming.receiver.writeAheadLog.class",
        "spark.streaming.driver.writeAheadLog.class",
        "spark.streaming.clock",
        "spark.streaming.manualClock.jump",
        "spark.streaming.sessionByKey.deltaChainThreshold",
        "spark.streaming.fileStream.minRememberDuration",
        "spark.streaming.minRememberDuration",
        "spark.streaming.kafka.consumer.poll.ms",
        "spark.streaming.kafka.allowNonConsecutiveOffsets",
        "spark.streaming.kafka.consumer.cache.enabled",
        "spark.streaming.kafka.consumer.cache.initialCapacity",
        "spark.streaming.kafka.consumer.cache.maxCapacity",
        "spark.streaming.kafka.consumer.cache.loadFactor",
    }
)
_warned_conf_keys: set[str] = set()
_warned_conf_keys_lock = threading.Lock()


def _warn_unknown_streaming_keys(keys: Iterable[str]) -> None:
    """One WARNING per process for each ``spark.streaming.*`` key that has no effect here: a
    Spark key we do not implement, or an unknown one (a typo such as ``...writeAheadLog.enabled``
    would otherwise leave the WAL off in silence), naming the closest key we know."""
    for key in sorted(keys):
        if not key.startswith("spark.streaming.") or key in _SPARK_KEYS:
            continue
        with _warned_conf_keys_lock:
            if key in _warned_conf_keys:
                continue
            _warned_conf_keys.add(key)
        if key in _SPARK_KEYS_WITHOUT_EFFECT:
            logger.warning("%s is a Spark Streaming setting that reliable-kafka does not use; ignored", key)
            continue
        closest = difflib.get_close_matches(key, _SPARK_KEYS, n=1, cutoff=0.8)
        hint = f"; did you mean {closest[0]}?" if closest else ""
        logger.warning("unknown setting %s ignored%s", key, hint)


def _env_variable(loc: tuple[Any, ...]) -> str | None:
    """The ``RELIABLE_KAFKA_*`` variable that set the field at ``loc``, if one is set."""
    environ = {name.upper(): name for name in os.environ}
    for depth in range(len(loc), 0, -1):  # the field itself, else its section as JSON
        name = ENV_PREFIX + "__".join(str(part) for part in loc[:depth]).upper()
        if name in environ:
            return environ[name]
    return None


def _env_origin(loc: tuple[Any, ...]) -> str | None:
    variable = _env_variable(loc)
    return f"the environment's {variable}" if variable else None


def _note_sources(exc: ValidationError, origin: Callable[[tuple[Any, ...]], str | None]) -> None:
    """Name where each refused value came from, as notes on ``exc`` (shown under its message):
    pydantic names the model's field, which a user who set a Spark key or an environment
    variable does not know by that name."""
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = origin(loc)
        if where is not None:
            exc.add_note(f"{'.'.join(map(str, loc))} was read from {where}")


def _construct(init: Callable[..., None], values: Mapping[str, Any]) -> None:
    """``init(**values)``; a refused field not among ``values`` came from the environment."""
    try:
        init(**values)
    except ValidationError as exc:
        _note_sources(exc, lambda loc: None if loc[:1] and loc[0] in values else _env_origin(loc))
        raise


def _conf_items(conf: Any) -> dict[str, str]:
    """Key/value pairs of a ``pyspark.SparkConf``, a ``SparkContext``'s conf, or a mapping."""
    if isinstance(conf, Mapping):
        return {str(k): str(v) for k, v in conf.items()}
    if hasattr(conf, "getConf"):  # a SparkContext
        conf = conf.getConf()
    return {str(k): str(v) for k, v in conf.getAll()}


def _reject_unknown_fields(model: type[BaseModel], values: Mapping[str, Any]) -> None:
    """Unknown init keywords fail as ``extra="forbid"`` would make them (pydantic's message
    names the field), while ``extra="ignore"`` keeps the env source from failing on the other
    model's variables. Keywords starting with ``_`` are pydantic-settings' own (``_env_file``...)."""
    unknown = [key for key in values if not key.startswith("_") and key not in model.model_fields]
    if unknown:
        raise ValidationError.from_exception_data(
            model.__name__,
            [{"type": "extra_forbidden", "loc": (key,), "input": values[key]} for key in unknown],
        )


def _given_by_section(values: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """The fields ``values`` sets in each section: a section model's own set fields, a dict's keys."""
    given: dict[str, frozenset[str]] = {}
    for section, value in values.items():
        if isinstance(value, BaseModel):
            given[section] = frozenset(value.model_fields_set)
        elif isinstance(value, Mapping):
            given[section] = frozenset(value)
    return given


class StreamingSettings(BaseSettings):
    """Spark Streaming's knobs with Spark's defaults (see ARCHITECTURE.md, "Defaults")."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="ignore",
        frozen=True,
        validate_default=True,
    )

    receiver: ReceiverSettings = ReceiverSettings()
    wal: WriteAheadLogSettings = WriteAheadLogSettings()
    backpressure: BackpressureSettings = BackpressureSettings()
    jobs: JobSettings = JobSettings()
    checkpoint: CheckpointSettings = CheckpointSettings()
    ui: UISettings = UISettings()
    kafka: DirectKafkaSettings = DirectKafkaSettings()
    dynamic_allocation: DynamicAllocationSettings = DynamicAllocationSettings()

    # The fields the code gave, by section: what overrides the SparkConf (resolve()). None when
    # the object was not made by __init__ (model_validate, model_construct), which reads no
    # environment: pydantic's own record of the fields set is the code's then.
    _given: dict[str, frozenset[str]] | None = PrivateAttr(default=None)

    def __init__(self, **values: Any) -> None:
        _reject_unknown_fields(type(self), values)
        _construct(super().__init__, values)
        # Not model_fields_set: it also holds what pydantic-settings read from the environment.
        self._given = _given_by_section(values)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy; the sections in ``update`` count as given (they override the SparkConf)."""
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied._given = {**self._given_sections(), **_given_by_section(update)}
        return copied

    def _given_sections(self) -> dict[str, frozenset[str]]:
        if self._given is not None:
            return self._given
        return {
            section: frozenset(getattr(self, section).model_fields_set) for section in self.model_fields_set
        }

    def given_fields(self) -> dict[str, dict[str, Any]]:
        """The values of the fields the code gave this object (constructor keywords, a
        ``model_copy`` update), by section; not those taken from the environment or the defaults."""
        return {
            section: {field: getattr(getattr(self, section), field) for field in fields}
            for section, fields in self._given_sections().items()
            if fields
        }

    @classmethod
    def resolve(cls, conf: Any, settings: StreamingSettings | None = None) -> Self:
        """What a StreamingContext runs with, by precedence (lowest first): Spark's defaults, the
        ``RELIABLE_KAFKA_*`` environment, the ``spark.streaming.*`` keys of ``conf``, then the
        fields ``settings`` was constructed with. So ``settings=StreamingSettings(ui={"port": 4061})``
        changes the port and keeps a SparkConf's ``writeAheadLog.enable=true``."""
        overrides = settings.given_fields() if settings is not None else {}
        return cls.from_spark_conf(conf, **overrides)

    @classmethod
    def from_spark_conf(cls, conf: Any, **overrides: Any) -> Self:
        """Settings from ``spark.streaming.*`` keys, over the environment, under ``overrides``.

        ``overrides`` are section dicts, e.g. ``wal={"enable": True}``. A malformed Spark value
        raises ``ValueError`` naming the Spark key.
        """
        sections: dict[str, dict[str, Any]] = {}
        conf_keys: dict[tuple[str, str], str] = {}
        items = _conf_items(conf)
        _warn_unknown_streaming_keys(items)
        for key, raw in items.items():
            if key not in _SPARK_KEYS:
                continue
            section, field, parse = _SPARK_KEYS[key]
            try:
                sections.setdefault(section, {})[field] = parse(raw)
            except ValueError as exc:
                raise ValueError(f"{key}={raw!r}: {exc}") from exc
            conf_keys[(section, field)] = key
        base = cls()
        merged: dict[str, Any] = {}
        given: set[tuple[str, str]] = set()
        for section in (
            "receiver",
            "wal",
            "backpressure",
            "jobs",
            "checkpoint",
            "ui",
            "kafka",
            "dynamic_allocation",
        ):
            values = {**getattr(base, section).model_dump(), **sections.get(section, {})}
            section_overrides = overrides.pop(section, {}) or {}
            values.update(section_overrides)
            given.update((section, field) for field in section_overrides)
            merged[section] = values
        if overrides:
            raise ValueError(f"unknown settings sections: {sorted(overrides)}")

        def origin(loc: tuple[Any, ...]) -> str | None:
            if loc[:2] in given:
                return None
            if loc[:2] in conf_keys:
                return f"the SparkConf's {conf_keys[loc[:2]]}"  # type: ignore[index]
            return _env_origin(loc)

        try:
            return cls(**merged)
        except ValidationError as exc:
            _note_sources(exc, origin)
            raise


class ZooKeeperSettings(_Section):
    connect: str = Field(description="zookeeper.connect: host:port[,host:port...][/chroot]")
    session_timeout_ms: int = Field(6000, gt=0)
    connection_timeout_ms: int = Field(6000, gt=0)
    # "digest": kazoo's add_auth (zookeeper.auth); "sasl": a SASL DIGEST-MD5 login, as a JAAS
    # Client section gives the JVM's ZooKeeper client (zookeeper.sasl.username/password).
    auth_scheme: Literal["digest", "sasl"] | None = None
    auth_credentials: SecretStr | None = Field(
        None, description="user:password for digest auth or a SASL (DIGEST-MD5) login; never logged"
    )

    @field_validator("connect")
    @classmethod
    def _valid_connect(cls, value: str) -> str:
        hosts = value.split("/", 1)[0]
        for host in hosts.split(","):
            name, _, port = host.strip().rpartition(":")
            if not name or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(
                    f"{value!r} is not a ZooKeeper connect string (host:port[,host:port][/chroot])"
                )
        return value

    @model_validator(mode="after")
    def _auth_complete(self) -> Self:
        if (self.auth_scheme is None) != (self.auth_credentials is None):
            raise ValueError("auth_scheme and auth_credentials go together")
        return self


class ConsumerGroupSettings(_Section):
    group_id: str = Field(min_length=1, description="group.id")
    consumer_id: str | None = Field(None, description="consumer.id; default host-uuid")
    auto_offset_reset: Literal["smallest", "largest"] = "largest"
    rebalance_max_retries: int = Field(4, ge=1)
    rebalance_backoff_ms: int = Field(2000, ge=0)
    auto_commit_interval_ms: int = Field(60000, gt=0, description="the unreliable receiver's commit period")
    offsets_storage: Literal["zookeeper", "kafka"] | None = Field(
        None, description="offsets.storage; default zookeeper with a zkQuorum, else kafka"
    )
    dual_commit_enabled: bool | None = Field(
        None,
        description="dual.commit.enabled: commit to ZooKeeper too; default true when offsets.storage=kafka "
        "and a zkQuorum is given (Kafka 0.8.2's default)",
    )
    partition_assignment_strategy: Literal["range", "roundrobin", "cooperative-sticky"] | None = Field(
        None,
        description="partition.assignment.strategy of a group without ZooKeeper; default range (the only "
        "one a ZooKeeper group has)",
    )


def _param_string(value: Any) -> Any:
    """A Kafka param as librdkafka reads it (a string); anything else is left for pydantic to refuse."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


class KafkaStreamSettings(BaseSettings):
    """One receiver-based Kafka input stream, as ``KafkaUtils.createStream`` takes it."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="ignore",
        frozen=True,
    )

    zookeeper: ZooKeeperSettings | None = Field(
        None, description="None: no ZooKeeper; kafka_params' bootstrap.servers reach the group coordinator"
    )
    group: ConsumerGroupSettings
    # NoDecode: the environment's value reaches _parse_topics as written (Spark's "t:2,u" form
    # or JSON) instead of failing in pydantic-settings' JSON decoding with a raw message.
    topics: Annotated[dict[str, int], NoDecode] = Field(
        description="topic -> number of consumer threads (Spark's meaning); "
        'from the environment "topic:threads,topic" or a JSON object'
    )
    kafka_params: dict[str, str] = Field(
        default_factory=dict,
        description="passed to confluent-kafka (bootstrap.servers, security...); numbers and "
        "booleans as createStream takes them",
    )
    storage_level: str = Field(
        "MEMORY_AND_DISK_2", description="a StorageLevel constant's name, checked at construction"
    )
    decode_errors: Literal["fail", "skip", "deadletter"] = Field(
        "fail", description="a record the decoders fail on: fail its batch, skip it, or dead-letter it"
    )
    dead_letter_topic: str | None = Field(None, description='the topic of decode_errors="deadletter"')

    def __init__(self, **values: Any) -> None:
        _reject_unknown_fields(type(self), values)
        _construct(super().__init__, values)

    def __repr_args__(self) -> Any:
        # kafka_params may hold SASL/SSL secrets: show them masked, as they are logged.
        for name, value in super().__repr_args__():
            yield name, redacted(value) if name == "kafka_params" else value

    @field_validator("storage_level")
    @classmethod
    def _valid_storage_level(cls, value: str) -> str:
        return StorageLevel.of(value).name

    @model_validator(mode="after")
    def _reaches_a_group(self) -> Self:
        params = self.kafka_params
        if self.zookeeper is None and not (
            params.get("bootstrap.servers") or params.get("metadata.broker.list")
        ):
            raise ValueError(
                "neither zookeeper nor kafka_params['bootstrap.servers'] is given: a ZooKeeper quorum, or "
                "the brokers whose group coordinator keeps the group, is needed"
            )
        return self

    @field_validator("topics", mode="before")
    @classmethod
    def _parse_topics(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("{"):
            try:
                return json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{_TOPICS_FORMAT}; {text!r} is not valid JSON: {exc}") from None
        topics: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            topic, _, threads = item.partition(":")
            try:
                topics[topic.strip()] = int(threads) if threads else 1
            except ValueError:
                raise ValueError(f"{_TOPICS_FORMAT}; the threads of {item!r} are not a number") from None
        return topics

    @field_validator("kafka_params", mode="before")
    @classmethod
    def _params_as_strings(cls, value: Any) -> Any:
        """createStream passes numbers and booleans to librdkafka, which takes every value as a
        string: so do the settings, instead of refusing ``{"fetch.min.bytes": 1}``."""
        if not isinstance(value, Mapping):
            return value
        return {key: _param_string(item) for key, item in value.items()}

    @field_validator("topics")
    @classmethod
    def _valid_topics(cls, value: dict[str, int]) -> dict[str, int]:
        if not value:
            raise ValueError("at least one topic is needed")
        for topic, threads in value.items():
            if not re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", topic):
                raise ValueError(f"invalid topic name {topic!r}")
            if threads < 1:
                raise ValueError(f"topic {topic!r} needs at least one consumer thread, got {threads}")
        return value

"""pyspark 2.4's ``KafkaMessageAndMetadata`` and ``utf8_decoder``: what a ``messageHandler`` gets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

KeyValueDecoder = Callable[[bytes | None], Any]
Headers = list[tuple[str, bytes | None]]

# Kafka's names for a record's timestamp type (the Java client's TimestampType).
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def utf8_decoder(s: bytes | None) -> str | None:
    """Decode the unicode as UTF-8 (pyspark's default key and value decoder); ``None`` stays ``None``."""
    if s is None:
        return None
    return s.decode("utf-8")


def utf8_decode_column(column: Sequence[bytes | None]) -> Iterable[str | None]:
    """``map(utf8_decoder, column)`` without a Python call per value: a column of ``None`` (records
    without keys) is itself, one without ``None`` decodes in C. Raises as ``utf8_decoder`` does,
    though not necessarily at the same value: callers redo the column value by value to find it."""
    if None not in column:
        return map(_decode_utf8, column)
    if column.count(None) == len(column):
        return column
    return map(utf8_decoder, column)


_decode_utf8 = bytes.decode  # UTF-8, strict: what utf8_decoder calls
# A key or value decoder may name its column version as ``decode_column``: the batch read chain
# (dstream/block_partition.py) then decodes a block's columns at once instead of each record.
utf8_decoder.decode_column = utf8_decode_column  # type: ignore[attr-defined]


class KafkaMessageAndMetadata:
    """One Kafka record as a ``messageHandler`` sees it (pyspark 2.4's class of the same name).

    ``key`` and ``message`` are decoded on access with the stream's decoders. As in 2.4, equality
    is identity, and a copy (pickled, when a handler returns the object itself) keeps the raw
    bytes but not the decoders, which may be closures pickle cannot take.

    Beyond 2.4 (whose 0.8 records had none), records read from Kafka by ``createDirectStream``
    and ``createRDD`` carry what the broker keeps: ``timestamp`` (milliseconds since the epoch)
    and ``timestampType`` (``"CreateTime"`` or ``"LogAppendTime"``), both ``None`` on brokers
    before 0.10, and ``headers``, a list of ``(name, value bytes)``, empty on brokers before 0.11
    or for a record without any. ``createStream``'s records come from stored blocks, which keep
    key, value and offset only: there they are ``None``, ``None`` and ``[]``.
    """

    __slots__ = (
        "_key_decoder",
        "_raw_key",
        "_raw_message",
        "_value_decoder",
        "headers",
        "offset",
        "partition",
        "timestamp",
        "timestampType",
        "topic",
    )

    def __init__(  # noqa: PLR0917 - pyspark's positional signature
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        message: bytes | None,
        keyDecoder: KeyValueDecoder = utf8_decoder,
        valueDecoder: KeyValueDecoder = utf8_decoder,
        *,
        timestamp: int | None = None,
        timestampType: str | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self._raw_key = key
        self._raw_message = message
        self._key_decoder = keyDecoder
        self._value_decoder = valueDecoder
        self.timestamp = timestamp
        self.timestampType = timestampType
        self.headers: Headers = list(headers)

    @property
    def key(self) -> Any:
        return self._key_decoder(self._raw_key)

    @property
    def message(self) -> Any:
        return self._value_decoder(self._raw_message)

    # pyspark 2.4's private names, which handlers written against it used.
    @property
    def _rawKey(self) -> bytes | None:
        return self._raw_key

    @property
    def _rawMessage(self) -> bytes | None:
        return self._raw_message

    def _set_key_decoder(self, decoder: KeyValueDecoder) -> None:
        self._key_decoder = decoder

    def _set_value_decoder(self, decoder: KeyValueDecoder) -> None:
        self._value_decoder = decoder

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _copy_of,
            (
                self.topic,
                self.partition,
                self.offset,
                self._raw_key,
                self._raw_message,
                self.timestamp,
                self.timestampType,
                self.headers,
            ),
        )

    def __str__(self) -> str:
        # Never the payload: this lands in logs.
        return (
            f"KafkaMessageAndMetadata(topic: {self.topic}, partition: {self.partition}, "
            f"offset: {self.offset}, key and message...)"
        )

    __repr__ = __str__


def _copy_of(  # noqa: PLR0917 - the pickled fields, in order
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    message: bytes | None,
    timestamp: int | None,
    timestamp_type: str | None,
    headers: Headers,
) -> KafkaMessageAndMetadata:
    return KafkaMessageAndMetadata(
        topic,
        partition,
        offset,
        key,
        message,
        timestamp=timestamp,
        timestampType=timestamp_type,
        headers=headers,
    )


def record_metadata(message: Message) -> tuple[int | None, str | None, Headers]:
    """A consumed record's ``(timestamp, timestampType, headers)`` as :class:`KafkaMessageAndMetadata`
    holds them."""
    kind, timestamp = message.timestamp()
    timestamp_type = _TIMESTAMP_TYPES.get(kind)
    return (
        timestamp if timestamp_type is not None else None,
        timestamp_type,
        message.headers() or [],
    )

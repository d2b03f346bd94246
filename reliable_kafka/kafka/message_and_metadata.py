"""pyspark 2.4's ``KafkaMessageAndMetadata`` and ``utf8_decoder``: what a ``messageHandler`` gets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

KeyValueDecoder = Callable[[bytes | None], Any]


def utf8_decoder(s: bytes | None) -> str | None:
    """Decode the unicode as UTF-8 (pyspark's default key and value decoder); ``None`` stays ``None``."""
    if s is None:
        return None
    return s.decode("utf-8")


class KafkaMessageAndMetadata:
    """One Kafka record as a ``messageHandler`` sees it (pyspark 2.4's class of the same name).

    ``key`` and ``message`` are decoded on access with the stream's decoders. As in 2.4, equality
    is identity, and a copy (pickled, when a handler returns the object itself) keeps the raw
    bytes but not the decoders, which may be closures pickle cannot take.
    """

    __slots__ = ("_key_decoder", "_raw_key", "_raw_message", "_value_decoder", "offset", "partition", "topic")

    def __init__(  # noqa: PLR0917 - pyspark's positional signature
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        message: bytes | None,
        keyDecoder: KeyValueDecoder = utf8_decoder,
        valueDecoder: KeyValueDecoder = utf8_decoder,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self._raw_key = key
        self._raw_message = message
        self._key_decoder = keyDecoder
        self._value_decoder = valueDecoder

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
            KafkaMessageAndMetadata,
            (self.topic, self.partition, self.offset, self._raw_key, self._raw_message),
        )

    def __str__(self) -> str:
        # Never the payload: this lands in logs.
        return (
            f"KafkaMessageAndMetadata(topic: {self.topic}, partition: {self.partition}, "
            f"offset: {self.offset}, key and message...)"
        )

    __repr__ = __str__

"""``KafkaRecordDecoder``: a Kafka record -> the stream's element (``keyDecoder``,
``valueDecoder`` or ``messageHandler``, and ``decodeErrors``), for ``createStream``'s batches and
the direct stream's alike.

It travels to the executors inside each batch's task, and unpickling it there imports this
module: a module of its own, importing only what decoding needs, so that a fresh Python worker
does not import ``KafkaUtils`` with the whole direct stream and receiver driver side first (73
modules, 0.3-0.5 s per new worker on two busy cores; 7 small ones now).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from reliable_kafka.dstream.batch_rdd import SKIP_RECORD
from reliable_kafka.kafka.direct.message_and_metadata import (
    KafkaMessageAndMetadata,
    KeyValueDecoder,
    utf8_decoder,
)
from reliable_kafka.kafka.receiver.decode_errors import DeadLetterWriter, DecodeErrors, RecordDecodeError

if TYPE_CHECKING:
    from reliable_kafka.kafka.receiver.kafka_input_dstream import DecodeErrorCounters

# Logged under the name these lines have always had (the decoder lived in kafka_utils).
logger = logging.getLogger("reliable_kafka.kafka.kafka_utils")

MessageHandler = Callable[[KafkaMessageAndMetadata], Any]


class KafkaRecordDecoder:
    """A record ``(key, value, topic, partition, offset[, timestamp, timestampType, headers])`` ->
    the stream's element.

    Shipped to the executors with each batch's RDD (pyspark pickles closures in flight; blocks at
    rest stay msgpack).
    """

    def __init__(
        self,
        keyDecoder: KeyValueDecoder = utf8_decoder,
        valueDecoder: KeyValueDecoder = utf8_decoder,
        messageHandler: MessageHandler | None = None,
        *,
        decode_errors: DecodeErrors = "fail",
        dead_letter: DeadLetterWriter | None = None,
        counters: DecodeErrorCounters | None = None,
    ) -> None:
        self.key_decoder = keyDecoder
        self.value_decoder = valueDecoder
        self.message_handler = messageHandler
        self.decode_errors = decode_errors
        self.dead_letter = dead_letter
        self.counters = counters

    def for_batch(self, counters: DecodeErrorCounters | None) -> KafkaRecordDecoder:
        """This decoder counting into one batch's counters."""
        return KafkaRecordDecoder(
            self.key_decoder,
            self.value_decoder,
            self.message_handler,
            decode_errors=self.decode_errors,
            dead_letter=self.dead_letter,
            counters=counters,
        )

    def decode_columns(self, keys: Sequence[Any], values: Sequence[Any]) -> list[tuple[Any, Any]] | None:
        """A chunk's elements from its key and value columns at once, with no Python call per
        record (the batch read chain's hook, ``dstream.chunk_decoding.ColumnDecoder``): where there
        is no ``messageHandler`` and both decoders offer ``decode_column`` (``utf8_decoder`` does).
        None: decode record by record. Raises when a value does not decode: the read chain then
        decodes the chunk record by record, and :meth:`__call__` names, skips or dead-letters it."""
        if self.message_handler is not None:
            return None
        key_column = getattr(self.key_decoder, "decode_column", None)
        value_column = getattr(self.value_decoder, "decode_column", None)
        if key_column is None or value_column is None:
            return None
        return list(zip(key_column(keys), value_column(values), strict=True))

    @property
    def wants_metadata(self) -> bool:
        """Whether records should carry their timestamp, timestamp type and headers (after the
        five fields), where the reader has them: only a ``messageHandler`` sees them."""
        return self.message_handler is not None

    def __call__(self, record: tuple[Any, ...]) -> Any:
        try:
            if self.message_handler is None:
                return self.key_decoder(record[0]), self.value_decoder(record[1])
            key, value, topic, partition, offset = record[:5]
            timestamp, timestamp_type, headers = record[5:] or (None, None, ())
            return self.message_handler(
                KafkaMessageAndMetadata(
                    topic,
                    partition,
                    offset,
                    key,
                    value,
                    self.key_decoder,
                    self.value_decoder,
                    timestamp=timestamp,
                    timestampType=timestamp_type,
                    headers=headers,
                )
            )
        except Exception as exc:
            # Without its location a poison message cannot be found, skipped or replayed.
            if self.decode_errors == "fail":
                raise RecordDecodeError(record[2], record[3], record[4], exc) from exc
            return self._set_aside(record, exc)

    def _set_aside(self, record: tuple[Any, ...], error: Exception) -> Any:
        topic, partition, offset = record[2:5]
        if self.dead_letter is not None:
            self.dead_letter.write(record, repr(error))
            logger.warning(
                "record at %s/%d offset %d written to dead-letter topic %s: %r",
                topic,
                partition,
                offset,
                self.dead_letter.topic,
                error,
            )
            if self.counters is not None:
                self.counters.dead_lettered.add(1)
        else:
            logger.warning("record at %s/%d offset %d skipped: %r", topic, partition, offset, error)
            if self.counters is not None:
                self.counters.skipped.add(1)
        return SKIP_RECORD

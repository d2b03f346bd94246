"""What a Kafka stream does with a record its decoder (or message handler) cannot decode.

``decodeErrors`` of ``KafkaUtils.createStream``:

* ``"fail"`` (the default, Spark's behaviour): the batch fails with a
  :class:`RecordDecodeError` naming the record's topic, partition and offset;
* ``"skip"``: the record is left out of the batch, with one WARNING line naming it;
* ``"deadletter"``: the raw record is written to ``deadLetterTopic`` (a JSON envelope, see
  :func:`dead_letter_envelope`) before it is left out; if that write fails, the batch fails.

Skipped and dead-lettered records are counted per batch, in the listener's batch info:
``batchInfo.streamIdToInputInfo[id].metadata["decodeErrors.skipped"]`` and
``["decodeErrors.deadLettered"]``. Runs on the executors; the producer configuration may hold
credentials and is never logged.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from confluent_kafka import KafkaException, Producer

from reliable_kafka.util.librdkafka_log import with_logger

logger = logging.getLogger(__name__)

DecodeErrors = Literal["fail", "skip", "deadletter"]
DECODE_ERRORS: tuple[str, ...] = ("fail", "skip", "deadletter")
SKIPPED_KEY = "decodeErrors.skipped"
DEAD_LETTERED_KEY = "decodeErrors.deadLettered"
_DELIVERY_TIMEOUT_S = 30.0


class RecordDecodeError(ValueError):
    """A decoder or message handler failed on one record; names the record's location."""

    def __init__(self, topic: str, partition: int, offset: int, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else repr(error)
        super().__init__(f"cannot decode the record at {topic}/{partition} offset {offset}: {text}")
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.error = text

    def __reduce__(self) -> Any:
        # Exceptions cross from the Python workers by pickle; the location goes with them.
        return RecordDecodeError, (self.topic, self.partition, self.offset, self.error)


def check_decode_errors(mode: str, dead_letter_topic: str | None) -> None:
    if mode not in DECODE_ERRORS:
        raise ValueError(f"decodeErrors={mode!r}: expected one of {', '.join(DECODE_ERRORS)}")
    if mode == "deadletter" and not dead_letter_topic:
        raise ValueError('decodeErrors="deadletter" needs deadLetterTopic')
    if mode != "deadletter" and dead_letter_topic:
        raise ValueError('deadLetterTopic is only used with decodeErrors="deadletter"')


def dead_letter_envelope(record: Sequence[Any], error: str) -> bytes:
    """The dead-letter record's value: JSON with the source location, the error, and the raw key
    and value in base64 (JSON, not headers: brokers before 0.11 have no headers)."""

    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode("ascii")

    key, value, topic, partition, offset = record[:5]
    return json.dumps(
        {
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "error": error,
            "key": b64(key),
            "value": b64(value),
        },
        sort_keys=True,
    ).encode("utf-8")


# One producer per worker process and configuration: creating one per record would cost a
# connection each; workers are reused across tasks.
_producers: dict[tuple[tuple[str, str], ...], Producer] = {}
_producers_lock = threading.Lock()


def _producer(config: Mapping[str, Any]) -> Producer:
    key = tuple(sorted((str(k), str(v)) for k, v in config.items()))
    with _producers_lock:
        producer = _producers.get(key)
        if producer is None:
            producer = _producers[key] = Producer(with_logger(dict(config)))
        return producer


class DeadLetterWriter:
    """Writes raw records to one topic, synchronously: a record counts as handled only once the
    broker has it."""

    def __init__(self, topic: str, kafka_params: Mapping[str, Any]) -> None:
        self.topic = topic
        # Plain data, resolved to a producer configuration on the executor that needs it.
        self._kafka_params = {str(k): v for k, v in kafka_params.items()}
        self._resolved: dict[str, Any] | None = None

    def _config(self) -> dict[str, Any]:
        # Resolved once per executor-side copy: broker discovery may ask ZooKeeper.
        if self._resolved is None:
            self._resolved = self._resolve()
        return self._resolved

    def _resolve(self) -> dict[str, Any]:
        from reliable_kafka.kafka.client.params import parse_kafka_params  # noqa: PLC0415
        from reliable_kafka.kafka.client.range_reader import broker_client_config  # noqa: PLC0415 - executors only

        params = parse_kafka_params(self._kafka_params)
        config = {
            k: v
            for k, v in params.client_config.items()
            if k.startswith(("security.", "ssl.", "sasl.", "api.version", "broker.version", "client."))
        }
        config.update(broker_client_config(params))
        return config

    def write(self, record: Sequence[Any], error: str) -> None:
        """Write ``record`` (key, value, topic, partition, offset) and its ``error``."""
        topic, partition, offset = record[2:5]
        producer = _producer(self._config())
        outcome: list[Any] = []
        envelope = dead_letter_envelope(record, error)
        try:
            producer.produce(
                self.topic, value=envelope, key=record[0], on_delivery=lambda err, _msg: outcome.append(err)
            )
            producer.flush(_DELIVERY_TIMEOUT_S)
        except (KafkaException, BufferError) as exc:
            raise RecordDecodeError(
                topic, partition, offset, f"{error}; dead-letter write failed: {exc!r}"
            ) from exc
        if not outcome or outcome[0] is not None:
            reason = outcome[0] if outcome else f"no acknowledgement within {_DELIVERY_TIMEOUT_S:.0f} s"
            raise RecordDecodeError(topic, partition, offset, f"{error}; dead-letter write failed: {reason}")

"""A producer thread for the examples: lines of random words, counted as they are acknowledged."""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from reliable_kafka.util.librdkafka_log import with_logger

logger = logging.getLogger(__name__)

WORDS = (
    *("spark", "streaming", "kafka", "receiver", "block", "offset", "zookeeper", "batch", "driver"),
    *("executor", "write", "ahead", "log", "checkpoint", "partition", "consumer", "group", "commit"),
)


class LineProducer(threading.Thread):
    """Sends ``rate`` lines per second of 1-8 random words to ``topic`` for ``seconds`` seconds.

    ``words_acked`` and ``end_offsets`` only count messages the broker acknowledged, so they are
    exactly what a consumer of the topic can read.
    """

    def __init__(
        self,
        client_config: Mapping[str, Any],
        topic: str,
        seconds: float,
        rate: int,
        seed: int | None = None,
    ) -> None:
        super().__init__(name="line-producer", daemon=True)
        self._producer: Producer | None = Producer(with_logger({**client_config, "linger.ms": 20}))
        self._topic = topic
        self._seconds = seconds
        self._rate = rate
        self._random = random.Random(seed)  # noqa: S311 - picks words, guards nothing
        self._lock = threading.Lock()
        self.lines_acked = 0
        self.words_acked = 0
        self.end_offsets: dict[int, int] = {}
        self.errors: list[KafkaError] = []

    def run(self) -> None:
        producer = self._producer
        assert producer is not None
        deadline = time.monotonic() + self._seconds
        interval = 1.0 / self._rate
        next_send = time.monotonic()
        while next_send < deadline:
            words = self._random.choices(WORDS, k=self._random.randint(1, 8))
            line = " ".join(words)
            producer.produce(
                self._topic, line.encode("utf-8"), on_delivery=functools.partial(self._acked, len(words))
            )
            producer.poll(0)
            next_send += interval
            time.sleep(max(0.0, next_send - time.monotonic()))
        unacknowledged = producer.flush(60)
        if unacknowledged:
            logger.error("%d messages were not acknowledged by the broker", unacknowledged)
        # Dropping the last reference closes the client now, not when the broker goes away under it.
        self._producer = None
        del producer

    def _acked(self, words: int, error: KafkaError | None, message: Message) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(error)
                return
            self.lines_acked += 1
            self.words_acked += words
            partition, offset = message.partition(), message.offset()
            self.end_offsets[partition] = max(self.end_offsets.get(partition, 0), offset + 1)

"""pyspark 2.4's ``Broker``: the leader ``createRDD`` may be told to read a partition from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Broker:
    """A Kafka broker's host and port; equal and hashed by both.

    A partition's leader here is only where its task prefers to run (Spark's ``KafkaRDD`` ran it
    on the leader's host): librdkafka finds the leader itself, and follows it when it moves.
    """

    host: str
    port: int

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise TypeError(f"Broker host should be a non-empty str, got {self.host!r}")
        if not isinstance(self.port, int) or isinstance(self.port, bool) or not 0 < self.port < 65536:
            raise TypeError(f"Broker port should be an int in 1..65535, got {self.port!r}")

    # pyspark 2.4 kept them under these names; code that read them still works.
    @property
    def _host(self) -> str:
        return self.host

    @property
    def _port(self) -> int:
        return self.port

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

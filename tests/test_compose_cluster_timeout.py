"""The compose cluster's readiness timeout names the broker and shows what its containers did."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster_backends import DockerComposeCluster


class TimedOutServices:
    """pytest-docker's ``Services`` whose broker never answers, and whose compose commands print."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._docker_compose = self

    def wait_until_responsive(self, check: Any, timeout: float, pause: float) -> None:
        raise Exception("Timeout reached while waiting on service!")

    def execute(self, subcommand: str) -> bytes:
        self.asked.append(subcommand)
        if subcommand == "ps":
            return b"reliable-kafka-tests-4_kafka_1   Exit 137\n"
        raise Exception(f'Command {subcommand} returned 1: """no such service"""')


def test_a_broker_that_never_answers_fails_with_its_containers_and_log() -> None:
    services = TimedOutServices()
    cluster = DockerComposeCluster("4", services)
    with pytest.raises(TimeoutError) as raised:
        cluster.wait_ready(timeout_s=5)
    message = str(raised.value)
    assert "the Kafka 4 compose broker did not answer at 127.0.0.1:29192 within 5 s" in message
    assert "Exit 137" in message
    assert "the broker's last lines: not read (Command logs" in message
    assert services.asked == ["ps", "logs --no-color --tail 40 kafka"]

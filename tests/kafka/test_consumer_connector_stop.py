"""ConsumerConnector.shutdown: the waits for the partition consumers and for leaving the group
share one deadline (no broker: the consumers and the group are stand-ins)."""

from __future__ import annotations

import threading

from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.receiver.consumer_connector import ConsumerConnector


class StuckConsumer:
    """A partition consumer whose thread never ends: every join waits out its timeout."""

    def __init__(self, tp: TopicAndPartition) -> None:
        self.tp = tp
        self.next_offset = None
        self.joined_with: list[float | None] = []
        self._never = threading.Event()

    def stop(self) -> None:
        pass

    def join(self, timeout_s: float | None = None) -> bool:
        self.joined_with.append(timeout_s)
        self._never.wait(timeout_s)
        return False


class RecordingGroup:
    def __init__(self) -> None:
        self.stopped_with: list[float] = []

    def stop(self, timeout_s: float) -> None:
        self.stopped_with.append(timeout_s)


def test_a_shutdown_waits_once_for_consumers_and_group_together() -> None:
    params = parse_kafka_params({}, zookeeper_connect="zk:2181", group_id="g")
    connector = ConsumerConnector(params, {"events": 2}, sink=lambda *a: None, on_failure=lambda m, e: None)
    consumers = [StuckConsumer(TopicAndPartition("events", p)) for p in range(2)]
    group = RecordingGroup()
    connector._consumers = {c.tp: c for c in consumers}  # type: ignore[assignment]
    connector._group = group  # type: ignore[assignment]

    connector.shutdown(timeout_s=1.0)

    # The first stuck consumer used up the deadline; the second got what was left (nothing),
    # not a bound of its own, and so did leaving the group.
    assert consumers[0].joined_with[0] is not None and consumers[0].joined_with[0] <= 1.0
    assert consumers[1].joined_with == [0.0]
    assert group.stopped_with == [0.0]
    # One deadline (1 s) in all, not one per consumer plus one for the group: stated on the waits
    # the connector asked for, not on the wall clock.
    waits = [w for c in consumers for w in c.joined_with] + group.stopped_with
    assert sum(w for w in waits if w is not None) <= 1.0

"""KafkaGroupMembership's state machine alone, on a scripted stand-in for its confluent-kafka
Consumer: when a partition stops being owned relative to the listener's calls (revoke: after;
lost and fatal errors: before), and which assign calls each protocol makes."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition as TP
from reliable_kafka.kafka.offsets.group import membership
from reliable_kafka.kafka.offsets.group.membership import GroupJoinFailedError, KafkaGroupMembership
from tests.support import wait_until

Callback = Callable[[Any, list[TopicPartition]], None]


class ScriptedConsumer:
    """Runs the scripted rebalance events from ``poll``, as librdkafka calls its callbacks."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.events: queue.Queue[tuple[str, list[TopicPartition]] | KafkaError] = queue.Queue()
        self.callbacks: dict[str, Callback] = {}
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []
        self.closed = threading.Event()

    def subscribe(self, topics: list[str], **callbacks: Callback) -> None:
        self.callbacks = callbacks

    def poll(self, timeout: float) -> None:
        try:
            event = self.events.get_nowait()
        except queue.Empty:
            return
        if isinstance(event, KafkaError):
            self.config["error_cb"](event)
            return
        kind, partitions = event
        self.callbacks[kind](self, partitions)

    def _record(self, name: str, partitions: list[TopicPartition] | None = None) -> None:
        self.calls.append((name, [(p.topic, p.partition) for p in partitions or []]))

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._record("assign", partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._record("incremental_assign", partitions)

    def unassign(self) -> None:
        self._record("unassign")

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._record("incremental_unassign", partitions)

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._record("pause", partitions)

    def close(self) -> None:
        self.closed.set()


class Listener:
    def __init__(self) -> None:
        self.member: KafkaGroupMembership | None = None
        self.log: list[tuple[str, list[TP], list[bool]]] = []
        self.failures: list[BaseException] = []
        self.changed = threading.Event()

    def _owned(self, partitions: list[TP]) -> list[bool]:
        assert self.member is not None
        return [self.member.owns(tp) for tp in partitions]

    def on_partitions_assigned(self, partitions: Mapping[TP, str]) -> None:
        self.log.append(("assigned", sorted(partitions), self._owned(sorted(partitions))))
        self.changed.set()

    def on_partitions_revoked(self, partitions: list[TP]) -> None:
        self.log.append(("revoked", partitions, self._owned(partitions)))
        self.changed.set()

    def on_rebalance_failed(self, error: BaseException) -> None:
        self.failures.append(error)
        self.changed.set()


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ScriptedConsumer]]:
    made: list[ScriptedConsumer] = []

    def factory(config: dict[str, Any]) -> ScriptedConsumer:
        made.append(ScriptedConsumer(config))
        return made[-1]

    monkeypatch.setattr(membership, "Consumer", factory)
    yield made


def start(
    strategy: str, first: list[TopicPartition]
) -> tuple[KafkaGroupMembership, ScriptedConsumer, Listener]:
    listener = Listener()
    member = KafkaGroupMembership(
        {"bootstrap.servers": "b:9092"}, "g", {"t": 2}, listener, assignment_strategy=strategy
    )
    listener.member = member
    consumer: ScriptedConsumer = member.consumer  # type: ignore[assignment]
    consumer.events.put(("on_assign", first))
    member.start(timeout_s=30)
    return member, consumer, listener


def step(
    consumer: ScriptedConsumer, listener: Listener, event: tuple[str, list[TopicPartition]] | KafkaError
) -> None:
    listener.changed.clear()
    consumer.events.put(event)
    assert listener.changed.wait(30), f"nothing happened on {event}"


def tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition("t", p) for p in partitions]


def test_the_member_is_configured_never_to_commit_or_read_by_itself(scripted: list[ScriptedConsumer]) -> None:
    member, consumer, _ = start("roundrobin", tps(0))
    try:
        config = consumer.config
        assert (config["group.id"], config["partition.assignment.strategy"]) == ("g", "roundrobin")
        assert config["enable.auto.commit"] is False and config["enable.auto.offset.store"] is False
        assert consumer.calls[:2] == [("assign", [("t", 0)]), ("pause", [("t", 0)])]
    finally:
        member.stop()


def test_revoked_partitions_stay_owned_until_the_listener_returns(scripted: list[ScriptedConsumer]) -> None:
    member, consumer, listener = start("range", tps(0, 1))
    try:
        assert listener.log == [("assigned", [TP("t", 0), TP("t", 1)], [True, True])]
        step(consumer, listener, ("on_revoke", tps(0, 1)))
        assert listener.log[-1] == ("revoked", [TP("t", 0), TP("t", 1)], [True, True])
        # The listener runs on a helper thread; the callback disowns and unassigns once it returned.
        wait_until(lambda: consumer.calls[-1] == ("unassign", []), what="the unassign")
        assert not member.owned_partitions()
    finally:
        member.stop()


def test_lost_partitions_are_disowned_before_the_listener_hears(scripted: list[ScriptedConsumer]) -> None:
    member, consumer, listener = start("cooperative-sticky", tps(0, 1))
    try:
        assert consumer.calls[0] == ("incremental_assign", [("t", 0), ("t", 1)])
        step(consumer, listener, ("on_lost", tps(1)))
        assert listener.log[-1] == ("revoked", [TP("t", 1)], [False])
        assert set(member.owned_partitions()) == {TP("t", 0)}
        wait_until(lambda: consumer.calls[-1] == ("incremental_unassign", [("t", 1)]), what="the unassign")
    finally:
        member.stop()


def test_a_fatal_error_disowns_everything_and_reports_the_failure(scripted: list[ScriptedConsumer]) -> None:
    member, consumer, listener = start("range", tps(0, 1))
    step(consumer, listener, KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    assert consumer.closed.wait(30)
    assert [entry for entry in listener.log if entry[0] == "revoked"] == [
        ("revoked", [TP("t", 0), TP("t", 1)], [False, False])
    ]
    assert len(listener.failures) == 1
    assert not member.owned_partitions()
    member.stop()


def test_stop_leaves_the_group_through_close(scripted: list[ScriptedConsumer]) -> None:
    member, consumer, _ = start("range", tps(0))
    member.stop()
    assert consumer.closed.is_set()
    member.stop()  # idempotent


def test_no_assignment_in_time_fails_the_start(scripted: list[ScriptedConsumer]) -> None:
    member = KafkaGroupMembership({"bootstrap.servers": "b:9092"}, "g", {"t": 1}, Listener())
    with pytest.raises(GroupJoinFailedError, match="got no assignment within 0 s"):
        member.start(timeout_s=0.2)
    assert scripted[0].closed.is_set()

"""Kafka 0.8 RangeAssignor, case by case."""

from __future__ import annotations

import pytest

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition as TP
from reliable_kafka.kafka.offsets.zk.range_assignor import consumer_threads_per_topic, range_assign


def test_ten_partitions_over_three_threads_gives_the_extra_partitions_to_the_first() -> None:
    threads = consumer_threads_per_topic({"c1": {"t": 1}, "c2": {"t": 2}})
    assignment = range_assign(threads, {"t": list(range(10))})
    by_thread: dict[str, list[int]] = {}
    for tp, thread in sorted(assignment.items()):
        by_thread.setdefault(thread, []).append(tp.partition)
    assert by_thread == {"c1-0": [0, 1, 2, 3], "c2-0": [4, 5, 6], "c2-1": [7, 8, 9]}


def test_thread_ids_sort_as_strings_like_consumer_thread_id_compare() -> None:
    # "c-10" < "c-2" as strings: Kafka compares ConsumerThreadId by toString.
    threads = consumer_threads_per_topic({"c": {"t": 11}})
    assert threads["t"][:3] == ["c-0", "c-1", "c-10"]
    assignment = range_assign(threads, {"t": list(range(11))})
    assert assignment[TP("t", 2)] == "c-10"
    assert assignment[TP("t", 10)] == "c-9"


def test_more_threads_than_partitions_leaves_the_last_threads_idle(caplog: pytest.LogCaptureFixture) -> None:
    threads = consumer_threads_per_topic({"a": {"t": 2}, "b": {"t": 2}})
    assignment = range_assign(threads, {"t": [0, 1, 2]})
    assert assignment == {TP("t", 0): "a-0", TP("t", 1): "a-1", TP("t", 2): "b-0"}
    assert [r.getMessage() for r in caplog.records] == [
        "No broker partitions consumed by consumer thread b-1 for topic t"
    ]


def test_a_topic_without_partitions_warns_at_no_rebalance(caplog: pytest.LogCaptureFixture) -> None:
    """A topic Kafka does not have: the receiver's missing-topic rule says so, once (issue 42)."""
    threads = consumer_threads_per_topic({"a": {"gone": 2}})
    assert range_assign(threads, {"gone": []}) == {}
    assert caplog.records == []


def test_partitions_are_sorted_numerically_and_topics_independently() -> None:
    threads = consumer_threads_per_topic({"a": {"x": 1, "y": 1}, "b": {"x": 1}})
    assignment = range_assign(threads, {"x": [10, 2, 1, 0], "y": [1, 0]})
    assert assignment == {
        TP("x", 0): "a-0",
        TP("x", 1): "a-0",
        TP("x", 2): "b-0",
        TP("x", 10): "b-0",
        TP("y", 0): "a-0",
        TP("y", 1): "a-0",
    }


def test_only_the_requested_topics_and_nothing_for_unknown_topics() -> None:
    threads = consumer_threads_per_topic({"a": {"x": 1, "y": 1}})
    assert range_assign(threads, {"x": [0], "y": [0]}, ["x"]) == {TP("x", 0): "a-0"}
    assert range_assign(threads, {"x": []}, ["x"]) == {}
    assert range_assign({}, {"x": [0, 1]}, ["x"]) == {}


def test_every_member_computes_the_same_assignment_whatever_the_input_order() -> None:
    forward = consumer_threads_per_topic({"a": {"t": 2}, "b": {"t": 1}, "c": {"t": 3}})
    backward = consumer_threads_per_topic({"c": {"t": 3}, "b": {"t": 1}, "a": {"t": 2}})
    partitions = list(range(17))
    assert range_assign(forward, {"t": partitions}) == range_assign(backward, {"t": partitions[::-1]})
    assert len(range_assign(forward, {"t": partitions})) == 17

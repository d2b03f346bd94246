"""The missing-topic rule, decision by decision (issue 42, item 3): what is logged, when the stream
ends, and with what error. A clock of the test's own; Kafka's answers given."""

from __future__ import annotations

import logging

import pytest

from reliable_kafka.kafka.client.missing_topics import MissingTopicError, MissingTopics
from reliable_kafka.kafka.client.topic_lookup import allows_auto_creation
from reliable_kafka.receiver.fatal_error import FatalReceiverError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records]


def test_auto_creation_is_the_consumers_allow_auto_create_topics() -> None:
    assert not allows_auto_creation({})
    assert not allows_auto_creation({"allow.auto.create.topics": "false"})
    assert allows_auto_creation({"allow.auto.create.topics": "True"})
    assert allows_auto_creation({"allow.auto.create.topics": True})


def test_a_topic_missing_past_the_bound_ends_the_stream_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    state = MissingTopics(["events", "gone"], 5000, asks_to_create=False, now=clock)
    assert state.answer({"gone"}) is None
    assert state.pending == {"gone"}
    clock.now += 4.9
    assert state.answer({"gone"}) is None
    clock.now += 0.1
    error = state.answer({"gone"})

    assert isinstance(error, MissingTopicError) and isinstance(error, FatalReceiverError)
    assert str(error) == (
        "topic 'gone' does not exist in Kafka (missing for 5000 ms, missing.topic.timeout.ms): create it; "
        "or, where the brokers create topics on first use (auto.create.topics.enable), set "
        "allow.auto.create.topics=true in kafkaParams; or wait for it with missing.topic.timeout.ms=-1"
    )
    # No WARNING while the bound runs: the error is the news.
    assert lines(caplog) == [
        (
            logging.INFO,
            "topic 'gone' does not exist; the stream ends unless it exists within 5000 ms "
            "(missing.topic.timeout.ms)",
        )
    ]


def test_a_topic_that_appears_within_the_bound_is_no_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    state = MissingTopics(["late"], 5000, asks_to_create=False, now=clock)
    assert state.answer({"late"}) is None
    clock.now += 3
    assert state.answer(set()) is None
    assert state.settled
    clock.now += 60
    assert state.answer(set()) is None
    assert lines(caplog)[-1] == (logging.INFO, "topic 'late' exists now")


def test_several_topics_past_the_bound_are_one_error(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    state = MissingTopics(["b", "a", "c"], 1000, asks_to_create=False, now=clock)
    state.answer({"a", "b"})
    clock.now += 1
    error = state.answer({"a", "b"})
    assert error is not None
    assert str(error).startswith("topics 'a', 'b' do not exist in Kafka (missing for 1000 ms")


def test_with_auto_creation_one_warning_and_an_error_if_the_brokers_do_not_create_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The consumer asked for it by name with allow.auto.create.topics=true: brokers with
    auto.create.topics.enable create it at once; brokers without it never do."""
    caplog.set_level(logging.INFO)
    clock = Clock()
    state = MissingTopics(["fresh"], 5000, asks_to_create=True, now=clock)
    for _ in range(4):
        assert state.answer({"fresh"}) is None
        clock.now += 1
    assert lines(caplog) == [
        (
            logging.WARNING,
            "topic 'fresh' does not exist: asked the brokers to create it (allow.auto.create.topics=true); "
            "waiting for it",
        )
    ]
    clock.now += 1
    error = state.answer({"fresh"})
    assert error is not None
    assert str(error) == (
        "topic 'fresh' does not exist in Kafka, and the brokers did not create it within 5000 ms "
        "(missing.topic.timeout.ms) of being asked (allow.auto.create.topics=true): their "
        "auto.create.topics.enable is off, or creating it failed; create it"
    )


def test_no_bound_waits_for_ever_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    state = MissingTopics(["someday"], -1, asks_to_create=False, now=clock)
    for _ in range(5):
        assert state.answer({"someday"}) is None
        clock.now += 3600
    assert state.answer(set()) is None
    assert lines(caplog) == [
        (logging.WARNING, "topic 'someday' does not exist; waiting for it (missing.topic.timeout.ms=-1)"),
        (logging.INFO, "topic 'someday' exists now"),
    ]


def test_a_topic_an_acl_refuses_is_asked_again_and_never_called_missing() -> None:
    """Kafka has it and refuses this client: the refusal judge's business (access_refusal), so the
    watch keeps asking (each answer tells the judge again) and no MissingTopicError names it."""
    clock = Clock()
    state = MissingTopics(["events"], 5000, asks_to_create=False, now=clock)
    assert state.answer({"events"}) is None  # missing at first (an ACL hid it, or it was created)
    clock.now += 4.9
    assert state.answer(set(), refused={"events"}) is None
    clock.now += 60
    assert state.answer(set(), refused={"events"}) is None
    assert not state.settled and state.pending == {"events"}
    assert state.answer(set()) is None  # granted: present
    assert state.settled

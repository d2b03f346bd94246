"""Kafka refusing a client, decision by decision (issue 41, "Bad input"): which of librdkafka's
errors are refusals, what the one error says, and when a streak of them ends the stream. The
texts are confluent-kafka 2.16.1's, as seen against secured brokers (shared notes on secured
Kafka); a clock of the test's own."""

from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import KafkaError

from reliable_kafka.kafka.client.access_refusal import (
    AccessRefusals,
    AccessRefusedError,
    ClientIdentity,
    Refusal,
    classify,
    refusal_error,
    timeout_ms_of,
)
from reliable_kafka.kafka.client.error_log import ClientErrorLog
from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.receiver.fatal_error import FatalReceiverError
from tests.support.waiting import wait_for_event

SCRAM_REFUSED = (
    "SASL authentication error: Authentication failed during authentication due to invalid credentials "
    "with SASL mechanism SCRAM-SHA-512"
)
PLAIN_REFUSED = "Authentication failed: Invalid username or password"
GROUP_REFUSED = "FindCoordinator response error: Group authorization failed."
TOPIC_REFUSED = "Subscribed topic not available: events: Broker: Topic authorization failed"
CERTIFICATE_REFUSED = (
    "ssl://127.0.0.1:9094/bootstrap: SSL handshake failed: ssl/tls alert bad certificate: SSL alert number 42"
)
BROKER_UNTRUSTED = (
    "ssl://127.0.0.1:9094/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify "
    "failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured"
)
MECHANISM_REFUSED = (
    "sasl_ssl://127.0.0.1:9093/bootstrap: SASL PLAIN mechanism handshake failed: Broker: Unsupported SASL "
    "mechanism: broker's supported mechanisms: SCRAM-SHA-512"
)

SCRAM_CONFIG = {
    "bootstrap.servers": "127.0.0.1:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": "canary-Secret-4711",
    "group.id": "orders",
}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("code", "text", "refusal"),
    [
        (KafkaError._AUTHENTICATION, SCRAM_REFUSED, Refusal.CREDENTIALS),
        (KafkaError._AUTHENTICATION, PLAIN_REFUSED, Refusal.CREDENTIALS),
        (KafkaError._AUTHENTICATION, MECHANISM_REFUSED, Refusal.MECHANISM),
        (KafkaError.UNSUPPORTED_SASL_MECHANISM, "Broker: Unsupported SASL mechanism", Refusal.MECHANISM),
        (KafkaError.GROUP_AUTHORIZATION_FAILED, GROUP_REFUSED, Refusal.GROUP_ACL),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, TOPIC_REFUSED, Refusal.TOPIC_ACL),
        (KafkaError._TRANSPORT, CERTIFICATE_REFUSED, Refusal.CLIENT_CERTIFICATE),
        (KafkaError._SSL, BROKER_UNTRUSTED, Refusal.BROKER_CERTIFICATE),
        (KafkaError._TRANSPORT, BROKER_UNTRUSTED, Refusal.BROKER_CERTIFICATE),
        # What follows a refusal, and what an outage says: librdkafka's to ride out.
        (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down", None),
        (KafkaError._TRANSPORT, "127.0.0.1:9093/bootstrap: Connect to ipv4#127.0.0.1:9093 failed", None),
        (KafkaError._TIMED_OUT, "Local: Timed out", None),
    ],
)
def test_librdkafkas_errors_that_are_refusals(code: int, text: str, refusal: Refusal | None) -> None:
    assert classify(code, text) is refusal


def test_the_error_names_the_principal_the_mechanism_and_what_to_set_never_the_password() -> None:
    identity = ClientIdentity.of(SCRAM_CONFIG)
    message = identity.message(Refusal.CREDENTIALS, SCRAM_REFUSED)

    assert message == (
        "Kafka refused the credentials of User:alice (SCRAM-SHA-512 over SASL_SSL, brokers 127.0.0.1:9093): "
        f"{SCRAM_REFUSED}. Set the right sasl.username and sasl.password in kafkaParams, or create or "
        "update the user's credentials on the brokers (kafka-configs --alter --entity-type users "
        "--entity-name alice --add-config 'SCRAM-SHA-512=[password=...]')"
    )
    assert "canary-Secret-4711" not in message


def test_acl_refusals_name_the_group_or_topic_and_the_acl_to_grant() -> None:
    identity = ClientIdentity.of(SCRAM_CONFIG, topics=["events"])

    group = identity.message(Refusal.GROUP_ACL, GROUP_REFUSED)
    topic = identity.message(Refusal.TOPIC_ACL, TOPIC_REFUSED)

    assert group.startswith("Kafka refused User:alice access to consumer group 'orders'")
    assert group.endswith(
        "Grant it: kafka-acls --bootstrap-server 127.0.0.1:9093 --add --allow-principal User:alice "
        "--operation Read --group orders"
    )
    assert topic.startswith("Kafka refused User:alice access to topic 'events'")
    assert topic.endswith("--allow-principal User:alice --operation Read --operation Describe --topic events")


def test_certificate_and_mechanism_refusals_say_which_setting_mends_them() -> None:
    mtls = ClientIdentity.of(
        {
            "bootstrap.servers": "127.0.0.1:9094",
            "security.protocol": "SSL",
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.certificate.location": "/etc/alice.pem",
            "ssl.key.location": "/etc/alice.key",
            "ssl.key.password": "canary-Secret-4711",
        }
    )
    no_certificate = ClientIdentity.of({"bootstrap.servers": "127.0.0.1:9094", "security.protocol": "SSL"})
    plain = ClientIdentity.of({**SCRAM_CONFIG, "sasl.mechanism": "PLAIN"})

    assert mtls.principal.startswith("the principal of certificate /etc/alice.pem")
    refused = mtls.message(Refusal.CLIENT_CERTIFICATE, CERTIFICATE_REFUSED)
    assert "set ssl.certificate.location and ssl.key.location (now /etc/alice.pem)" in refused
    assert "(none is set)" in no_certificate.message(Refusal.CLIENT_CERTIFICATE, CERTIFICATE_REFUSED)
    assert "Set ssl.ca.location to the CA that signed the brokers' certificates (now /etc/ca.pem)" in (
        mtls.message(Refusal.BROKER_CERTIFICATE, BROKER_UNTRUSTED)
    )
    mechanism = plain.message(Refusal.MECHANISM, MECHANISM_REFUSED)
    assert mechanism.startswith("the brokers do not offer SASL mechanism PLAIN to User:alice")
    assert "add PLAIN to the brokers' sasl.enabled.mechanisms" in mechanism
    assert "canary-Secret-4711" not in refused + mechanism


def test_an_oauthbearer_principal_is_the_unsecured_tokens_subject() -> None:
    identity = ClientIdentity.of(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.config": "principal=bob scope=read",
        }
    )
    assert identity.principal == "User:bob"


def test_an_answer_to_a_request_is_a_refusal_at_once() -> None:
    identity = ClientIdentity.of(SCRAM_CONFIG)
    error = refusal_error(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, GROUP_REFUSED), identity)

    assert isinstance(error, AccessRefusedError) and isinstance(error, FatalReceiverError)
    assert error.refusal is Refusal.GROUP_ACL
    assert refusal_error(KafkaError(KafkaError._TIMED_OUT, "Local: Timed out"), identity) is None
    assert refusal_error(None, identity) is None


def test_a_streak_of_refusals_past_the_bound_is_one_error_heard_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    heard: list[AccessRefusedError] = []
    first_heard = threading.Event()

    def on_refused(error: AccessRefusedError) -> None:
        heard.append(error)
        first_heard.set()

    refusals = AccessRefusals(ClientIdentity.of(SCRAM_CONFIG), 10_000, on_refused=on_refused, now=clock)
    refused = KafkaError(KafkaError._AUTHENTICATION, SCRAM_REFUSED)
    for _ in range(20):  # librdkafka reports it at every reconnect, ~0.5 s apart
        assert refusals.observe(refused) is Refusal.CREDENTIALS
        assert refusals.verdict is None
        clock.now += 0.5
    assert refusals.observe(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")) is None
    refusals.observe(refused)  # 10 s after the first
    refusals.observe(refused)

    wait_for_event(first_heard, what="the refusal reported")
    verdict = refusals.verdict
    assert verdict is not None and heard == [verdict]
    assert str(verdict).startswith("Kafka refused the credentials of User:alice")
    assert str(verdict).endswith("(refused for 10 s; access.refusal.timeout.ms=10000)")
    # One WARNING when the streak began, none per report.
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        "the client gives up unless this stops within 10000 ms (access.refusal.timeout.ms)"
    )


def test_a_refusal_that_stopped_starts_no_error_and_a_later_one_starts_a_new_streak() -> None:
    clock = Clock()
    refusals = AccessRefusals(ClientIdentity.of(SCRAM_CONFIG), 10_000, streak_gap_s=15.0, now=clock)
    refused = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, GROUP_REFUSED)

    refusals.observe(refused)  # the ACL was created a moment later
    clock.now += 5
    assert refusals.error() is not None  # a request failing now failed because of it
    clock.now += 11
    assert refusals.error() is None  # quiet for longer than the streak gap: the client got through
    refusals.observe(refused)
    clock.now += 9
    refusals.observe(refused)
    assert refusals.verdict is None  # 9 s into the new streak
    clock.now += 1
    refusals.observe(refused)
    assert refusals.verdict is not None and refusals.verdict.refusal is Refusal.GROUP_ACL


def test_minus_one_retries_for_ever_as_librdkafka_does() -> None:
    clock = Clock()
    refusals = AccessRefusals(ClientIdentity.of(SCRAM_CONFIG), -1, now=clock)
    for _ in range(100):
        refusals.observe(KafkaError(KafkaError._AUTHENTICATION, SCRAM_REFUSED))
        clock.now += 1
    assert refusals.verdict is None
    assert refusals.error() is not None  # a failed request still says why


def test_the_bound_is_a_kafka_param_of_ours_never_passed_to_librdkafka() -> None:
    params = parse_kafka_params({**SCRAM_CONFIG, "access.refusal.timeout.ms": "2500"})
    assert params.access_refusal_timeout_ms == 2500
    assert "access.refusal.timeout.ms" not in params.client_config
    assert parse_kafka_params(SCRAM_CONFIG).access_refusal_timeout_ms == 10_000
    with pytest.raises(ValueError, match=r"access.refusal.timeout.ms='soon': expected an integer >= -1"):
        parse_kafka_params({**SCRAM_CONFIG, "access.refusal.timeout.ms": "soon"})
    assert timeout_ms_of({"access.refusal.timeout.ms": -1}) == -1


def test_the_client_error_log_leaves_refusals_to_the_streak(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    refusals = AccessRefusals(ClientIdentity.of(SCRAM_CONFIG), 10_000)
    log = ClientErrorLog("receiver orders", refusals)

    log(KafkaError(KafkaError._AUTHENTICATION, SCRAM_REFUSED))
    log(KafkaError(KafkaError._AUTHENTICATION, SCRAM_REFUSED))
    log(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))

    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert messages[0].startswith("Kafka refused the credentials of User:alice")
    assert messages[1].startswith("receiver orders: KafkaError{code=_ALL_BROKERS_DOWN")

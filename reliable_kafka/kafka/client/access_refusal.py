"""Kafka refusing this client (credentials, a mechanism, a certificate, an ACL) as one error
naming who was refused, for what, and what to grant or set; never a warning for ever.

librdkafka treats a refusal as one more broker failure: a wrong SASL password, a mechanism the
broker does not offer or a certificate the broker does not accept reach the error callback
(``_AUTHENTICATION``, ``_TRANSPORT``...) at every reconnect, and the client retries for ever; a
missing group or topic ACL comes back as an error among the consumer's messages. Nothing fails.
The decision is ours:

- An answer to a request of ours (a lookup that raised ``GROUP_AUTHORIZATION_FAILED``) is Kafka's
  verdict: :func:`refusal_error` turns it into an :class:`AccessRefusedError` at once.
- The error callback's refusals are a streak (:class:`AccessRefusals`), since a refusal may be
  short-lived (SCRAM credentials or ACLs created a moment after the client starts, brokers that
  learn them from ZooKeeper one by one). Per receiver or lookup client:

      clear ---refusal-------------------------------------> refused since now
      refused ---refusal >= access.refusal.timeout.ms
                 after the first, none apart by more
                 than the streak gap -----------------------> AccessRefusedError (once; on_refused)
      refused ---no refusal for the streak gap--------------> clear (the client got through)

  The streak gap is longer than librdkafka's longest wait between two connection attempts
  (``reconnect.backoff.max.ms`` and its jitter), so a refusal that goes on is never taken for one
  that ended. ``access.refusal.timeout.ms`` (kafkaParams, default 10000; -1: retry for ever, as
  librdkafka does) bounds the streak. A client whose call failed while refusals came
  (:meth:`AccessRefusals.error`) has its answer too: its caller raises the refusal, not a timeout.

What librdkafka does not repeat is repeated by whoever keeps asking (confluent-kafka 2.16): a
group ACL refusal comes once (FindCoordinator; later queries are silent), so the group member tells
it again until an assignment proves it gone; a topic ACL refusal never comes from a fetch (the
partition just stays empty), only from the topic's metadata, which the missing-topic watch asks
again and again. A login refused (credentials, mechanism, certificates) comes at every reconnect,
about every 0.4 s. Requests (a lookup, a commit) do not run the error callbacks: their callers
run them (a poll of a client that reads nothing) before asking :meth:`AccessRefusals.error`.

Messages name the principal (``User:<sasl.username>``, the certificate file), the mechanism or
the resource, and the setting or ACL that mends it; never a password or a key.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from confluent_kafka import KafkaError

from reliable_kafka.kafka.client.params import (
    ACCESS_REFUSAL_TIMEOUT_PARAM,
    DEFAULT_ACCESS_REFUSAL_TIMEOUT_MS,
    RETRY_FOR_EVER,
)
from reliable_kafka.receiver.fatal_error import FatalReceiverError

logger = logging.getLogger(__name__)

__all__ = [
    "ACCESS_REFUSAL_TIMEOUT_PARAM",
    "DEFAULT_ACCESS_REFUSAL_TIMEOUT_MS",
    "RETRY_FOR_EVER",
    "AccessRefusals",
    "AccessRefusedError",
    "ClientIdentity",
    "Refusal",
    "classify",
    "refusal_error",
    "timeout_ms_of",
]
# librdkafka waits up to reconnect.backoff.max.ms (default 10 s), +-20 % jitter, between two
# connection attempts to a broker, each of which reports the refusal again.
_RECONNECT_BACKOFF_MAX_PARAM = "reconnect.backoff.max.ms"
_DEFAULT_RECONNECT_BACKOFF_MAX_MS = 10_000
_STREAK_GAP_FACTOR = 1.5


class Refusal(Enum):
    """What Kafka refused; each names its fix."""

    CREDENTIALS = "credentials"
    MECHANISM = "mechanism"
    CLIENT_CERTIFICATE = "client certificate"
    BROKER_CERTIFICATE = "broker certificate"
    GROUP_ACL = "group ACL"
    TOPIC_ACL = "topic ACL"
    CLUSTER_ACL = "cluster ACL"


class AccessRefusedError(FatalReceiverError):
    """Kafka refused this client (see the module's doc); no retry mends it."""

    def __init__(self, message: str, refusal: Refusal) -> None:
        super().__init__(message)
        self.refusal = refusal


# librdkafka's texts (2.16), lower-cased. A handshake the broker cuts with a TLS alert about our
# certificate ("ssl/tls alert bad certificate: SSL alert number 42"; unknown ca, certificate
# required, expired...); a broker certificate we cannot verify.
_CLIENT_CERTIFICATE_ALERTS = (
    "alert bad certificate",
    "alert unknown ca",
    "alert certificate required",
    "alert certificate expired",
    "alert certificate revoked",
    "alert certificate unknown",
    "alert unsupported certificate",
    "alert access denied",
)
_BROKER_CERTIFICATE_FAILURES = ("certificate verify failed", "broker certificate could not be verified")
_MECHANISM_TEXTS = ("unsupported sasl mechanism", "supported mechanisms")
_CREDENTIALS_TEXTS = ("authentication failed", "invalid credentials", "invalid username or password")
# "Subscribed topic not available: <topic>: Broker: Topic authorization failed" (a subscription),
# "<topic>: Broker: Topic authorization failed" (a topic's metadata, named by us).
_REFUSED_TOPIC = re.compile(r"([^\s:]+): Broker: Topic authorization failed")
_CODES = {
    KafkaError.GROUP_AUTHORIZATION_FAILED: Refusal.GROUP_ACL,
    KafkaError.TOPIC_AUTHORIZATION_FAILED: Refusal.TOPIC_ACL,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: Refusal.CLUSTER_ACL,
    KafkaError.UNSUPPORTED_SASL_MECHANISM: Refusal.MECHANISM,
    KafkaError.SASL_AUTHENTICATION_FAILED: Refusal.CREDENTIALS,
}


def classify(code: int, text: str) -> Refusal | None:
    """The refusal librdkafka's error ``code`` with ``text`` reports; None for any other error
    (an outage, a timeout: librdkafka's to ride out)."""
    if code in _CODES:
        return _CODES[code]
    lowered = text.lower()
    if code in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT, KafkaError._SSL):
        if any(alert in lowered for alert in _CLIENT_CERTIFICATE_ALERTS):
            return Refusal.CLIENT_CERTIFICATE
        if any(failure in lowered for failure in _BROKER_CERTIFICATE_FAILURES):
            return Refusal.BROKER_CERTIFICATE
    if code == KafkaError._AUTHENTICATION:
        if any(part in lowered for part in _MECHANISM_TEXTS):
            return Refusal.MECHANISM
        return Refusal.CREDENTIALS
    return None


def _config_text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    return str(value).strip() if value is not None and str(value).strip() else None


@dataclass(frozen=True)
class ClientIdentity:
    """Who a client is to Kafka and what it asks for, from its config: the parts an error may
    name (never a password, a key or a token)."""

    brokers: str
    protocol: str
    mechanism: str | None
    username: str | None
    oauth_principal: str | None
    certificate: str | None
    ca: str | None
    group: str | None
    topics: tuple[str, ...]

    @classmethod
    def of(
        cls, config: Mapping[str, Any], *, group: str | None = None, topics: Iterable[str] = ()
    ) -> ClientIdentity:
        protocol = (_config_text(config, "security.protocol") or "PLAINTEXT").upper()
        sasl = protocol.startswith("SASL")
        mechanism = None
        if sasl:
            named = _config_text(config, "sasl.mechanism") or _config_text(config, "sasl.mechanisms")
            mechanism = (named or "GSSAPI").upper()  # librdkafka's default
        oauth = None
        if mechanism == "OAUTHBEARER":
            # librdkafka's unsecured tokens: "principal=<name> [scope=...]"; not a secret.
            token_config = _config_text(config, "sasl.oauthbearer.config") or ""
            match = re.search(r"(?:^|\s)principal=(\S+)", token_config)
            oauth = match.group(1) if match else None
        certificate = _config_text(config, "ssl.certificate.location") or _config_text(
            config, "ssl.keystore.location"
        )
        return cls(
            brokers=_config_text(config, "bootstrap.servers") or "(none given)",
            protocol=protocol,
            mechanism=mechanism,
            username=_config_text(config, "sasl.username") if sasl else None,
            oauth_principal=oauth,
            certificate=certificate if protocol.endswith("SSL") else None,
            ca=_config_text(config, "ssl.ca.location"),
            group=group if group is not None else _config_text(config, "group.id"),
            topics=tuple(sorted(set(topics))),
        )

    @property
    def principal(self) -> str:
        """The principal Kafka sees, as ``kafka-acls`` takes it (or says how it is found)."""
        if self.mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and self.username:
            return f"User:{self.username}"
        if self.mechanism == "OAUTHBEARER":
            return f"User:{self.oauth_principal}" if self.oauth_principal else "User:<the token's subject>"
        if self.mechanism is not None:
            return f"the {self.mechanism} principal"
        if self.protocol == "SSL" and self.certificate:
            return (
                f"the principal of certificate {self.certificate} "
                "(its subject, as the brokers' ssl.principal.mapping.rules map it)"
            )
        return "User:ANONYMOUS"

    def _acl_principal(self) -> str:
        return self.principal if self.principal.startswith("User:") else "User:<principal>"

    def _where(self) -> str:
        how = f"{self.mechanism} over {self.protocol}" if self.mechanism else self.protocol
        return f"{how}, brokers {self.brokers}"

    def message(self, refusal: Refusal, detail: str) -> str:
        """What was refused and what to grant or set."""
        return _MESSAGES[refusal](self, detail)

    def _credentials(self, detail: str) -> str:
        if self.mechanism and self.mechanism.startswith("SCRAM"):
            user = self.username or "<user>"
            how = (
                "create or update the user's credentials on the brokers (kafka-configs --alter "
                f"--entity-type users --entity-name {user} --add-config '{self.mechanism}=[password=...]')"
            )
        else:
            how = "add the user to the brokers' JAAS configuration of this mechanism"
        return (
            f"Kafka refused the credentials of {self.principal} ({self._where()}): {detail}. "
            f"Set the right sasl.username and sasl.password in kafkaParams, or {how}"
        )

    def _mechanism(self, detail: str) -> str:
        return (
            f"the brokers do not offer SASL mechanism {self.mechanism} to {self.principal} "
            f"({self._where()}): {detail}. Set sasl.mechanism to one their listener offers, or add "
            f"{self.mechanism} to the brokers' sasl.enabled.mechanisms"
        )

    def _client_certificate(self, detail: str) -> str:
        given = f"now {self.certificate}" if self.certificate else "none is set"
        return (
            f"the brokers refused this client's TLS certificate ({self._where()}): {detail}. The "
            "listener requires a client certificate (ssl.client.auth=required) that is valid and "
            "signed by a CA in the brokers' ssl.truststore: set ssl.certificate.location and "
            f"ssl.key.location ({given})"
        )

    def _broker_certificate(self, detail: str) -> str:
        trusted = f"now {self.ca}" if self.ca else "now the system's CAs"
        return (
            f"this client does not trust the brokers' TLS certificate ({self._where()}): {detail}. "
            f"Set ssl.ca.location to the CA that signed the brokers' certificates ({trusted})"
        )

    def _acls(self) -> str:
        return f"kafka-acls --bootstrap-server {self.brokers} --add --allow-principal {self._acl_principal()}"

    def _group_acl(self, detail: str) -> str:
        group = self.group or "<group>"
        return (
            f"Kafka refused {self.principal} access to consumer group '{group}' ({self._where()}): "
            f"{detail}. Grant it: {self._acls()} --operation Read --group {group}"
        )

    def _topic_acl(self, detail: str) -> str:
        match = _REFUSED_TOPIC.search(detail)
        topics = [match.group(1)] if match else list(self.topics) or ["<topic>"]
        named = " ".join(f"--topic {topic}" for topic in topics)
        quoted = ", ".join(f"'{topic}'" for topic in topics)
        return (
            f"Kafka refused {self.principal} access to topic {quoted} ({self._where()}): {detail}. "
            f"Grant it: {self._acls()} --operation Read --operation Describe {named}"
        )

    def _cluster_acl(self, detail: str) -> str:
        return (
            f"Kafka refused {self.principal} a cluster operation ({self._where()}): {detail}. "
            f"Grant it: {self._acls()} --operation Describe --cluster"
        )

    def error(self, refusal: Refusal, detail: str, *, suffix: str = "") -> AccessRefusedError:
        return AccessRefusedError(self.message(refusal, detail) + suffix, refusal)


_MESSAGES: dict[Refusal, Callable[[ClientIdentity, str], str]] = {
    Refusal.CREDENTIALS: ClientIdentity._credentials,
    Refusal.MECHANISM: ClientIdentity._mechanism,
    Refusal.CLIENT_CERTIFICATE: ClientIdentity._client_certificate,
    Refusal.BROKER_CERTIFICATE: ClientIdentity._broker_certificate,
    Refusal.GROUP_ACL: ClientIdentity._group_acl,
    Refusal.TOPIC_ACL: ClientIdentity._topic_acl,
    Refusal.CLUSTER_ACL: ClientIdentity._cluster_acl,
}


def refusal_error(error: KafkaError | None, identity: ClientIdentity) -> AccessRefusedError | None:
    """The refusal a failed request's ``error`` is (Kafka's answer: no streak to wait for)."""
    if error is None:
        return None
    refusal = classify(error.code(), error.str())
    return identity.error(refusal, error.str()) if refusal is not None else None


def timeout_ms_of(config: Mapping[str, Any]) -> int:
    """``access.refusal.timeout.ms`` from a config (our key; not librdkafka's), checked."""
    raw = config.get(ACCESS_REFUSAL_TIMEOUT_PARAM, DEFAULT_ACCESS_REFUSAL_TIMEOUT_MS)
    try:
        value = int(str(raw).strip()) if not isinstance(raw, bool) else None
    except ValueError:
        value = None
    if value is None or value < RETRY_FOR_EVER:
        raise ValueError(
            f"kafka param {ACCESS_REFUSAL_TIMEOUT_PARAM}={raw!r}: expected an integer >= {RETRY_FOR_EVER}"
        )
    return value


def _streak_gap_s(config: Mapping[str, Any]) -> float:
    try:
        backoff_ms = int(config.get(_RECONNECT_BACKOFF_MAX_PARAM, _DEFAULT_RECONNECT_BACKOFF_MAX_MS))
    except (TypeError, ValueError):
        backoff_ms = _DEFAULT_RECONNECT_BACKOFF_MAX_MS
    return _STREAK_GAP_FACTOR * max(backoff_ms, _DEFAULT_RECONNECT_BACKOFF_MAX_MS) / 1000.0


@dataclass
class _Streak:
    refusal: Refusal
    first: float
    last: float
    detail: str


class AccessRefusals:
    """The streak of one client's (or one receiver's clients') refusals; thread-safe.

    Fed by the error callbacks (:meth:`observe`, through ``ClientErrorLog``); ``on_refused`` hears
    the :class:`AccessRefusedError` once, on a thread of its own: the callbacks run inside
    librdkafka's poll, where closing the client (as ending a stream does) would deadlock.
    ``now`` is the monotonic clock in seconds (a test's own).
    """

    def __init__(
        self,
        identity: ClientIdentity,
        timeout_ms: int = DEFAULT_ACCESS_REFUSAL_TIMEOUT_MS,
        *,
        streak_gap_s: float = _DEFAULT_RECONNECT_BACKOFF_MAX_MS * _STREAK_GAP_FACTOR / 1000.0,
        on_refused: Callable[[AccessRefusedError], None] | None = None,
        ignored: Iterable[Refusal] = (),
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.identity = identity
        self._ignored = frozenset(ignored)
        self._timeout_ms = timeout_ms
        self._gap_s = streak_gap_s
        self._on_refused = on_refused
        self._now = now
        self._lock = threading.Lock()
        self._streak: _Streak | None = None
        self._verdict: AccessRefusedError | None = None

    @classmethod
    def of(
        cls,
        config: Mapping[str, Any],
        *,
        group: str | None = None,
        topics: Iterable[str] = (),
        timeout_ms: int | None = None,
        on_refused: Callable[[AccessRefusedError], None] | None = None,
        ignored: Iterable[Refusal] = (),
    ) -> AccessRefusals:
        """For the clients of ``config`` (librdkafka's config; ``timeout_ms`` None: read from it);
        ``ignored`` refusals do not concern them (a group ACL, to a group kept in ZooKeeper)."""
        return cls(
            ClientIdentity.of(config, group=group, topics=topics),
            timeout_ms_of(config) if timeout_ms is None else timeout_ms,
            streak_gap_s=_streak_gap_s(config),
            on_refused=on_refused,
            ignored=ignored,
        )

    def observe(self, error: KafkaError) -> Refusal | None:
        """One error a client reported; the refusal it is, if any (None for one ``ignored``)."""
        refusal = classify(error.code(), error.str())
        if refusal is None or refusal in self._ignored:
            return None
        verdict = None
        with self._lock:
            now = self._now()
            streak = self._streak
            if streak is None or now - streak.last > self._gap_s:
                self._streak = streak = _Streak(refusal, now, now, error.str())
                logger.warning(
                    "%s; %s",
                    self.identity.message(refusal, error.str()),
                    self._ends_when(),
                )
            streak.last, streak.refusal, streak.detail = now, refusal, error.str()
            bound_s = self._timeout_ms / 1000.0
            if self._verdict is None and self._timeout_ms != RETRY_FOR_EVER and now - streak.first >= bound_s:
                verdict = self._verdict = self.identity.error(
                    refusal,
                    error.str(),
                    suffix=f" (refused for {now - streak.first:.0f} s; {ACCESS_REFUSAL_TIMEOUT_PARAM}="
                    f"{self._timeout_ms})",
                )
        if verdict is not None and self._on_refused is not None:
            report = self._on_refused
            threading.Thread(target=report, args=(verdict,), name="access-refused", daemon=True).start()
        return refusal

    def brokers_found(self, servers: str) -> None:
        """The brokers were found after this was made (in ZooKeeper): errors name them. Before
        any client reports here."""
        self.identity = dataclasses.replace(self.identity, brokers=servers)

    def _ends_when(self) -> str:
        if self._timeout_ms == RETRY_FOR_EVER:
            return f"retrying for ever ({ACCESS_REFUSAL_TIMEOUT_PARAM}={RETRY_FOR_EVER})"
        bound = f"{self._timeout_ms} ms ({ACCESS_REFUSAL_TIMEOUT_PARAM})"
        return f"the client gives up unless this stops within {bound}"

    @property
    def verdict(self) -> AccessRefusedError | None:
        """The error, once the streak outlasted the bound."""
        with self._lock:
            return self._verdict

    def error(self) -> AccessRefusedError | None:
        """The refusal of the current streak, bound or not: for a caller whose request failed
        meanwhile (its failure is Kafka refusing it, not an outage)."""
        with self._lock:
            if self._verdict is not None:
                return self._verdict
            streak = self._streak
            if streak is None or self._now() - streak.last > self._gap_s:
                return None
            return self.identity.error(streak.refusal, streak.detail)

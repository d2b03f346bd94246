"""A kazoo client for the consumer-group protocol, and the retry policy for its calls.

Connection loss is routine (a ZooKeeper restart, a GC pause); calls that fail with it are
retried with backoff by tenacity. Digest credentials go to kazoo only and are never logged:
kazoo logs every request it sends at DEBUG, ``Auth(..., auth='user:password')`` included,
so its clients log through a logger that masks them.
"""

from __future__ import annotations

import atexit
import logging
import re
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry
from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE
from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_delay,
    stop_when_event_set,
    wait_exponential,
)
from tenacity.stop import stop_base

from reliable_kafka.kafka.client.params import ZooKeeperParams
from reliable_kafka.util.kazoo_log import CLOSE_TIMEOUT_S, KazooLog, stop_kazoo

logger = logging.getLogger(__name__)

# The digest secret in a logged ``Auth`` request, and the session password in the ``Connect``
# request and reply and the session lines kazoo logs (with it, anyone could take the session).
_SECRETS = (
    re.compile(r"""(\b(?:auth|passwd)=)(b?'(?:[^'\\]|\\.)*'|b?"(?:[^"\\]|\\.)*")"""),
    re.compile(r"(session_passwd: )(\S+)"),
)
_MASK = "'***'"


class MaskZooKeeperSecrets(logging.Filter):
    """Rewrites a record's message with digest credentials and session passwords masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            # The handler would print the arguments on its own failure to format them.
            record.msg, record.args = f"unformattable kazoo log record: {record.msg!r}", None
            return True
        masked = message
        for pattern in _SECRETS:
            masked = pattern.sub(lambda match: match.group(1) + _MASK, masked)
        if masked != message:
            record.msg, record.args = masked, None
        return True


# A child of kazoo's own logger, so that configuring ``kazoo.client`` still sets its level
# and handlers; the filter sees every record kazoo logs through it.
kazoo_logger = logging.getLogger("kazoo.client.masked")
kazoo_logger.addFilter(MaskZooKeeperSecrets())


# kazoo's lines about one failed connection attempt: each attempt logs "Connecting to ..." (INFO),
# then one or two of these (WARNING), and it retries every 0.1 to 2 s.
_ATTEMPT_FAILED = ("Connection dropped", "Connection time-out", "Cannot resolve")
_ATTEMPT_NOISE = ("Transition to CONNECTING", "Failed connecting to Zookeeper")


class _ServerAddressLog(KazooLog):
    """kazoo's logger for one client.

    Its connection warnings ("Connection dropped: socket connection error: Connection refused")
    name no server, so this appends the one it was connecting to, which kazoo logs (at INFO) just
    before each attempt.

    Until the client first connects, kazoo's two or three lines per attempt become one of ours per
    attempt (the first failure, then "failed again ..., N failures in a row"), and kazoo's go to
    DEBUG: a quorum that cannot be reached is said once per retry, then by the start's error.
    Once connected, kazoo's lines pass as they are: a session riding out an outage says so.
    """

    def __init__(self, logger: logging.Logger, servers: str) -> None:
        super().__init__(logger)
        self._servers = servers
        self._server: str | None = None
        self.connecting = True  # until the first connection: attempts folded into our lines
        self.failed_attempts = 0
        self.last_failure: str | None = None

    def log(self, level: int, msg: object, *args: object, **kwargs: object) -> None:
        if isinstance(msg, str) and msg.startswith("Connecting to ") and len(args) >= 3:
            self._server = f"{args[0]}:{args[2]}"
            if self.connecting:
                level = logging.DEBUG
        elif self.connecting and isinstance(msg, str) and msg.startswith(_ATTEMPT_FAILED + _ATTEMPT_NOISE):
            if msg.startswith(_ATTEMPT_FAILED):
                reason = msg % args if args else msg
                # "Connection dropped: socket connection error: ..." says the socket part only once.
                self._attempt_failed(reason.removeprefix("Connection dropped: "))
            level = logging.DEBUG
        elif level >= logging.WARNING and isinstance(msg, str):
            msg = f"{msg} (ZooKeeper {self._where()})"
        super().log(level, msg, *args, **kwargs)  # type: ignore[arg-type]

    def _where(self) -> str:
        return self._server or self._servers

    def _attempt_failed(self, reason: str) -> None:
        # On kazoo's connection thread, one attempt at a time: no lock needed.
        self.failed_attempts += 1
        same = reason == self.last_failure
        self.last_failure = reason
        if self.failed_attempts == 1:
            logger.warning("connecting to ZooKeeper failed (%s): %s", self._where(), reason)
        else:
            logger.warning(
                "connecting to ZooKeeper failed again (%s), %d failures in a row: %s",
                self._where(),
                self.failed_attempts,
                "the same error" if same else reason,
            )

    def connected(self) -> None:
        """The first connection is up: kazoo's own lines from now on."""
        self.connecting = False
        if self.failed_attempts:
            logger.info(
                "connecting to ZooKeeper (%s) succeeded after %d failure(s)",
                self._where(),
                self.failed_attempts,
            )


class ZooKeeperUnreachableError(ConnectionError):
    """No server of the quorum answered within ``zookeeper.connection.timeout.ms``."""


RETRIABLE_ZOOKEEPER_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    OperationTimeoutError,
)


def zookeeper_acl(params: ZooKeeperParams) -> list[ACL] | None:
    """Kafka's secure-ACL choice: the authenticated creator may do anything, everyone may read.
    ZooKeeper turns "the creator" into each id the session logged in with (``digest:user:hash``,
    ``sasl:user``).

    World-readable keeps Kafka's offset tools working; only the group's own user can change
    ownership or offsets.
    """
    if not params.set_acl:
        return None
    return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]


def zookeeper_identity(params: ZooKeeperParams) -> str:
    """Who a client of ``params`` is to ZooKeeper, for an error (never the password)."""
    if params.sasl is not None:
        return f"SASL ({params.sasl.mechanism}) user '{params.sasl.username}'"
    if params.auth:
        return f"digest user '{params.auth.partition(':')[0]}'"
    return "an unauthenticated client (no zookeeper.sasl.username or zookeeper.auth)"


def connect_zookeeper(params: ZooKeeperParams) -> KazooClient:
    """A started client, or :class:`ZooKeeperUnreachableError` naming the servers (never the
    credentials) and the last reason an attempt failed."""
    log = _ServerAddressLog(kazoo_logger, params.connect)
    client = KazooClient(
        hosts=params.connect,
        timeout=params.session_timeout_ms / 1000.0,
        # Reconnect for ever: sessions survive short outages, and the group module decides
        # what an expired session means.
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0),
        auth_data=[("digest", params.auth)] if params.auth else None,
        sasl_options=params.sasl.kazoo_options() if params.sasl else None,
        default_acl=zookeeper_acl(params),
        logger=log,  # type: ignore[arg-type]
    )
    try:
        client.start(timeout=params.connection_timeout_ms / 1000.0)
    except KazooTimeoutError as exc:
        close_zookeeper(client)
        why = f": {log.last_failure} ({log.failed_attempts} attempts)" if log.last_failure else ""
        raise ZooKeeperUnreachableError(
            f"could not connect to ZooKeeper at {params.connect} within "
            f"{params.connection_timeout_ms} ms (zookeeper.connection.timeout.ms){why}"
        ) from exc
    log.connected()
    # kazoo's handler registered an exit hook that joins its callback thread without a bound; a
    # watch callback retrying against a ZooKeeper that is gone never lets that join end, and the
    # interpreter hung at exit. close_zookeeper stops the client within a bound instead, and an
    # abandoned client's threads are daemons.
    atexit.unregister(client.handler.stop)
    return client


def close_zookeeper(client: KazooClient, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Stop and close ``client`` within ``timeout_s`` (see :func:`stop_kazoo`)."""
    stop_kazoo(client, timeout_s)


def ensure_connected(client: KazooClient) -> None:
    """Fail fast instead of queueing: kazoo holds calls made while disconnected until it is
    connected again, possibly in a new session where our ephemeral nodes no longer exist."""
    if not client.connected:
        raise ConnectionLoss("not connected to ZooKeeper")


def zk_retrying(
    give_up_after_s: float,
    *,
    max_wait_s: float = 2.0,
    stop_event: threading.Event | None = None,
) -> Retrying:
    """Retries a call on connection loss/session expiry with exponential backoff.

    ``stop_event`` ends the retries early (the caller is shutting down).
    """
    stop: stop_base = stop_after_delay(give_up_after_s)
    if stop_event is not None:
        stop = stop | stop_when_event_set(stop_event)
    return Retrying(
        retry=retry_if_exception_type(RETRIABLE_ZOOKEEPER_ERRORS),
        wait=wait_exponential(multiplier=0.05, max=max_wait_s),
        stop=stop,
        reraise=True,
        before_sleep=before_sleep_log(logger, logging.DEBUG),
    )

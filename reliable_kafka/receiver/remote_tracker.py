"""The executor's end of the tracker socket: a :class:`ReceiverTrackerEndpoint` whose calls go
to the driver's :class:`~reliable_kafka.scheduler.tracker_server.ReceiverTrackerServer`, and
whose incoming notifications are handed to the :class:`ReceiverControl` each receiver registered.

If the connection dies while not being closed by :meth:`RemoteTrackerEndpoint.close`, ``on_lost``
is called once, with the cause, on a thread of its own: the receiver cannot report blocks any
more, so its supervisor should stop and the task end; the driver, having lost the connection
too, relaunches it.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from typing import Any

from reliable_kafka.receiver.tracker_endpoint import BlockLocation, ReceivedBlockInfo, ReceiverControl
from reliable_kafka.receiver.tracker_messages import (
    ADD_BLOCK,
    CONTROL_FIELDS,
    DEREGISTER_RECEIVER,
    REGISTER_RECEIVER,
    REPLICA_PEERS,
    REPORT_ERROR,
    REPORT_INSTRUMENTS,
    ReceiverStatus,
    RegisterReceiver,
    parse_control,
    parse_peers,
    peers_request,
)
from reliable_kafka.rpc import Connection, connect

logger = logging.getLogger(__name__)

# Spark's default RPC ask timeout: a driver busy syncing its metadata log may answer slowly.
DEFAULT_CALL_TIMEOUT_S = 120.0

LostCallback = Callable[[BaseException | None], None]


class RemoteTrackerEndpoint:
    """Implements :class:`ReceiverTrackerEndpoint` over one connection; make it with :meth:`connect`."""

    def __init__(
        self,
        *,
        block_server: tuple[str, int] | None = None,
        on_lost: LostCallback | None = None,
        call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
    ) -> None:
        self._block_server = block_server
        self._on_lost = on_lost
        self._call_timeout_s = call_timeout_s
        self._lock = threading.Lock()
        self._controls: dict[int, ReceiverControl] = {}
        self._closing = False
        # Every receiver that registered has deregistered: the driver may close the connection
        # (it stops its tracker server right after), and that is the end of a normal stop.
        self._all_deregistered = False
        self._connection: Connection | None = None

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        secret: bytes,
        *,
        block_server: tuple[str, int] | None = None,
        on_lost: LostCallback | None = None,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        timeout_s: float = 10.0,
        call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
    ) -> RemoteTrackerEndpoint:
        """Connect to the tracker server; ``block_server`` is the address this executor's block
        server is reachable at, reported with every registration."""
        endpoint = cls(block_server=block_server, on_lost=on_lost, call_timeout_s=call_timeout_s)
        endpoint._connection = connect(
            host,
            port,
            secret,
            endpoint._handle,
            timeout_s=timeout_s,
            ssl_context=ssl_context,
            server_hostname=server_hostname,
            on_closed=endpoint._connection_closed,
            name="tracker-client",
        )
        return endpoint

    def __repr__(self) -> str:
        peer = None if self._connection is None else self._connection.peer
        return f"RemoteTrackerEndpoint(tracker={peer!r})"

    @property
    def connection(self) -> Connection:
        if self._connection is None:
            raise RuntimeError("RemoteTrackerEndpoint is not connected; use RemoteTrackerEndpoint.connect")
        return self._connection

    @property
    def closed(self) -> bool:
        return self._connection is None or self._connection.closed

    def close(self) -> None:
        """Close the connection; ``on_lost`` is not called for this."""
        with self._lock:
            self._closing = True
        if self._connection is not None:
            self._connection.close()

    # ------------------------------------------------------------------ ReceiverTrackerEndpoint

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        # Kept before the call: the tracker may send a rate update before its reply arrives.
        with self._lock:
            self._controls[stream_id] = control
            self._all_deregistered = False
        request = RegisterReceiver(stream_id, receiver_type, host, executor_id, self._block_server)
        registered = False
        try:
            registered = bool(self._call(REGISTER_RECEIVER, request.to_dict()))
        finally:
            if not registered:
                self._forget(stream_id, control)
        return registered

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        return bool(self._call(ADD_BLOCK, info.to_dict()))

    def report_error(self, stream_id: int, message: str, error: str) -> None:
        # A call, not a notification: the error is recorded before a deregistration that follows.
        self._call(REPORT_ERROR, ReceiverStatus(stream_id, message, error).to_dict())

    def replica_peers(self, stream_id: int) -> list[BlockLocation]:
        """The block servers where the receiver of ``stream_id`` may keep second copies, best first."""
        return parse_peers(self._call(REPLICA_PEERS, peers_request(stream_id)))

    def report_instruments(self, source: str, instruments: dict[str, Any]) -> None:
        """This process's instruments for the driver's metrics (one-way: nothing waits on it)."""
        self.connection.notify(REPORT_INSTRUMENTS, {"source": source, "instruments": instruments})

    def deregister_receiver(self, stream_id: int, message: str, error: str, *, fatal: bool = False) -> bool:
        status = ReceiverStatus(stream_id, message, error, fatal)
        result = bool(self._call(DEREGISTER_RECEIVER, status.to_dict()))
        with self._lock:
            self._controls.pop(stream_id, None)
            self._all_deregistered = not self._controls
        return result

    def _call(self, method: str, body: Any) -> Any:
        return self.connection.call(method, body, self._call_timeout_s)

    def _forget(self, stream_id: int, control: ReceiverControl) -> None:
        with self._lock:
            if self._controls.get(stream_id) is control:
                del self._controls[stream_id]

    # ------------------------------------------------------------------ from the tracker

    def _handle(self, connection: Connection, method: str, body: Any) -> Any:
        if method not in CONTROL_FIELDS:
            raise LookupError(f"a receiver serves no method {method!r}")
        try:
            stream_id, value = parse_control(method, body)
        except ValueError as exc:
            logger.warning("Ignored a malformed %s from the tracker at %s: %s", method, connection.peer, exc)
            return None
        with self._lock:
            control = self._controls.get(stream_id)
        if control is None:
            logger.info("Ignored %s for receiver %d, which is not registered here", method, stream_id)
            return None
        getattr(control, method)(value)
        return None

    def _connection_closed(self, cause: BaseException | None) -> None:
        with self._lock:
            expected = self._closing
            after_stop = self._all_deregistered and not self._controls
        if expected or cause is None:
            return
        if after_stop:
            logger.info("The receiver tracker closed the connection after the receivers stopped: %s", cause)
        else:
            logger.warning("Lost the connection to the receiver tracker: %s", cause)
        if self._on_lost is not None:
            # The loss may be noticed inside add_block on a receiving thread; stopping the
            # supervisor there would make that thread wait for itself.
            threading.Thread(
                target=_report_lost, args=(self._on_lost, cause), name="tracker-connection-lost", daemon=True
            ).start()


def _report_lost(on_lost: LostCallback, cause: BaseException) -> None:
    try:
        on_lost(cause)
    except Exception:
        logger.exception("on_lost callback failed")

"""The driver's end of the tracker socket: serves the :class:`ReceiverTrackerEndpoint` calls of
receivers running on executors, and hands the tracker a :class:`RemoteReceiverControl` per
receiver whose messages travel back over the receiver's connection as notifications.

A registration lives until its receiver deregisters, or until its connection is lost: then the
server deregisters it on the receiver's behalf (once, with "Lost connection to the receiver on
<peer>") so that the tracker relaunches it. A registration superseded by a newer one for the same
stream (the receiver relaunched elsewhere before the old connection died) is never deregistered
by the old connection, whose receiver is stale. When the server itself stops, nothing is
deregistered: the tracker is stopping and accounts for its receivers itself.

Where each receiver's block server listens: :meth:`ReceiverTrackerServer.block_server_of`; a
receiver asks for the others' (``replica_peers``) to keep second copies of its blocks there.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reliable_kafka.receiver.tracker_endpoint import (
    BlockLocation,
    ReceivedBlockInfo,
    ReceiverTrackerEndpoint,
)
from reliable_kafka.receiver.tracker_messages import (
    ADD_BLOCK,
    CLEANUP_OLD_BLOCKS,
    DEREGISTER_RECEIVER,
    REGISTER_RECEIVER,
    REMOVE_BLOCKS,
    REPLICA_PEERS,
    REPORT_ERROR,
    REPORT_INSTRUMENTS,
    STOP_RECEIVER,
    UPDATE_RATE_LIMIT,
    ReceiverStatus,
    RegisterReceiver,
    control_body,
    parse_peers_request,
)
from reliable_kafka.rpc import Connection, ConnectionClosed, RpcServer
from reliable_kafka.rpc.framing import DEFAULT_MAX_FRAME_BYTES
from reliable_kafka.util.instruments import REMOTE_INSTRUMENTS, InstrumentsSnapshot

logger = logging.getLogger(__name__)


class RemoteReceiverControl:
    """The :class:`ReceiverControl` of a receiver behind a connection: each call is one
    notification. Once the connection is gone they are dropped (logged): the receiver is gone
    too, and its loss is reported to the tracker as a deregistration."""

    def __init__(self, connection: Connection, stream_id: int) -> None:
        self._connection = connection
        self.stream_id = stream_id

    def __repr__(self) -> str:
        return f"RemoteReceiverControl(stream_id={self.stream_id}, peer={self._connection.peer!r})"

    def update_rate_limit(self, rate: int) -> None:
        self._notify(UPDATE_RATE_LIMIT, rate)

    def stop_receiver(self, message: str) -> None:
        self._notify(STOP_RECEIVER, message)

    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        self._notify(CLEANUP_OLD_BLOCKS, thresh_time_ms)

    def remove_blocks(self, block_ids: list[str]) -> None:
        self._notify(REMOVE_BLOCKS, list(block_ids))

    def _notify(self, method: str, value: Any) -> None:
        try:
            self._connection.notify(method, control_body(method, self.stream_id, value))
        except ConnectionClosed:
            logger.info(
                "Dropped %s for receiver %d: its connection to %s is closed",
                method,
                self.stream_id,
                self._connection.peer,
            )


@dataclass(slots=True)
class _Registration:
    stream_id: int
    connection: Connection
    block_server: tuple[str, int] | None
    executor_id: str = ""
    active: bool = True


class ReceiverTrackerServer:
    """Serves ``tracker`` to remote supervisors (see :mod:`reliable_kafka.receiver.remote_tracker`)."""

    def __init__(
        self,
        tracker: ReceiverTrackerEndpoint,
        secret: bytes,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        port_retries: int = 0,
    ) -> None:
        self._tracker = tracker
        self._lock = threading.Lock()
        self._current: dict[int, _Registration] = {}
        self._by_connection: dict[Connection, list[_Registration]] = {}
        self._stopping = False
        self._server = RpcServer(
            secret,
            self._handle,
            host=host,
            port=port,
            ssl_context=ssl_context,
            max_frame_bytes=max_frame_bytes,
            on_connection_closed=self._connection_closed,
            name="tracker",
            port_retries=port_retries,
        )

    def start(self) -> ReceiverTrackerServer:
        self._server.start()
        return self

    @property
    def address(self) -> tuple[str, int]:
        return self._server.address

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self._server.stop()

    def connections(self) -> list[Connection]:
        """The receivers' live connections."""
        return self._server.connections()

    def block_server_of(self, stream_id: int) -> tuple[str, int] | None:
        """Where the receiver registered for ``stream_id`` serves its blocks; None when it
        registered none or no receiver of the stream is registered."""
        with self._lock:
            registration = self._current.get(stream_id)
            return None if registration is None else registration.block_server

    def replica_peers(self, stream_id: int) -> list[BlockLocation]:
        """Where the receiver of ``stream_id`` may keep second copies of its blocks: the block
        servers of the receivers registered on other executors, those on other hosts first (a
        copy there survives the loss of a machine), each group starting after ``stream_id`` so
        that receivers spread their copies over their peers rather than all choosing one."""
        with self._lock:
            own = self._current.get(stream_id)
            registrations = list(self._current.values())
        if own is None or own.block_server is None:
            return []
        own_host = own.block_server[0]
        peers = [
            (r.stream_id, BlockLocation(r.block_server[0], r.executor_id, None, r.block_server[1]))
            for r in registrations
            if r.block_server is not None and r.stream_id != stream_id and r.executor_id != own.executor_id
        ]
        # Stream ids after ours first, wrapping round: (peer - own) mod m, m above every id.
        m = max([stream_id, *(sid for sid, _ in peers)]) + 1
        peers.sort(key=lambda peer: (peer[1].host == own_host, (peer[0] - stream_id) % m))
        return [location for _, location in peers]

    def registered_stream_ids(self) -> list[int]:
        with self._lock:
            return sorted(self._current)

    # ------------------------------------------------------------------ calls

    def _handle(self, connection: Connection, method: str, body: Any) -> Any:
        # Every body is checked before the tracker sees it; a ValueError goes back as a RemoteError.
        if method == REGISTER_RECEIVER:
            return self._register(connection, RegisterReceiver.from_dict(body))
        if method == ADD_BLOCK:
            if not isinstance(body, Mapping):
                raise ValueError(f"ReceivedBlockInfo: expected a map, got {type(body).__name__}")
            return bool(self._tracker.add_block(ReceivedBlockInfo.from_dict(body)))
        if method == REPORT_ERROR:
            status = ReceiverStatus.from_dict(body)
            self._tracker.report_error(status.stream_id, status.message, status.error)
            return None
        if method == DEREGISTER_RECEIVER:
            return self._deregister(connection, ReceiverStatus.from_dict(body))
        if method == REPLICA_PEERS:
            return [peer.to_dict() for peer in self.replica_peers(parse_peers_request(body))]
        if method == REPORT_INSTRUMENTS:
            if not isinstance(body, Mapping) or not isinstance(body.get("source"), str):
                raise ValueError("report_instruments: expected {'source': str, 'instruments': map}")
            REMOTE_INSTRUMENTS.update(body["source"], InstrumentsSnapshot.from_dict(body["instruments"]))
            return None
        raise LookupError(f"the tracker serves no method {method!r}")

    def _register(self, connection: Connection, request: RegisterReceiver) -> bool:
        control = RemoteReceiverControl(connection, request.stream_id)
        accepted = self._tracker.register_receiver(
            request.stream_id, request.receiver_type, request.host, request.executor_id, control
        )
        if not accepted:
            return False
        registration = _Registration(request.stream_id, connection, request.block_server, request.executor_id)
        with self._lock:
            self._current[request.stream_id] = registration
            self._by_connection.setdefault(connection, []).append(registration)
        # The connection may have died while the tracker registered it, before it was recorded
        # above; then no close callback will ever see this registration.
        if connection.closed:
            self._connection_closed(connection)
        return True

    def _deregister(self, connection: Connection, status: ReceiverStatus) -> bool:
        with self._lock:
            current = self._current.get(status.stream_id)
            if current is not None and current.connection is not connection:
                stale = True
            else:
                stale = False
                if current is not None:
                    current.active = False
                    del self._current[status.stream_id]
        if stale:
            logger.info(
                "Ignored deregistration of receiver %d from %s: it was registered again since",
                status.stream_id,
                connection.peer,
            )
            return True
        sid, fatal = status.stream_id, status.fatal
        return bool(self._tracker.deregister_receiver(sid, status.message, status.error, fatal=fatal))

    # ------------------------------------------------------------------ lost connections

    def _connection_closed(self, connection: Connection) -> None:
        lost: list[_Registration] = []
        with self._lock:
            for registration in self._by_connection.pop(connection, []):
                if not registration.active:
                    continue
                registration.active = False
                if self._current.get(registration.stream_id) is registration:
                    del self._current[registration.stream_id]
                    lost.append(registration)
            stopping = self._stopping
        if stopping:
            return
        for registration in lost:
            message = f"Lost connection to the receiver on {connection.peer}"
            logger.warning("Receiver %d: %s", registration.stream_id, message)
            try:
                self._tracker.deregister_receiver(registration.stream_id, message, "")
            except Exception:
                logger.exception("Could not deregister receiver %d", registration.stream_id)

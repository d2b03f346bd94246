"""The tracker seam's messages on the wire: method names and the bodies that are not already a
``ReceivedBlockInfo`` dict, shared by the driver's tracker server and the executor's remote
endpoint so that both check the same shapes.

Supervisor -> tracker calls: ``register_receiver`` (:class:`RegisterReceiver`) -> bool,
``add_block`` (``ReceivedBlockInfo.to_dict()``) -> bool, ``report_error`` (:class:`ReceiverStatus`)
-> None, ``deregister_receiver`` (:class:`ReceiverStatus`) -> bool, ``replica_peers``
(``{"stream_id": int}``) -> a list of ``BlockLocation.to_dict()`` (see :func:`parse_peers`).
Tracker -> receiver notifications, each ``{"stream_id": int, <field>: value}``: see
:data:`CONTROL_FIELDS`. The stream id lets several receivers share one connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reliable_kafka.receiver.tracker_endpoint import BlockLocation, _field

REGISTER_RECEIVER = "register_receiver"
ADD_BLOCK = "add_block"
REPORT_ERROR = "report_error"
DEREGISTER_RECEIVER = "deregister_receiver"
# Where a receiver may keep second copies of its blocks: the block servers of the other receivers.
REPLICA_PEERS = "replica_peers"
# One-way, executor to driver: a receiver process's instruments (util.instruments), every few s.
REPORT_INSTRUMENTS = "report_instruments"

UPDATE_RATE_LIMIT = "update_rate_limit"
STOP_RECEIVER = "stop_receiver"
CLEANUP_OLD_BLOCKS = "cleanup_old_blocks"
REMOVE_BLOCKS = "remove_blocks"
# Notification -> the one argument of the ReceiverControl method of the same name, and its type.
CONTROL_FIELDS: dict[str, tuple[str, type]] = {
    UPDATE_RATE_LIMIT: ("rate", int),
    STOP_RECEIVER: ("message", str),
    CLEANUP_OLD_BLOCKS: ("thresh_time_ms", int),
    REMOVE_BLOCKS: ("block_ids", list),
}


def _mapping(body: Any, owner: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ValueError(f"{owner}: expected a map, got {type(body).__name__}")
    return body


def _stream_id(d: Mapping[str, Any], owner: str) -> int:
    stream_id = _field(d, "stream_id", (int,), owner)
    if stream_id < 0:
        raise ValueError(f"{owner}.stream_id: must be >= 0, got {stream_id}")
    return stream_id


@dataclass(frozen=True, slots=True)
class RegisterReceiver:
    """A supervisor's registration; ``block_server`` is where other executors fetch its blocks."""

    stream_id: int
    receiver_type: str
    host: str
    executor_id: str
    block_server: tuple[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        server = self.block_server
        return {
            "stream_id": self.stream_id,
            "receiver_type": self.receiver_type,
            "host": self.host,
            "executor_id": self.executor_id,
            "block_server": None if server is None else {"host": server[0], "port": server[1]},
        }

    @classmethod
    def from_dict(cls, body: Any) -> RegisterReceiver:
        owner = cls.__name__
        d = _mapping(body, owner)
        server = _field(d, "block_server", (dict, type(None)), owner)
        block_server = None
        if server is not None:
            host = _field(server, "host", (str,), f"{owner}.block_server")
            port = _field(server, "port", (int,), f"{owner}.block_server")
            if not 0 < port < 65536:
                raise ValueError(f"{owner}.block_server.port: not a TCP port: {port}")
            block_server = (host, port)
        return cls(
            stream_id=_stream_id(d, owner),
            receiver_type=_field(d, "receiver_type", (str,), owner),
            host=_field(d, "host", (str,), owner),
            executor_id=_field(d, "executor_id", (str,), owner),
            block_server=block_server,
        )


@dataclass(frozen=True, slots=True)
class ReceiverStatus:
    """The body of ``report_error`` and ``deregister_receiver``; ``error`` is a formatted traceback.
    ``fatal`` (a deregistration only): the receiver stopped with an error that ends its stream."""

    stream_id: int
    message: str
    error: str
    fatal: bool = False

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"stream_id": self.stream_id, "message": self.message, "error": self.error}
        # Only when set: every other status reads as it always did.
        if self.fatal:
            d["fatal"] = True
        return d

    @classmethod
    def from_dict(cls, body: Any) -> ReceiverStatus:
        owner = cls.__name__
        d = _mapping(body, owner)
        fatal = d.get("fatal", False)
        if not isinstance(fatal, bool):
            raise ValueError(f"{owner}.fatal: expected bool, got {type(fatal).__name__} {fatal!r}")
        return cls(
            stream_id=_stream_id(d, owner),
            message=_field(d, "message", (str,), owner),
            error=_field(d, "error", (str,), owner),
            fatal=fatal,
        )


def control_body(method: str, stream_id: int, value: Any) -> dict[str, Any]:
    field, _ = CONTROL_FIELDS[method]
    return {"stream_id": stream_id, field: value}


def parse_control(method: str, body: Any) -> tuple[int, Any]:
    """The stream id and argument of a control notification; ValueError for a malformed one."""
    if method not in CONTROL_FIELDS:
        raise ValueError(f"unknown control message {method!r}")
    field, kind = CONTROL_FIELDS[method]
    d = _mapping(body, method)
    value = _field(d, field, (kind,), method)
    if method == REMOVE_BLOCKS and not all(isinstance(block_id, str) for block_id in value):
        raise ValueError(f"{method}.block_ids: expected a list of str")
    return _stream_id(d, method), value


def peers_request(stream_id: int) -> dict[str, Any]:
    return {"stream_id": stream_id}


def parse_peers_request(body: Any) -> int:
    return _stream_id(_mapping(body, REPLICA_PEERS), REPLICA_PEERS)


def parse_peers(body: Any) -> list[BlockLocation]:
    """The answer to ``replica_peers``: block servers (``port`` set), best first."""
    if not isinstance(body, list):
        raise ValueError(f"{REPLICA_PEERS}: expected a list, got {type(body).__name__}")
    peers = [BlockLocation.from_dict(_mapping(entry, REPLICA_PEERS)) for entry in body]
    if any(peer.port is None for peer in peers):
        raise ValueError(f"{REPLICA_PEERS}: a peer without a block server port")
    return peers

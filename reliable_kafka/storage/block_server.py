"""Serving an executor's blocks to other executors, and fetching them: one ``get_block`` call
over an authenticated connection ({"block_id": str} -> bytes | None).

A server made with ``keep_replica`` also keeps other receivers' second copies (storage levels with
replication 2): ``keep_replica`` ({"block_id": str, "data": bytes, "level": StorageLevel dict} ->
the path of the copy on this host), answered once the copy is stored.

A block travels as one frame, so it must fit ``max_frame_bytes`` (64 MiB by default) on both
sides; a larger one comes back as a RemoteError naming the limit, never as a truncated block.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Mapping
from typing import Any

from reliable_kafka.rpc import Connection, ConnectionClosed, FrameError, RpcServer, connect
from reliable_kafka.rpc.auth import Secret
from reliable_kafka.rpc.framing import DEFAULT_MAX_FRAME_BYTES
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments

GET_BLOCK = "get_block"
KEEP_REPLICA = "keep_replica"
DEFAULT_FETCH_TIMEOUT_S = 30.0

ReadBlock = Callable[[str], bytes | None]
# Stores a peer's block under its id and level; returns the path of the copy (for same-host readers).
KeepReplica = Callable[[str, bytes, StorageLevel], str | None]


class BlockServer:
    """Serves ``read_block(block_id)`` (e.g. ``lambda name: store.get(StreamBlockId.parse(name))``).

    Listens on ``host`` only: an executor's, as Spark's block transfer service binds its executor's
    address, never every interface of the machine. Advertise that host with :attr:`address`'s port.
    """

    def __init__(
        self,
        read_block: ReadBlock,
        secret: bytes,
        *,
        host: str,
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        port_retries: int = 0,
        keep_replica: KeepReplica | None = None,
    ) -> None:
        self._read_block = read_block
        self._keep_replica = keep_replica
        self._server = RpcServer(
            secret,
            self._handle,
            host=host,
            port=port,
            ssl_context=ssl_context,
            max_frame_bytes=max_frame_bytes,
            name="block-server",
            port_retries=port_retries,
        )

    def start(self) -> BlockServer:
        self._server.start()
        return self

    @property
    def address(self) -> tuple[str, int]:
        return self._server.address

    def connections(self) -> list[Connection]:
        return self._server.connections()

    def stop(self) -> None:
        self._server.stop()

    def _handle(self, connection: Connection, method: str, body: Any) -> bytes | str | None:
        if method == KEEP_REPLICA and self._keep_replica is not None:
            return self._keep(body)
        if method != GET_BLOCK:
            raise LookupError(f"the block server serves no method {method!r}")
        if not isinstance(body, Mapping) or type(body.get("block_id")) is not str:
            raise ValueError("get_block: expected {'block_id': str}")
        data = self._read_block(body["block_id"])
        if data is not None and not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"read_block returned {type(data).__name__}, not bytes")
        if data is not None:
            instruments.BLOCKS_SERVED.inc()
        return data

    def _keep(self, body: Any) -> str | None:
        assert self._keep_replica is not None
        if (
            not isinstance(body, Mapping)
            or type(body.get("block_id")) is not str
            or not isinstance(body.get("data"), bytes)
            or not isinstance(body.get("level"), Mapping)
        ):
            raise ValueError("keep_replica: expected {'block_id': str, 'data': bytes, 'level': map}")
        level = StorageLevel.from_dict(body["level"])
        path = self._keep_replica(body["block_id"], body["data"], level)
        instruments.REPLICAS_KEPT.inc()
        return path


def _checked_block(value: Any) -> bytes | None:
    if value is not None and not isinstance(value, bytes):
        raise FrameError(f"get_block answered {type(value).__name__}, not bytes or nil")
    return value


def fetch_block(
    host: str,
    port: int,
    secret: bytes,
    block_id: str,
    *,
    timeout_s: float = DEFAULT_FETCH_TIMEOUT_S,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> bytes | None:
    """One block from the block server at ``host:port`` over a connection of its own; None when
    the server does not hold it. RemoteError when reading it failed there."""
    connection = connect(
        host,
        port,
        secret,
        timeout_s=timeout_s,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        max_frame_bytes=max_frame_bytes,
        name="block-fetch",
    )
    try:
        return _checked_block(connection.call(GET_BLOCK, {"block_id": block_id}, timeout_s))
    finally:
        connection.close()


class BlockFetcher:
    """Fetches blocks over one kept connection per block server (thread-safe; calls on one
    connection run concurrently). A connection that died is replaced on the next fetch."""

    def __init__(
        self,
        secret: bytes,
        *,
        timeout_s: float = DEFAULT_FETCH_TIMEOUT_S,
        ssl_context: ssl.SSLContext | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self._secret = Secret(secret)
        self._timeout_s = timeout_s
        self._ssl_context = ssl_context
        self._max_frame_bytes = max_frame_bytes
        self._lock = threading.Lock()
        self._connections: dict[tuple[str, int], Connection] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"BlockFetcher(servers={len(self._connections)})"

    def fetch(self, host: str, port: int, block_id: str) -> bytes | None:
        return _checked_block(self._call(host, port, GET_BLOCK, {"block_id": block_id}))

    def keep_replica(
        self, host: str, port: int, block_id: str, data: bytes, level: StorageLevel
    ) -> str | None:
        """Have the block server at ``host:port`` keep a copy of the block; returns once it is
        stored there, with the path of the copy on that host. RemoteError when storing failed."""
        body = {"block_id": block_id, "data": data, "level": level.to_dict()}
        path = self._call(host, port, KEEP_REPLICA, body)
        if path is not None and not isinstance(path, str):
            raise FrameError(f"keep_replica answered {type(path).__name__}, not a path or nil")
        return path

    def _call(self, host: str, port: int, method: str, body: Any) -> Any:
        connection = self._connection_to(host, port)
        try:
            return connection.call(method, body, self._timeout_s)
        except ConnectionClosed:
            # A kept connection may have been closed by the server since its last use: one retry
            # on a fresh connection tells that apart from a server that is really gone.
            connection = self._connection_to(host, port)
            return connection.call(method, body, self._timeout_s)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()

    def _connection_to(self, host: str, port: int) -> Connection:
        key = (host, port)
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the block fetcher is closed")
            connection = self._connections.get(key)
            if connection is not None and not connection.closed:
                return connection
        # Connecting outside the lock: one unreachable server must not hold up fetches from others.
        fresh = connect(
            host,
            port,
            self._secret,
            timeout_s=self._timeout_s,
            ssl_context=self._ssl_context,
            max_frame_bytes=self._max_frame_bytes,
            name="block-fetch",
        )
        with self._lock:
            current = self._connections.get(key)
            if self._closed or (current is not None and not current.closed):
                keep = None if self._closed else current
            else:
                self._connections[key] = fresh
                return fresh
        fresh.close()
        if keep is None:
            raise ConnectionClosed("the block fetcher is closed")
        return keep

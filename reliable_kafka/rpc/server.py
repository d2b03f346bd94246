"""Accepts connections, authenticates each on a thread of its own, and serves the survivors.

A connection that fails its handshake (wrong secret, garbage, an oversize length prefix, or
silence past the handshake timeout) is closed and logged once; nothing else is disturbed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable

from reliable_kafka.rpc import sockets
from reliable_kafka.rpc.auth import DEFAULT_HANDSHAKE_TIMEOUT_S, Secret, server_handshake
from reliable_kafka.rpc.connection import DEFAULT_MAX_CALL_THREADS, Connection, Handler
from reliable_kafka.rpc.framing import DEFAULT_MAX_FRAME_BYTES

logger = logging.getLogger(__name__)

# Unauthenticated sockets held at once; more are refused, so a flood of silent peers costs at
# most this many threads for at most the handshake timeout.
MAX_PENDING_HANDSHAKES = 64
STOP_JOIN_TIMEOUT_S = 5.0


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class RpcServer:
    """``handler`` serves the calls and notifications of every accepted connection."""

    def __init__(
        self,
        secret: bytes | Secret,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_connection_closed: Callable[[Connection], None] | None = None,
        name: str = "rpc",
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        max_call_threads: int = DEFAULT_MAX_CALL_THREADS,
        port_retries: int = 0,
    ) -> None:
        """``port`` 0 takes any free port; a fixed one that is taken is followed by the next
        ``port_retries`` ports, as Spark's services do (``spark.port.maxRetries``)."""
        self._secret = Secret(secret)
        self._port_retries = max(0, port_retries) if port else 0
        self._handler = handler
        self._host = host
        self._port = port
        self._ssl_context = ssl_context
        self._max_frame_bytes = max_frame_bytes
        self._on_connection_closed = on_connection_closed
        self._name = name
        self._handshake_timeout_s = handshake_timeout_s
        self._max_call_threads = max_call_threads
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._address: tuple[str, int] | None = None
        self._accept_thread: threading.Thread | None = None
        self._handshaking: dict[threading.Thread, _Handshake] = {}
        self._connections: set[Connection] = set()
        self._stopping = False

    def __repr__(self) -> str:
        return f"RpcServer(name={self._name!r}, address={self._address!r})"

    def start(self) -> RpcServer:
        listener = self._listen()
        with self._lock:
            if self._listener is not None or self._stopping:
                listener.close()
                raise RuntimeError(f"{self._name} server was already started")
            self._listener = listener
            host, port = listener.getsockname()[:2]
            self._address = (host, port)
            self._accept_thread = threading.Thread(
                target=self._accept_loop, args=(listener,), name=f"{self._name}-accept", daemon=True
            )
        self._accept_thread.start()
        logger.info("%s server listening on %s", self._name, format_address(*self.address))
        return self

    def _listen(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        last = self._port + self._port_retries
        for port in range(self._port, min(last, 65535) + 1):
            listener = socket.socket(family, socket.SOCK_STREAM)
            try:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((self._host, port))
                listener.listen(128)
                return listener
            except OSError as exc:
                listener.close()
                if port >= last or exc.errno != errno.EADDRINUSE:
                    if port != self._port:
                        raise OSError(
                            exc.errno, f"{self._name} server: ports {self._port}-{port} are taken ({exc})"
                        ) from exc
                    raise
                logger.info("%s server: port %d is taken, trying %d", self._name, port, port + 1)
        raise AssertionError("unreachable: the loop returns or raises")

    @property
    def address(self) -> tuple[str, int]:
        if self._address is None:
            raise RuntimeError(f"{self._name} server is not started")
        return self._address

    def connections(self) -> list[Connection]:
        with self._lock:
            return [c for c in self._connections if not c.closed]

    def stop(self) -> None:
        """Close the listener and every connection; wait up to a few seconds for their threads."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            listener = self._listener
            handshaking = dict(self._handshaking)
            connections = list(self._connections)
        if listener is not None:
            with contextlib.suppress(OSError):
                # On Linux this wakes the thread blocked in accept; close alone may not.
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for handshake in handshaking.values():
            _close_quietly(handshake.sock)
        for connection in connections:
            connection.close()
        deadline = time.monotonic() + STOP_JOIN_TIMEOUT_S
        threads = list(handshaking)
        if self._accept_thread is not None:
            threads.append(self._accept_thread)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for connection in connections:
            connection.join(max(0.0, deadline - time.monotonic()))
        logger.info("%s server stopped", self._name)

    # ------------------------------------------------------------------ accepting

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, address = listener.accept()
            except OSError:
                with self._lock:
                    stopping = self._stopping
                if stopping:
                    return
                # Running out of descriptors must not end the server; it passes once some close.
                logger.warning("%s server could not accept a connection", self._name, exc_info=True)
                time.sleep(0.1)
                continue
            peer = format_address(*address[:2])
            handshake = _Handshake(sock)
            thread = threading.Thread(
                target=self._authenticate,
                args=(handshake, peer),
                name=f"{self._name}-handshake-{peer}",
                daemon=True,
            )
            with self._lock:
                refuse = self._stopping or len(self._handshaking) >= MAX_PENDING_HANDSHAKES
                if not refuse:
                    self._handshaking[thread] = handshake
            if refuse:
                logger.warning("%s server refused %s: too many handshakes under way", self._name, peer)
                _close_quietly(sock)
                continue
            thread.start()

    def _authenticate(self, handshake: _Handshake, peer: str) -> None:
        me = threading.current_thread()
        sock = raw = handshake.sock
        try:
            sockets.configure(raw)
            if self._ssl_context is not None:
                raw.settimeout(self._handshake_timeout_s)
                sock = handshake.sock = self._ssl_context.wrap_socket(raw, server_side=True)
            server_handshake(sock, self._secret, self._handshake_timeout_s)
            sock.settimeout(None)
        except Exception as exc:
            with self._lock:
                self._handshaking.pop(me, None)
                stopping = self._stopping
            if not stopping:
                logger.warning("%s server rejected %s: %s", self._name, peer, _describe(exc))
            _close_quietly(sock)
            return
        connection = Connection(
            sock,
            self._handler,
            peer=peer,
            max_frame_bytes=self._max_frame_bytes,
            on_closed=lambda cause: self._closed(connection),
            name=self._name,
            max_call_threads=self._max_call_threads,
        )
        with self._lock:
            self._handshaking.pop(me, None)
            stopping = self._stopping
            if not stopping:
                self._connections.add(connection)
        if stopping:
            _close_quietly(sock)
            return
        logger.info("%s server accepted %s", self._name, peer)
        connection.start()

    def _closed(self, connection: Connection) -> None:
        with self._lock:
            self._connections.discard(connection)
        if self._on_connection_closed is not None:
            self._on_connection_closed(connection)


class _Handshake:
    """The socket of a connection still in its handshake (a TLS socket once wrapped), so that
    stop can close whichever one the handshake thread is blocked on."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "handshake timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()

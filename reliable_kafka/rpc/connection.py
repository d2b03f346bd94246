"""One authenticated socket carrying calls (request/reply by id) and notifications both ways.

Messages (msgpack arrays):

    [REQUEST, id, method, body]        a call; answered by exactly one of
    [REPLY, id, body]                  the handler's return value
    [ERROR, id, type_name, message]    the handler's exception
    [NOTIFY, method, body]             one-way; no answer

A reader thread reads frames and completes waiting calls itself, but never runs a handler: calls
run on a small per-connection pool and notifications on one thread of their own (so they are
handled in the order sent), which lets a handler call back over the same connection and wait.
Any bad frame closes this connection only.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from reliable_kafka.rpc.dispatcher import Dispatcher
from reliable_kafka.rpc.errors import CallTimeout, ConnectionClosed, FrameError, RemoteError
from reliable_kafka.rpc.framing import DEFAULT_MAX_FRAME_BYTES, FrameReader, encode_frame, send_frame

logger = logging.getLogger(__name__)

REQUEST, REPLY, ERROR, NOTIFY = 0, 1, 2, 3
DEFAULT_CALL_TIMEOUT_S = 30.0
DEFAULT_MAX_CALL_THREADS = 16
_MAX_ERROR_MESSAGE_CHARS = 4096

Handler = Callable[["Connection", str, Any], Any]
ClosedCallback = Callable[[BaseException | None], None]


def no_handler(connection: Connection, method: str, body: Any) -> Any:
    """The handler of a connection that serves nothing."""
    raise LookupError(f"no handler for {method!r} on this side of the connection")


class _PendingCall:
    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class Connection:
    """Wraps a connected, already authenticated socket; call :meth:`start` to begin reading.

    ``on_closed`` is called once, on the thread that noticed the end: with None after
    :meth:`close`, else with the cause (ConnectionClosed when the peer closed, FrameError,
    or the socket's OSError).
    """

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler | None = None,
        *,
        peer: str,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_closed: ClosedCallback | None = None,
        name: str = "rpc",
        max_call_threads: int = DEFAULT_MAX_CALL_THREADS,
    ) -> None:
        self._sock = sock
        self._handler = handler or no_handler
        self.peer = peer
        self.max_frame_bytes = max_frame_bytes
        self.on_closed = on_closed
        self._name = f"{name}-{peer}"
        self._reader = FrameReader(sock, max_frame_bytes)
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._pending: dict[int, _PendingCall] = {}
        self._ids = itertools.count(1)
        self._closed = threading.Event()
        self._close_cause: BaseException | None = None
        self._calls = Dispatcher(f"{self._name}-call", max_call_threads)
        self._notifications = Dispatcher(f"{self._name}-notify", 1)
        self._reader_thread = threading.Thread(
            target=self._read_loop, name=f"{self._name}-reader", daemon=True
        )

    def __repr__(self) -> str:
        return f"Connection(peer={self.peer!r}, closed={self.closed})"

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def close_cause(self) -> BaseException | None:
        return self._close_cause

    def start(self) -> Connection:
        self._reader_thread.start()
        return self

    # ------------------------------------------------------------------ outgoing

    def call(self, method: str, body: Any, timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S) -> Any:
        """Send a request and wait for its reply. Raises RemoteError when the peer's handler
        raised, CallTimeout after ``timeout_s`` (None: wait for ever), ConnectionClosed when the
        connection is or becomes closed, FrameError when the request cannot be encoded."""
        call_id = next(self._ids)
        header, payload = encode_frame([REQUEST, call_id, method, body], self.max_frame_bytes)
        pending = _PendingCall()
        with self._state_lock:
            if self.closed:
                raise self._closed_error()
            self._pending[call_id] = pending
        try:
            self._send(header, payload)
            if not pending.done.wait(timeout_s):
                raise CallTimeout(f"no reply to {method!r} from {self.peer} within {timeout_s} s")
        finally:
            with self._state_lock:
                self._pending.pop(call_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.value

    def notify(self, method: str, body: Any) -> None:
        """Send a one-way message; ConnectionClosed if the connection is closed."""
        self._send(*encode_frame([NOTIFY, method, body], self.max_frame_bytes))

    def _send(self, header: bytes, body: bytes) -> None:
        if self.closed:
            raise self._closed_error()
        try:
            with self._write_lock:
                send_frame(self._sock, header, body)
        except OSError as exc:
            self._shutdown(exc if not self.closed else None)
            raise self._closed_error() from None

    def _closed_error(self) -> ConnectionClosed:
        cause = self._close_cause
        detail = f": {cause}" if cause is not None else ""
        return ConnectionClosed(f"connection to {self.peer} is closed{detail}")

    # ------------------------------------------------------------------ incoming

    def _read_loop(self) -> None:
        cause: BaseException | None
        try:
            while True:
                self._dispatch(self._reader.read_frame())
        except ConnectionClosed:
            cause = ConnectionClosed(f"connection closed by {self.peer}")
            if not self.closed:
                logger.info("Connection closed by %s", self.peer)
        except FrameError as exc:
            cause = exc
            logger.warning("Closing connection to %s after a bad frame: %s", self.peer, exc)
        except OSError as exc:
            cause = exc
            if not self.closed:
                logger.warning("Closing connection to %s: %s", self.peer, exc or type(exc).__name__)
        except Exception as exc:  # a bug here must still close the connection and fail its calls
            cause = exc
            logger.exception("Closing connection to %s after an unexpected error", self.peer)
        self._shutdown(cause)

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, list) or not message or type(message[0]) is not int:
            raise FrameError("a message must be an array starting with its kind")
        kind = message[0]
        if kind == REPLY and len(message) == 3 and type(message[1]) is int:
            self._complete(message[1], message[2], None)
        elif kind == ERROR and len(message) == 4 and type(message[1]) is int:
            type_name, text = message[2], message[3]
            if not isinstance(type_name, str) or not isinstance(text, str):
                raise FrameError("an error reply must carry a type name and a message")
            self._complete(message[1], None, RemoteError(type_name, text))
        elif kind == REQUEST and len(message) == 4 and type(message[1]) is int and type(message[2]) is str:
            call_id, method, body = message[1], message[2], message[3]
            self._calls.submit(lambda: self._answer(call_id, method, body))
        elif kind == NOTIFY and len(message) == 3 and isinstance(message[1], str):
            method, body = message[1], message[2]
            self._notifications.submit(lambda: self._run_notification(method, body))
        else:
            raise FrameError(f"malformed message of kind {kind}")

    def _complete(self, call_id: int, value: Any, error: BaseException | None) -> None:
        with self._state_lock:
            pending = self._pending.get(call_id)
        if pending is None:
            logger.debug("Dropped a reply from %s to call %d, which no longer waits", self.peer, call_id)
            return
        pending.value, pending.error = value, error
        pending.done.set()

    def _answer(self, call_id: int, method: str, body: Any) -> None:
        try:
            frame = encode_frame([REPLY, call_id, self._handler(self, method, body)], self.max_frame_bytes)
        except Exception as exc:
            # Only the type and message cross: a traceback may hold data of this process.
            message = str(exc)[:_MAX_ERROR_MESSAGE_CHARS]
            frame = encode_frame([ERROR, call_id, type(exc).__name__, message], self.max_frame_bytes)
        try:
            self._send(*frame)
        except ConnectionClosed:
            logger.debug("Could not answer %r to %s: connection closed", method, self.peer)

    def _run_notification(self, method: str, body: Any) -> None:
        try:
            self._handler(self, method, body)
        except Exception:
            logger.exception("Handling notification %r from %s failed", method, self.peer)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close the socket, fail waiting calls with ConnectionClosed, stop the workers."""
        self._shutdown(None)

    def join(self, timeout_s: float | None = None) -> None:
        """Wait for the reader and worker threads, ``timeout_s`` in all (one deadline)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        if self._reader_thread is not threading.current_thread() and self._reader_thread.ident is not None:
            self._reader_thread.join(left())
        self._calls.join(left())
        self._notifications.join(left())

    def _shutdown(self, cause: BaseException | None) -> None:
        with self._state_lock:
            if self.closed:
                return
            self._close_cause = cause
            self._closed.set()
            pending, self._pending = self._pending, {}
        with contextlib.suppress(OSError):
            # Wakes the reader thread blocked in recv; close alone does not.
            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
        self._sock.close()
        for call in pending.values():
            call.error = self._closed_error()
            call.done.set()
        self._calls.close()
        self._notifications.close()
        if self.on_closed is not None:
            try:
                self.on_closed(cause)
            except Exception:
                logger.exception("on_closed callback of the connection to %s failed", self.peer)

"""Frames: a 4-byte big-endian unsigned length, then that many bytes of one msgpack value.

The length is checked against ``max_frame_bytes`` before a single body byte is read or a buffer
allocated, so a hostile or confused peer cannot make us reserve gigabytes. Large bodies (blocks
of tens of MB) are read with ``recv_into`` straight into one preallocated buffer; small frames go
through a reusable chunk buffer so that a stream of small frames costs about one ``recv`` each.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import msgpack

from reliable_kafka.rpc.errors import ConnectionClosed, FrameError

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
HEADER = struct.Struct(">I")
# Below this a frame is sent as one buffer (one syscall, and TCP_NODELAY sends it as one segment);
# above it header and body go separately rather than copying a large body once more.
_COALESCE_BYTES = 64 * 1024
_CHUNK_BYTES = 256 * 1024


def pack(value: Any) -> bytes:
    """``value`` as msgpack; FrameError if it holds something msgpack cannot carry."""
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        # The exception text names the offending type only, never the value.
        raise FrameError(f"cannot encode a frame: {exc}") from None


def unpack(body: bytes | bytearray | memoryview) -> Any:
    try:
        # strict_map_key=False: block metadata may key by partition number. Every peer past the
        # handshake is authenticated, and msgpack bounds container sizes by the body's length.
        return msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for garbage
        raise FrameError(f"frame body is not msgpack ({type(exc).__name__})") from None


def encode_frame(value: Any, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> tuple[bytes, bytes]:
    """The header and body of one frame; FrameError when the body exceeds ``max_frame_bytes``."""
    body = pack(value)
    if len(body) > max_frame_bytes:
        raise FrameError(f"frame of {len(body)} bytes exceeds the limit of {max_frame_bytes} bytes")
    return HEADER.pack(len(body)), body


def send_frame(sock: socket.socket, header: bytes, body: bytes) -> None:
    """Send one encoded frame; the caller holds the socket's write lock."""
    if len(body) < _COALESCE_BYTES:
        sock.sendall(header + body)
    else:
        sock.sendall(header)
        sock.sendall(body)


def write_frame(sock: socket.socket, value: Any, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
    header, body = encode_frame(value, max_frame_bytes)
    send_frame(sock, header, body)


class FrameReader:
    """Reads frames from one socket; not thread-safe (one reader thread per socket).

    ``deadline`` (a ``time.monotonic()`` instant) bounds every read in total, so that a peer
    trickling one byte at a time cannot stretch a per-recv timeout (used for handshakes).
    """

    def __init__(
        self,
        sock: socket.socket,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        *,
        deadline: float | None = None,
    ) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self._sock = sock
        self.max_frame_bytes = max_frame_bytes
        self.deadline = deadline
        self._buf = bytearray(min(_CHUNK_BYTES, max(HEADER.size, max_frame_bytes + HEADER.size)))
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0

    def read_frame(self) -> Any:
        """The next frame's value. ConnectionClosed on a clean end of stream between frames;
        FrameError on an oversize length, a stream ending inside a frame, or a body that is not
        msgpack; OSError (incl. timeouts) from the socket as is."""
        if self._end == self._start and not self._fill(HEADER.size, at_frame_start=True):
            raise ConnectionClosed("connection closed by peer")
        if self._end - self._start < HEADER.size:
            self._fill(HEADER.size)
        (length,) = HEADER.unpack_from(self._buf, self._start)
        if length > self.max_frame_bytes:
            raise FrameError(f"frame length {length} exceeds the limit of {self.max_frame_bytes} bytes")
        self._start += HEADER.size
        return unpack(self._read_body(length))

    def _read_body(self, length: int) -> bytes | bytearray | memoryview:
        buffered = self._end - self._start
        if length <= buffered:
            body = self._view[self._start : self._start + length]
            self._start += length
            return body
        if length <= len(self._buf):
            self._fill(length)
            body = self._view[self._start : self._start + length]
            self._start += length
            return body
        # Larger than the chunk buffer: one allocation of exactly the body, filled in place.
        body_buf = bytearray(length)
        body_view = memoryview(body_buf)
        body_view[:buffered] = self._view[self._start : self._end]
        self._start = self._end = 0
        got = buffered
        while got < length:
            self._before_recv()
            n = self._sock.recv_into(body_view[got:], length - got)
            if n == 0:
                raise FrameError(f"stream ended inside a frame ({got} of {length} body bytes)")
            got += n
        return body_buf

    def _fill(self, need: int, *, at_frame_start: bool = False) -> bool:
        """Make at least ``need`` bytes available from ``_start``; False only for a clean end of
        stream when ``at_frame_start`` and nothing is buffered."""
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._buf) - self._start < need:
            # Move the partial frame to the front so that it can grow in place.
            pending = self._end - self._start
            self._buf[:pending] = self._buf[self._start : self._end]
            self._start, self._end = 0, pending
        while self._end - self._start < need:
            self._before_recv()
            n = self._sock.recv_into(self._view[self._end :])
            if n == 0:
                if at_frame_start and self._end == self._start:
                    return False
                raise FrameError(
                    f"stream ended inside a frame ({self._end - self._start} of at least {need} bytes)"
                )
            self._end += n
        return True

    def _before_recv(self) -> None:
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out")
            self._sock.settimeout(remaining)

"""Frames on a real socket pair: round trips, size limits, truncation and garbage."""

from __future__ import annotations

import socket
import struct
import threading
import tracemalloc
from collections.abc import Iterator

import msgpack
import pytest

from reliable_kafka.rpc import ConnectionClosed, FrameError
from reliable_kafka.rpc.framing import FrameReader, encode_frame, write_frame


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.settimeout(30)
    b.settimeout(30)
    yield a, b
    a.close()
    b.close()


def send_in_background(sock: socket.socket, data: bytes) -> threading.Thread:
    thread = threading.Thread(target=sock.sendall, args=(data,))
    thread.start()
    return thread


@pytest.mark.parametrize(
    "value",
    [
        None,
        0,
        -(2**63),
        "snowman ☃",
        b"\x00\xff" * 10,
        [1, [2, [3]]],
        {"stream_id": 3, "metadata": {7: "partition keys may be ints"}},
    ],
)
def test_values_round_trip(pair: tuple[socket.socket, socket.socket], value: object) -> None:
    a, b = pair
    write_frame(a, value)
    assert FrameReader(b).read_frame() == value


def test_many_small_frames_and_one_large_frame_in_one_stream(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    large = bytes(range(256)) * (3 * 1024 * 1024 // 256)  # larger than the reader's chunk buffer
    values = [*range(1000), large, "after"]
    data = b"".join(header + body for header, body in (encode_frame(v) for v in values))
    sender = send_in_background(a, data)
    reader = FrameReader(b)
    assert [reader.read_frame() for _ in values] == values
    sender.join()


def test_frames_split_at_every_byte_boundary_are_reassembled(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    header, body = encode_frame({"k": "v" * 50})
    reader = FrameReader(b)
    for data in (header + body,) * 3:
        for i in range(len(data)):
            a.sendall(data[i : i + 1])
        assert reader.read_frame() == {"k": "v" * 50}


def test_clean_end_of_stream_between_frames_is_connection_closed(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    write_frame(a, 1)
    a.shutdown(socket.SHUT_WR)
    reader = FrameReader(b)
    assert reader.read_frame() == 1
    with pytest.raises(ConnectionClosed):
        reader.read_frame()


@pytest.mark.parametrize("cut", [2, 4, 7])
def test_end_of_stream_inside_a_frame_is_a_frame_error(
    pair: tuple[socket.socket, socket.socket], cut: int
) -> None:
    a, b = pair
    header, body = encode_frame("0123456789")
    a.sendall((header + body)[:cut])
    a.shutdown(socket.SHUT_WR)
    with pytest.raises(FrameError, match="ended inside a frame"):
        FrameReader(b).read_frame()


def test_frame_larger_than_the_limit_is_refused_on_both_sides(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    with pytest.raises(FrameError, match="exceeds the limit of 100 bytes"):
        encode_frame(b"x" * 200, max_frame_bytes=100)
    header, body = encode_frame(b"x" * 200)
    a.sendall(header + body)
    with pytest.raises(FrameError, match="exceeds the limit of 100 bytes"):
        FrameReader(b, max_frame_bytes=100).read_frame()


def test_a_2_gib_length_prefix_is_refused_before_any_allocation(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    a.sendall(struct.pack(">I", 2**31) + b"not much follows")
    reader = FrameReader(b)
    tracemalloc.start()
    try:
        with pytest.raises(FrameError, match="2147483648 exceeds the limit"):
            reader.read_frame()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The refusal itself allocates a few small objects; a body buffer would be gigabytes.
    assert peak < 1024 * 1024


@pytest.mark.parametrize(
    "body",
    [
        b"\xc1",  # a byte msgpack never uses
        b"\x92\x01",  # an array of two with one element
        msgpack.packb(1) + msgpack.packb(2),  # two values in one frame
        b"\xdd\xff\xff\xff\xff",  # an array claiming 4 billion elements
    ],
)
def test_bodies_that_are_not_one_msgpack_value_are_frame_errors(
    pair: tuple[socket.socket, socket.socket], body: bytes
) -> None:
    a, b = pair
    a.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(FrameError, match="not msgpack"):
        FrameReader(b).read_frame()


def test_values_msgpack_cannot_carry_are_refused_without_their_content() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "SECRET-CONTENT"

    with pytest.raises(FrameError, match="cannot encode") as info:
        encode_frame({"x": Opaque()})
    assert "SECRET-CONTENT" not in str(info.value)

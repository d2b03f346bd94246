"""The block format: magic + one msgpack array of records; Kafka records round-trip as tuples."""

from __future__ import annotations

import msgpack
import pytest

from reliable_kafka.storage import BLOCK_MAGIC, BlockFormatError, decode_block, encode_block


def test_kafka_records_round_trip_as_tuples() -> None:
    records = [(b"key", b"value" * 20, "events", 3, 1000 + i) for i in range(100)] + [
        (None, b"", "events", 0, 0)
    ]
    assert decode_block(encode_block(records)) == records


def test_layout_is_magic_then_a_plain_msgpack_array() -> None:
    data = encode_block(["a", b"b", 1, None, {"k": [1, 2]}])
    assert data[:4] == BLOCK_MAGIC
    # Any msgpack reader can read it: the layout documented in block_format's docstring.
    assert msgpack.unpackb(data[4:], raw=False) == ["a", b"b", 1, None, {"k": [1, 2]}]
    assert decode_block(data) == ["a", b"b", 1, None, {"k": (1, 2)}]


def test_unencodable_records_raise_type_error() -> None:
    with pytest.raises(TypeError):
        encode_block([object()])


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80\x04pickle", BLOCK_MAGIC + b"\x93\x01", BLOCK_MAGIC + msgpack.packb({"not": "an array"})],
)
def test_bytes_that_are_not_a_block_raise_block_format_error(data: bytes) -> None:
    with pytest.raises(BlockFormatError):
        decode_block(data)

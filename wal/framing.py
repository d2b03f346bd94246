"""On-disk frame of one record.

Layout (all integers big-endian)::

    offset 0  magic    1 byte   0xB1 = format version 1
    offset 1  length   4 bytes  payload length (unsigned)
    offset 5  crc      4 bytes  CRC32C over the 4 length bytes followed by the payload
    offset 9  payload  `length` bytes

A ``RecordHandle`` points at offset 0 of a frame and carries the payload length.
The CRC covers the length too, so a bit flip in the length field cannot make a reader
accept a shifted payload; the magic byte makes zero-filled or foreign tails fail fast.
"""

from __future__ import annotations

import struct

import crc32c

MAGIC = 0xB1
HEADER = struct.Struct(">BII")
HEADER_SIZE = HEADER.size
_LENGTH = struct.Struct(">I")
MAX_PAYLOAD = 0xFFFFFFFF


class FrameError(ValueError):
    """A frame failed validation; ``torn`` means it runs past the end of the available bytes."""

    def __init__(self, reason: str, *, torn: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.torn = torn


def checksum(length: int, payload: bytes | memoryview) -> int:
    return crc32c.crc32c(payload, crc32c.crc32c(_LENGTH.pack(length)))


def encode_header(payload: bytes | memoryview) -> bytes:
    """Header for ``payload``; written together with the payload in one system call."""
    # nbytes, not len(): a memoryview of wider items would otherwise get a short frame length.
    length = payload.nbytes if isinstance(payload, memoryview) else len(payload)
    if length > MAX_PAYLOAD:
        raise ValueError(f"record of {length} bytes exceeds the {MAX_PAYLOAD}-byte frame limit")
    return HEADER.pack(MAGIC, length, checksum(length, payload))


def decode_header(header: bytes | memoryview) -> tuple[int, int]:
    """(length, crc) of a frame header; raises ``FrameError`` on a short header or a bad magic byte."""
    if len(header) < HEADER_SIZE:
        raise FrameError(f"header cut short ({len(header)} of {HEADER_SIZE} bytes)", torn=True)
    magic, length, crc = HEADER.unpack_from(header)
    if magic != MAGIC:
        raise FrameError(f"bad magic byte 0x{magic:02x} (expected 0x{MAGIC:02x})")
    return length, crc


def verify_payload(length: int, crc: int, payload: bytes | memoryview) -> None:
    if len(payload) < length:
        raise FrameError(f"payload cut short ({len(payload)} of {length} bytes)", torn=True)
    if checksum(length, payload) != crc:
        raise FrameError("checksum mismatch")

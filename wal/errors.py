"""Exceptions raised by the write-ahead log."""

from __future__ import annotations


class WriteAheadLogError(Exception):
    """Base class of every error the write-ahead log raises on purpose."""


class CorruptRecordError(WriteAheadLogError):
    """A record failed its length or checksum check; names where it sits so an operator can look."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"corrupt write-ahead log record in {path} at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason

    def __reduce__(self) -> tuple[type[CorruptRecordError], tuple[str, int, str]]:
        # Custom __init__ arguments differ from args; keep the error copyable across threads/processes.
        return (type(self), (self.path, self.offset, self.reason))


class SegmentNotFoundError(WriteAheadLogError):
    """The segment a handle points at is gone (cleaned, deleted by hand, or never written)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"write-ahead log segment not found: {path}")
        self.path = path

    def __reduce__(self) -> tuple[type[SegmentNotFoundError], tuple[str]]:
        return (type(self), (self.path,))


class WriteAheadLogClosedError(WriteAheadLogError):
    """The log was closed; a write after close, or a write still pending when close was called."""


class UnsupportedOperationError(WriteAheadLogError):
    """The operation makes no sense for this kind of log (e.g. ``read`` on a batched log)."""

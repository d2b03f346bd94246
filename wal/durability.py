"""How hard a write pushes its bytes towards the disk before ``write`` returns."""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import Enum


class FsyncPolicy(Enum):
    """``FSYNC``: data + metadata on stable storage per write (the default, survives power loss).

    ``FDATASYNC``: data and the file size on stable storage, other metadata may lag; enough
    for an append-only segment and usually cheaper.
    ``NONE``: bytes reach the OS (or the fsspec file's flush) only; survives a process
    crash, not a machine crash.
    On fsspec stores that publish a file only when it is closed (S3, GCS, ...) every write
    closes its segment whatever the policy: before that, the bytes exist only in this process.
    """

    FSYNC = "fsync"
    FDATASYNC = "fdatasync"
    NONE = "none"

    @classmethod
    def coerce(cls, value: bool | FsyncPolicy | str) -> FsyncPolicy:
        if isinstance(value, FsyncPolicy):
            return value
        if isinstance(value, bool):
            return cls.FSYNC if value else cls.NONE
        return cls(value)


def sync_call(policy: FsyncPolicy) -> Callable[[int], None] | None:
    """The system call that makes a descriptor's writes as durable as ``policy`` says; None for
    ``NONE``. Looked up when called for, so it is the ``os`` function of that moment."""
    if policy is FsyncPolicy.FSYNC:
        return os.fsync
    if policy is FsyncPolicy.FDATASYNC:
        return getattr(os, "fdatasync", os.fsync)
    return None

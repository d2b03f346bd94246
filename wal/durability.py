"""How hard a write pushes its bytes towards the disk before ``write`` returns."""

from __future__ import annotations

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

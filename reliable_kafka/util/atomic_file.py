"""A local file replaced atomically and durably: a reader sees the old or the new contents, never a
mix, and after a crash the new file is there once this returned.

The driver checkpoint and the DStream state checkpoint both write this way; object stores get
whole-object writes instead (``checkpoint_remote``).
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

logger = logging.getLogger(__name__)


def write_atomically(directory: Path, name: str, data: bytes, mode: int) -> Path:
    """``directory/name`` replaced by ``data`` (file mode ``mode``): written to a temporary file
    beside it, synced, renamed over it, and the directory synced."""
    target = directory / name
    temp = directory / f".{name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        write_synced(fd, data)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_directory(directory)
    return target


def write_synced(fd: int, data: bytes) -> None:
    """All of ``data`` to the new file ``fd`` (a write may take part of it), synced, and ``fd``
    closed whatever happens."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """The rename is durable only once the directory entry is; not every platform allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        logger.debug("fsync of directory %s is not supported here", directory)
    finally:
        os.close(fd)

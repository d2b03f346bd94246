"""Directories of executor block stores whose process is gone.

A store removes its directories on close, but a receiver task SIGKILLed with its executor, or
killed by Spark at ``sc.stop()`` while it still served its blocks, never closes. On tmpfs those
bytes are RAM, held until the machine reboots. Each store's directory names its process
(``...-mem-<pid>-<random>``), so the next store created on the host removes the directories of
processes that no longer exist. Only directories of this user are touched, never a symlink, and a
pid that is alive (even if reused by another process) keeps its directory.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from pathlib import Path

logger = logging.getLogger(__name__)


def owned_prefix(prefix: str) -> str:
    """``prefix`` with this process's pid, the part :func:`remove_orphans` reads back."""
    return f"{prefix}{os.getpid()}-"


def remove_orphans(parent: Path, kind: str) -> int:
    """Remove ``reliable-kafka-*-<kind>-<pid>-*`` directories in ``parent`` whose pid is dead;
    returns how many. Errors are logged, never raised: this is housekeeping."""
    pattern = re.compile(rf"^reliable-kafka-.+-{re.escape(kind)}-(\d+)-[^/]+$")
    removed = 0
    try:
        entries = list(os.scandir(parent))
    except OSError as exc:
        logger.debug("cannot list %s for orphaned block stores: %s", parent, exc)
        return 0
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += 1
    if removed:
        logger.info("removed %d block store directories of ended processes from %s", removed, parent)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True

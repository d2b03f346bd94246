"""A real, small filesystem that fills up: a size-limited tmpfs mounted for one test.

Writing to it past its size fails with ENOSPC from the kernel, exactly as a full disk does,
and ``resize`` grows it in place (tmpfs keeps its files across a remount), so a test can free
the disk without losing what was written. Mounting needs root; elsewhere the tests that use
it skip with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False, timeout=30)


@contextmanager
def small_tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full-disk test mounts a small tmpfs, which needs root and mount(8)")
    path.mkdir(parents=True, exist_ok=True)
    result = _mount("-t", "tmpfs", "-o", f"size={size_bytes},mode=0700", "tmpfs", str(path))
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False, timeout=30)


def resize(path: Path, size_bytes: int) -> None:
    """Grow (or shrink) the tmpfs at ``path``; its files stay."""
    result = _mount("-o", f"remount,size={size_bytes}", str(path))
    assert result.returncode == 0, f"remount failed: {result.stderr.strip()}"


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize

"""The driver checkpoint on a remote filesystem (HDFS through WebHDFS, S3, ...): whole objects, an
atomic and verified switch, and a read that survives a crash in the middle of the switch.

Neither store has a local disk's ``rename(2)`` over an existing file: WebHDFS refuses a rename onto
an existing path (and fsspec's ``mv`` then silently does nothing), S3's "rename" is a copy and a
delete. So a write is, in steps:

1. upload the new checkpoint as a whole object under a fresh name, ``.metadata.<uuid>.tmp``;
2. rename it onto ``metadata`` (a copy on S3, which replaces the old object atomically);
3. verify: the new name is gone and ``metadata`` holds the new bytes; where the rename was refused
   (WebHDFS, over an existing file), delete ``metadata``, rename again and verify again; a rename
   still refused is an error, never silence;
4. on a failure before the old ``metadata`` was deleted, delete the new object; after, keep it.

A crash (or a refused rename) between the delete and the rename of step 3 leaves no ``metadata``
but a complete ``.metadata.*.tmp``: :func:`read` then takes the newest such leftover that parses
(a truncated one, from a crash during step 1, is skipped).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from reliable_kafka.util.filesystems import Location
from wal.fsspec_storage import set_mode

logger = logging.getLogger(__name__)

FILE_MODE = 0o600
_PENDING_PREFIX = ".metadata."
_PENDING_SUFFIX = ".tmp"


@contextlib.contextmanager
def store_errors(action: str, url: str) -> Iterator[None]:
    """Back ends raise their own exception types (botocore, requests, ...): callers handle OSError."""
    try:
        yield
    except OSError:
        raise
    except Exception as exc:
        raise OSError(f"cannot {action} {url}: {type(exc).__name__}: {exc}") from exc


def ensure_directory(location: Location) -> None:
    fs = location.fs
    assert fs is not None
    with store_errors("create", location.url):
        if not fs.exists(location.path):
            fs.makedirs(location.path, exist_ok=True)
            _chmod(fs, location.path, 0o700)


def _chmod(fs: Any, path: str, mode: int) -> None:
    # Owner-only where the store has permissions (HDFS); bucket policies govern S3.
    set_mode(fs, path, mode)


def write(location: Location, name: str, data: bytes) -> str:
    """Replace ``<location>/<name>`` with ``data`` (steps in the module docstring); its URL."""
    fs = location.fs
    assert fs is not None
    directory = location.path.rstrip("/")
    target = f"{directory}/{name}"
    pending = f"{directory}/{_PENDING_PREFIX}{uuid.uuid4().hex}{_PENDING_SUFFIX}"
    url = f"{location.url.rstrip('/')}/{name}"
    target_removed = False
    with store_errors("write", url):
        try:
            fs.pipe_file(pending, data)  # 1
            _chmod(fs, pending, FILE_MODE)
            fs.mv(pending, target)  # 2
            if not _switched(fs, pending, target, data):  # 3
                fs.rm_file(target)
                target_removed = True
                fs.mv(pending, target)
                if not _switched(fs, pending, target, data):
                    raise OSError(f"the store refused to rename {pending} onto {url}")
        except BaseException:
            # 4; once the old checkpoint is deleted, the new object is the only one: kept for read().
            if not target_removed:
                with contextlib.suppress(Exception):
                    if fs.exists(pending):
                        fs.rm_file(pending)
            raise
    return url


def _switched(fs: Any, pending: str, target: str, data: bytes) -> bool:
    fs.invalidate_cache(target.rsplit("/", 1)[0])
    return not fs.exists(pending) and fs.exists(target) and bytes(fs.cat_file(target)) == data


def read(location: Location, name: str, parse: Callable[[bytes], Any]) -> tuple[bytes | None, str]:
    """The bytes of ``<location>/<name>`` and the URL they came from; the newest leftover of an
    interrupted switch that ``parse`` accepts when ``name`` is missing; ``(None, url)`` if neither."""
    fs = location.fs
    assert fs is not None
    directory = location.path.rstrip("/")
    url = f"{location.url.rstrip('/')}/{name}"
    with store_errors("read", url):
        fs.invalidate_cache(directory)
        try:
            return bytes(fs.cat_file(f"{directory}/{name}")), url
        except FileNotFoundError:
            pass
        leftovers = _pending_objects(fs, directory)
    best: tuple[Any, bytes, str] | None = None
    for path in leftovers:
        with store_errors("read", path):
            try:
                data = bytes(fs.cat_file(path))
            except FileNotFoundError:
                continue
        try:
            parsed = parse(data)
        except (ValueError, UnicodeDecodeError):
            logger.info("ignoring an incomplete checkpoint leftover %s", path)
            continue
        if best is None or parsed.checkpoint_time_ms > best[0].checkpoint_time_ms:
            best = (parsed, data, path)
    if best is None:
        return None, url
    leftover_url = f"{location.url.rstrip('/')}/{best[2].rsplit('/', 1)[-1]}"
    logger.warning("checkpoint %s is missing; using %s, left by an interrupted write", url, leftover_url)
    return best[1], leftover_url


def _pending_objects(fs: Any, directory: str) -> list[str]:
    try:
        paths = fs.ls(directory, detail=False)
    except FileNotFoundError:
        return []
    names = [str(p).rstrip("/") for p in paths]
    return [
        p for p in names if p.rsplit("/", 1)[-1].startswith(_PENDING_PREFIX) and p.endswith(_PENDING_SUFFIX)
    ]


def remove_leftovers(location: Location) -> int:
    """Delete leftovers of interrupted writes (once ``metadata`` is known good); how many."""
    fs = location.fs
    assert fs is not None
    removed = 0
    with store_errors("clean", location.url):
        for path in _pending_objects(fs, location.path.rstrip("/")):
            with contextlib.suppress(FileNotFoundError):
                fs.rm_file(path)
                removed += 1
    return removed

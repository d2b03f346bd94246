"""The files of a checkpoint lease (``<checkpoint>/_lease/<sequence>.json``) and the one operation
the lease is built on: create a numbered file only if no one has created it, so that of two
drivers creating the same number, exactly one succeeds. Each store offers it differently:

- local disk: the bytes written and synced under a name of one's own, then ``link()``ed onto the
  number, which fails when the number exists (exclusive, as ``O_EXCL``) and never shows a reader
  the number half written (an ``O_EXCL`` create shows it empty until the write); then fsync of
  the directory; 0o600;
- S3: a conditional put, ``If-None-Match: *``, which the store answers 412 when the key exists
  (AWS S3 since 2024, SeaweedFS; s3fs maps the answer to ``FileExistsError`` or an ``OSError``
  caused by the 412);
- HDFS and other fsspec stores: upload under a name of one's own, then rename it onto the number.
  HDFS refuses a rename onto an existing path (WebHDFS answers ``false`` and fsspec's ``mv``
  drops the answer; pyarrow's HDFS raises), so success is read back: the temporary name gone and
  the number holding these bytes. On a store whose rename is a copy (``gs://``, ``abfs://``...)
  two creates at the same instant can both succeed: :attr:`LeaseFiles.exclusive` is False there.

The rest is plain: list the numbers, read one, remove one. Nothing here knows what a lease means
(``checkpoint_lease.py`` does).
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path
from typing import Any, Protocol

from reliable_kafka.checkpoint_remote import ensure_directory, store_errors
from reliable_kafka.util.atomic_file import fsync_directory, write_synced
from reliable_kafka.util.filesystems import FilesystemOptions, Location, is_local, join, locate, qualify
from wal.fsspec_storage import set_mode

LEASE_DIRECTORY = "_lease"
FILE_MODE = 0o600
DIR_MODE = 0o700
_NAME = re.compile(r"^(\d+)\.json$")
_S3_PROTOCOLS = frozenset({"s3", "s3a"})
_HDFS_PROTOCOLS = frozenset({"webhdfs", "hdfs", "arrow_hdfs"})


def file_name(sequence: int) -> str:
    return f"{sequence:012d}.json"


class LeaseFiles(Protocol):
    """The numbered files of one checkpoint's lease."""

    @property
    def url(self) -> str:
        """The lease directory's URL, for messages."""
        ...

    @property
    def exclusive(self) -> bool:
        """Whether :meth:`create` is exclusive on this store even for two creates at one instant."""
        ...

    def prepare(self) -> None:
        """Create the directory (0o700 where the store has permissions) unless it exists."""
        ...

    def sequences(self) -> list[int]:
        """The numbers present, ascending; names that are not a number are ignored."""
        ...

    def read(self, sequence: int) -> bytes | None:
        """The file's bytes; None if there is no such file."""
        ...

    def create(self, sequence: int, data: bytes) -> bool:
        """Create the file with ``data`` unless it exists: True if this call created it."""
        ...

    def remove(self, sequence: int) -> None:
        """Delete the file; a missing one is not an error."""
        ...


def lease_files(directory: str, options: FilesystemOptions | None = None) -> LeaseFiles:
    """The lease files of the checkpoint ``directory`` (a path or a URL; a remote one reached with
    ``options``, by default those ``filesystems.configure`` recorded for it)."""
    url = qualify(directory, options or FilesystemOptions())
    if is_local(url):
        return LocalLeaseFiles(Path(url) / LEASE_DIRECTORY)
    location = locate(join(url, LEASE_DIRECTORY), options)
    return StoreLeaseFiles(location)


class LocalLeaseFiles:
    def __init__(self, directory: Path) -> None:
        self._directory = directory

    @property
    def url(self) -> str:
        return str(self._directory)

    @property
    def exclusive(self) -> bool:
        return True

    def prepare(self) -> None:
        if not self._directory.is_dir():
            self._directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            self._directory.chmod(DIR_MODE)  # mkdir's mode is filtered by the umask

    def sequences(self) -> list[int]:
        try:
            names = os.listdir(self._directory)
        except FileNotFoundError:
            return []
        return _numbers(names)

    def read(self, sequence: int) -> bytes | None:
        try:
            return (self._directory / file_name(sequence)).read_bytes()
        except FileNotFoundError:
            return None

    def create(self, sequence: int, data: bytes) -> bool:
        path = self._directory / file_name(sequence)
        # A name no other driver lists or writes; the number appears only once the bytes are whole.
        own = self._directory / f".{file_name(sequence)}.{uuid.uuid4().hex}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        try:
            write_synced(os.open(own, flags, FILE_MODE), data)
            try:
                os.link(own, path)
            except FileExistsError:
                return False
        finally:
            own.unlink(missing_ok=True)
        fsync_directory(self._directory)
        return True

    def remove(self, sequence: int) -> None:
        (self._directory / file_name(sequence)).unlink(missing_ok=True)


class StoreLeaseFiles:
    """Lease files on a store reached through fsspec (see the module docstring for ``create``)."""

    def __init__(self, location: Location) -> None:
        assert location.fs is not None
        self._location = location
        self._fs: Any = location.fs
        self._directory = location.path.rstrip("/")
        protocols = self._fs.protocol
        self._protocols = frozenset([protocols] if isinstance(protocols, str) else protocols)

    @property
    def url(self) -> str:
        return self._location.url

    @property
    def exclusive(self) -> bool:
        return bool(self._protocols & (_S3_PROTOCOLS | _HDFS_PROTOCOLS))

    def prepare(self) -> None:
        ensure_directory(self._location)

    def _path(self, sequence: int) -> str:
        return f"{self._directory}/{file_name(sequence)}"

    def sequences(self) -> list[int]:
        with store_errors("list", self.url):
            self._fs.invalidate_cache(self._directory)
            try:
                paths = self._fs.ls(self._directory, detail=False)
            except FileNotFoundError:
                return []
        return _numbers(str(p).rstrip("/").rsplit("/", 1)[-1] for p in paths)

    def read(self, sequence: int) -> bytes | None:
        with store_errors("read", self.url):
            try:
                return bytes(self._fs.cat_file(self._path(sequence)))
            except FileNotFoundError:
                return None

    def create(self, sequence: int, data: bytes) -> bool:
        with store_errors("create", f"{self.url}/{file_name(sequence)}"):
            if self._protocols & _S3_PROTOCOLS:
                return self._put_if_absent(self._path(sequence), data)
            return self._rename_if_absent(self._path(sequence), data)

    def _put_if_absent(self, path: str, data: bytes) -> bool:
        try:
            # A keyword of put_object, passed through by every s3fs since 2024.
            self._fs.pipe_file(path, data, IfNoneMatch="*")
        except FileExistsError:
            return False
        except OSError as exc:
            if _precondition_failed(exc):
                return False
            raise
        return True

    def _rename_if_absent(self, path: str, data: bytes) -> bool:
        pending = f"{self._directory}/.{uuid.uuid4().hex}.tmp"
        try:
            self._fs.pipe_file(pending, data)
            set_mode(self._fs, pending, FILE_MODE)
            # WebHDFS answers a refused rename with false, which fsspec drops; pyarrow's HDFS
            # raises. Either way the read-back below is the answer.
            with contextlib.suppress(OSError):
                self._fs.mv(pending, path)
            self._fs.invalidate_cache(self._directory)
            return not self._fs.exists(pending) and bytes(self._fs.cat_file(path)) == data
        finally:
            with contextlib.suppress(Exception):
                if self._fs.exists(pending):
                    self._fs.rm_file(pending)

    def remove(self, sequence: int) -> None:
        with store_errors("remove", self.url), contextlib.suppress(FileNotFoundError):
            self._fs.rm_file(self._path(sequence))


def _numbers(names: Any) -> list[int]:
    found = (_NAME.match(name) for name in names)
    return sorted(int(match.group(1)) for match in found if match)


def _precondition_failed(exc: BaseException) -> bool:
    """s3fs maps AWS's 412 for ``If-None-Match`` to ``FileExistsError``, but another store's 412
    (SeaweedFS's names no condition) to a plain ``OSError`` caused by botocore's error."""
    cause: BaseException | None = exc
    while cause is not None:
        response = getattr(cause, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "PreconditionFailed" or status == 412:
                return True
        cause = cause.__cause__
    return False

"""Picks where segment bytes live: the local disk natively, anything else through fsspec."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wal.durability import FsyncPolicy
from wal.fsspec_storage import FsspecStorage
from wal.local_storage import LocalStorage
from wal.storage import Storage

if TYPE_CHECKING:
    import fsspec


def open_storage(
    log_directory: str, filesystem: fsspec.AbstractFileSystem | None, policy: FsyncPolicy
) -> Storage:
    """Local paths (and fsspec's local filesystem) go native; everything else through fsspec."""
    if filesystem is None:
        if "://" not in log_directory or log_directory.startswith("file://"):
            return LocalStorage(log_directory.removeprefix("file://"), policy)
        import fsspec.core  # noqa: PLC0415 - fsspec costs ~100 ms to import; local logs never need it

        filesystem, log_directory = fsspec.core.url_to_fs(log_directory)
    from fsspec.implementations.local import LocalFileSystem  # noqa: PLC0415

    if isinstance(filesystem, LocalFileSystem):
        return LocalStorage(filesystem._strip_protocol(log_directory), policy)
    return FsspecStorage(filesystem, filesystem._strip_protocol(log_directory), policy)

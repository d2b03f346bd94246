"""The driver checkpoint: ``<checkpoint>/metadata``, a small JSON document of plain data.

Spark serializes the whole ``StreamingContext`` (DStream graph, closures, conf) with Java
serialization. We store only what a restart needs to line the new run up with the old one: the
zero time and batch duration (so batch times stay on the same grid), the last generated batch,
the batches still pending when it was written, the remember durations, and which receiver input
streams existed (their ids key the recovered blocks). The graph itself is rebuilt by running the
application's setup function again: code is the source of truth, and nothing executable is ever
read back from disk.

The directory is a local path or a URL (``hdfs://``, ``s3a://``...: see ``util/filesystems.py``).
Local writes are atomic (temp file, fsync, rename, fsync of the directory); the file is 0o600 and a
directory we create is 0o700. Remote writes replace the file atomically and verifiably as an object
store allows (``checkpoint_remote.py``).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from reliable_kafka import checkpoint_remote
from reliable_kafka.checkpoint_lease import CheckpointLeaseLostError, WriteFence
from reliable_kafka.state_checkpoint import StateStreamRecord
from reliable_kafka.util.atomic_file import write_atomically
from reliable_kafka.util.filesystems import FilesystemOptions, configured_options, is_local, locate, qualify
from reliable_kafka.util.plain_fields import bool_field, int_field, is_int, optional_int_field, str_field
from wal.failure_log import FailureLog

logger = logging.getLogger(__name__)

CHECKPOINT_FILE_NAME = "metadata"
FORMAT = "reliable-kafka-driver-checkpoint"
FORMAT_VERSION = 1
FILE_MODE = 0o600
DIR_MODE = 0o700
# Spark's CheckpointWriter gives up on one checkpoint after this many failed attempts.
MAX_WRITE_ATTEMPTS = 3


class CheckpointError(ValueError):
    """The checkpoint exists but cannot be used; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class InputStreamRecord:
    """An input stream of the checkpointed graph: its id and kind (class name), and what the
    stream itself needs to go on where it stopped (``InputDStream.checkpoint_data``: plain JSON
    data, Spark's ``DStreamCheckpointData``; a direct Kafka stream's offset ranges), if anything."""

    id: int
    kind: str
    is_receiver_input: bool
    data: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "kind": self.kind, "is_receiver_input": self.is_receiver_input}
        if self.data is not None:
            d["data"] = self.data
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InputStreamRecord:
        data = d.get("data")
        if data is not None and not isinstance(data, dict):
            raise ValueError(f"input stream data must be an object, got {type(data).__name__}")
        return cls(
            id=int_field(d, "id"),
            kind=str_field(d, "kind"),
            is_receiver_input=bool_field(d, "is_receiver_input"),
            data=data,
        )


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What the job generator knew at ``checkpoint_time_ms`` (a batch time)."""

    checkpoint_time_ms: int
    zero_time_ms: int
    batch_duration_ms: int
    checkpoint_duration_ms: int
    last_generated_batch_time_ms: int
    pending_times_ms: tuple[int, ...] = ()
    remember_duration_ms: int | None = None
    max_input_remember_duration_ms: int | None = None
    input_streams: tuple[InputStreamRecord, ...] = ()
    written_at_ms: int = 0
    # The state checkpoints of stateful streams (state_checkpoint.py); absent in older checkpoints.
    state_streams: tuple[StateStreamRecord, ...] = ()
    # The writer's checkpoint lease epoch (checkpoint_lease.py); absent in older checkpoints.
    lease_epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "checkpoint_time_ms": self.checkpoint_time_ms,
            "zero_time_ms": self.zero_time_ms,
            "batch_duration_ms": self.batch_duration_ms,
            "checkpoint_duration_ms": self.checkpoint_duration_ms,
            "last_generated_batch_time_ms": self.last_generated_batch_time_ms,
            "pending_times_ms": list(self.pending_times_ms),
            "remember_duration_ms": self.remember_duration_ms,
            "max_input_remember_duration_ms": self.max_input_remember_duration_ms,
            "input_streams": [record.to_dict() for record in self.input_streams],
            "written_at_ms": self.written_at_ms,
            "state_streams": [record.to_dict() for record in self.state_streams],
            "lease_epoch": self.lease_epoch,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Checkpoint:
        if d.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document (format={d.get('format')!r})")
        if d.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"unsupported checkpoint version {d.get('version')!r}; this code reads {FORMAT_VERSION}"
            )
        pending = d.get("pending_times_ms")
        streams = d.get("input_streams")
        if not isinstance(pending, list) or not all(is_int(t) for t in pending):
            raise ValueError("pending_times_ms must be a list of integers")
        if not isinstance(streams, list) or not all(isinstance(s, dict) for s in streams):
            raise ValueError("input_streams must be a list of objects")
        states = d.get("state_streams", [])
        if not isinstance(states, list) or not all(isinstance(s, dict) for s in states):
            raise ValueError("state_streams must be a list of objects")
        checkpoint = cls(
            checkpoint_time_ms=int_field(d, "checkpoint_time_ms"),
            zero_time_ms=int_field(d, "zero_time_ms"),
            batch_duration_ms=int_field(d, "batch_duration_ms"),
            checkpoint_duration_ms=int_field(d, "checkpoint_duration_ms"),
            last_generated_batch_time_ms=int_field(d, "last_generated_batch_time_ms"),
            pending_times_ms=tuple(sorted(pending)),
            remember_duration_ms=optional_int_field(d, "remember_duration_ms"),
            max_input_remember_duration_ms=optional_int_field(d, "max_input_remember_duration_ms"),
            input_streams=tuple(InputStreamRecord.from_dict(s) for s in streams),
            written_at_ms=int_field(d, "written_at_ms"),
            state_streams=tuple(StateStreamRecord.from_dict(s) for s in states),
            lease_epoch=optional_int_field(d, "lease_epoch"),
        )
        if checkpoint.batch_duration_ms <= 0:
            raise ValueError(f"batch_duration_ms must be > 0, got {checkpoint.batch_duration_ms}")
        return checkpoint

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), sort_keys=True, indent=1).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Checkpoint:
        document = json.loads(data.decode("utf-8"))
        if not isinstance(document, dict):
            raise ValueError("the checkpoint is not a JSON object")
        return cls.from_dict(document)


# ---------------------------------------------------------------- paths


def local_directory(directory: str | os.PathLike[str]) -> Path:
    """A checkpoint directory as a local path; ``file:`` URIs are accepted, other schemes are not."""
    text = os.fspath(directory)
    parsed = urlparse(text)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme == "file" else text).expanduser().absolute()
    if len(parsed.scheme) == 1:  # a Windows drive letter, not a scheme
        return Path(text).absolute()
    raise ValueError(
        f"checkpoint directory {text!r}: only local directories are supported, not {parsed.scheme}://"
    )


def ensure_checkpoint_dir(
    directory: str | os.PathLike[str], options: FilesystemOptions | None = None
) -> Path | str:
    """Create the directory (0o700, parents as the umask says) unless it exists; return it (a
    local directory as a Path, a remote one as its URL)."""
    url = qualify(directory, options or FilesystemOptions())
    if not is_local(url):
        checkpoint_remote.ensure_directory(locate(url, options))
        return url
    path = local_directory(url)
    if not path.is_dir():
        for existing in (path, *path.parents):
            if existing.exists():
                if not existing.is_dir():
                    # mkdir would say "File exists", which hides what is wrong with the path.
                    raise NotADirectoryError(
                        errno.ENOTDIR, f"checkpoint directory {path}: {existing} is not a directory"
                    )
                break
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        # mkdir's mode is filtered by the umask, which can only remove bits; set it exactly.
        path.chmod(DIR_MODE)
    return path


def checkpoint_file(directory: str | os.PathLike[str]) -> Path:
    return local_directory(directory) / CHECKPOINT_FILE_NAME


# ---------------------------------------------------------------- read / write


def write_checkpoint(
    directory: str | os.PathLike[str], checkpoint: Checkpoint, options: FilesystemOptions | None = None
) -> Path | str:
    """Replace ``<directory>/metadata`` atomically; a reader sees the old or the new file, never a mix."""
    url = qualify(directory, options or FilesystemOptions())
    if not is_local(url):
        location = locate(url, options)
        checkpoint_remote.ensure_directory(location)
        return checkpoint_remote.write(location, CHECKPOINT_FILE_NAME, checkpoint.to_bytes())
    target_dir = Path(ensure_checkpoint_dir(url))
    return write_atomically(target_dir, CHECKPOINT_FILE_NAME, checkpoint.to_bytes(), FILE_MODE)


def read_checkpoint(
    directory: str | os.PathLike[str], options: FilesystemOptions | None = None
) -> Checkpoint | None:
    """The checkpoint in ``directory``; ``None`` when there is none (no directory or no file).

    Raises :class:`CheckpointError` when the file exists but cannot be read or parsed, as Spark's
    ``getOrCreate`` fails on an unreadable checkpoint rather than silently starting over.
    """
    url = qualify(directory, options or FilesystemOptions())
    path: Path | str
    if is_local(url):
        path = checkpoint_file(url)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"Failed to read checkpoint {path}: {exc}") from exc
    else:
        try:
            found, path = checkpoint_remote.read(
                locate(url, options), CHECKPOINT_FILE_NAME, Checkpoint.from_bytes
            )
        except OSError as exc:
            raise CheckpointError(f"Failed to read checkpoint {url}/{CHECKPOINT_FILE_NAME}: {exc}") from exc
        if found is None:
            return None
        data = found
    try:
        return Checkpoint.from_bytes(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"Failed to read checkpoint {path}: {exc}. The file is corrupt or was written by an "
            f"incompatible version; delete {path} to start afresh (batches pending in it will not run again)."
        ) from exc


class CheckpointWriter:
    """Writes checkpoints for one directory, retrying a failed write as Spark's writer does.

    ``fence``: the driver's lease on the directory, asked before every write and stamped on it
    (its epoch); a write it refuses is not attempted (None: no lease, as in tests of the writer).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        options: FilesystemOptions | None = None,
        *,
        fence: WriteFence | None = None,
    ) -> None:
        url = os.fspath(directory)
        self._fence = fence
        # The driver's JobGenerator hands over only the directory; how to reach a remote one was
        # recorded when the context was given it (StreamingContext.checkpoint).
        self._options = configured_options(url) if options is None else options
        self.directory: Path | str = local_directory(url) if is_local(url) else qualify(url, self._options)
        self._leftovers_checked = is_local(url)
        self.last_written_time_ms: int | None = None
        self._failures = FailureLog(logger, f"writing the checkpoint to {self.directory}", shared=True)

    def write(self, checkpoint: Checkpoint) -> bool:
        """True once written; False (logged) after :data:`MAX_WRITE_ATTEMPTS` failures."""
        for attempt in range(1, MAX_WRITE_ATTEMPTS + 1):
            try:
                started = time.monotonic()
                if self._fence is not None:
                    checkpoint = dataclasses.replace(checkpoint, lease_epoch=self._fence.check())
                write_checkpoint(self.directory, checkpoint, self._options)
                self._remove_leftovers_once()
            except CheckpointLeaseLostError as exc:
                # Not retried: the lease, not the store, said no. No traceback to show.
                self._failures.failed(
                    exc, f"time {checkpoint.checkpoint_time_ms}, not written", traceback=False
                )
                return False
            except OSError as exc:
                # Spark's "Could not write checkpoint" is the last attempt's line, not one more.
                gives_up = ", could not write this checkpoint" if attempt == MAX_WRITE_ATTEMPTS else ""
                where = f"time {checkpoint.checkpoint_time_ms}, attempt {attempt} of {MAX_WRITE_ATTEMPTS}"
                self._failures.failed(exc, where + gives_up)
                continue
            self._failures.succeeded()
            self.last_written_time_ms = checkpoint.checkpoint_time_ms
            logger.info(
                "Checkpoint for time %d ms saved to %s, took %.1f ms",
                checkpoint.checkpoint_time_ms,
                self.directory,
                (time.monotonic() - started) * 1000,
            )
            return True
        return False

    def _remove_leftovers_once(self) -> None:
        """Objects of writes a crashed run left behind go once a checkpoint of this run is in place."""
        if self._leftovers_checked:
            return
        self._leftovers_checked = True
        removed = checkpoint_remote.remove_leftovers(locate(str(self.directory), self._options))
        if removed:
            logger.info(
                "removed %d leftover(s) of interrupted checkpoint writes in %s", removed, self.directory
            )

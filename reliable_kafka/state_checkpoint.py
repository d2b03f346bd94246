"""State checkpoints: the RDDs of stateful DStreams written to the checkpoint directory, so that a
restarted driver resumes with the state the old run had (Spark's reliable RDD checkpoints of
``updateStateByKey``, ``reduceByKeyAndWindow`` with an inverse, and ``DStream.checkpoint``).

Writing, in steps (``write_snapshot``, on the driver, once a checkpoint time's batch completed):

1. a Spark job over the (persisted) state RDD writes one file per partition, on the executors,
   under ``<checkpoint>/state/<position>-<time ms>/part-<index>-<attempt>``; each task returns
   only the file's name, size, record count, codec and SHA-256: no state passes the driver;
2. the driver records the files in a :class:`StateSnapshot`, which goes into the next driver
   checkpoint (``checkpoint.py``); a file no driver checkpoint names is never read;
3. once a driver checkpoint naming a newer snapshot is written, directories older than the two
   newest snapshots go (``clean``): the older of the two is the fallback if the newer is damaged.

A partition file is ``MAGIC``, one codec byte, the payload length (8 bytes, big-endian), the
payload and the payload's SHA-256. The payload is the partition's records as a msgpack array
(``CODEC_MSGPACK``; tuples as ext type 1, so keys stay hashable and values keep their types).
Records msgpack cannot carry exactly (sets, objects, ints beyond 64 bits...) make that file
``CODEC_PYTHON``: pickled, as Spark's own Python checkpoints are. That codec lives in
:func:`_python_objects_dumps` / :func:`_python_objects_loads` and nowhere else, and a file is
decoded only after its length and SHA-256 match what the driver checkpoint recorded.

Local files are written as the driver checkpoint is (temp file, fsync, rename, 0o600; directories
0o700); remote ones as one whole object under a name no other attempt uses.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import pickle
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack

from reliable_kafka.util.atomic_file import write_atomically
from reliable_kafka.util.filesystems import FilesystemOptions, RemoteDirectory, is_local, join, locate

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

logger = logging.getLogger(__name__)

STATE_DIR = "state"
MAGIC = b"RKSTATE\x01"
CODEC_MSGPACK = 0
CODEC_PYTHON = 1
CODEC_NAMES = {CODEC_MSGPACK: "msgpack", CODEC_PYTHON: "python"}
_HEADER_LEN = len(MAGIC) + 1 + 8
_DIGEST_LEN = 32
_TUPLE_EXT = 1
FILE_MODE = 0o600
DIR_MODE = 0o700
# Snapshots kept per stream: the newest, and the one before it to fall back to.
KEPT_SNAPSHOTS = 2


class StateCheckpointError(ValueError):
    """A state checkpoint file that must not be loaded: missing, truncated or not what was written."""


# ---------------------------------------------------------------- records (plain data, JSON)


@dataclass(frozen=True, slots=True)
class StateFile:
    name: str
    sha256: str
    size: int
    records: int
    codec: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sha256": self.sha256,
            "size": self.size,
            "records": self.records,
            "codec": self.codec,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StateFile:
        name, sha, codec = d.get("name"), d.get("sha256"), d.get("codec")
        size, records = d.get("size"), d.get("records")
        if not isinstance(name, str) or "/" in name or name.startswith("."):
            raise ValueError(f"state file name must be a plain file name, got {name!r}")
        if not isinstance(sha, str) or len(sha) != 64:
            raise ValueError(f"state file sha256 must be 64 hex digits, got {sha!r}")
        if codec not in CODEC_NAMES.values():
            raise ValueError(f"state file codec must be one of {sorted(CODEC_NAMES.values())}, got {codec!r}")
        if not _is_int(size) or not _is_int(records):
            raise ValueError("state file size and records must be integers")
        return cls(name, sha, size, records, codec)


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """The state of one stream at ``time_ms``: file ``i`` holds partition ``i``."""

    time_ms: int
    directory: str
    files: tuple[StateFile, ...]
    hash_partitioned: bool

    @property
    def num_partitions(self) -> int:
        return len(self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_ms": self.time_ms,
            "directory": self.directory,
            "files": [f.to_dict() for f in self.files],
            "hash_partitioned": self.hash_partitioned,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StateSnapshot:
        time_ms, directory, files = d.get("time_ms"), d.get("directory"), d.get("files")
        if not _is_int(time_ms):
            raise ValueError(f"state snapshot time_ms must be an integer, got {time_ms!r}")
        if not isinstance(directory, str) or "/" in directory or directory.startswith("."):
            raise ValueError(f"state snapshot directory must be a plain name, got {directory!r}")
        if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
            raise ValueError("state snapshot files must be a list of objects")
        return cls(
            time_ms, directory, tuple(StateFile.from_dict(f) for f in files), bool(d.get("hash_partitioned"))
        )


@dataclass(frozen=True, slots=True)
class StateStreamRecord:
    """A checkpointed stream of the graph: its position among the checkpointed streams (graph
    order), what it is (``signature``: kind, durations, functions) and its snapshots, oldest first."""

    position: int
    signature: str
    snapshots: tuple[StateSnapshot, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "signature": self.signature,
            "snapshots": [s.to_dict() for s in self.snapshots],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StateStreamRecord:
        position, signature, snapshots = d.get("position"), d.get("signature"), d.get("snapshots")
        if not _is_int(position) or not isinstance(signature, str):
            raise ValueError("state stream needs an integer position and a string signature")
        if not isinstance(snapshots, list) or not all(isinstance(s, dict) for s in snapshots):
            raise ValueError("state stream snapshots must be a list of objects")
        return cls(position, signature, tuple(StateSnapshot.from_dict(s) for s in snapshots))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------- codecs


def _msgpack_default(obj: Any) -> Any:
    # strict_types sends tuples here (not silently as lists): kept as tuples, so keys stay hashable.
    if type(obj) is tuple:
        return msgpack.ExtType(_TUPLE_EXT, _msgpack_dumps(list(obj)))
    raise TypeError(f"{type(obj).__name__} is not plain data")


def _msgpack_ext(code: int, data: bytes) -> Any:
    if code != _TUPLE_EXT:
        raise ValueError(f"unknown msgpack ext type {code}")
    return tuple(_msgpack_loads(data))


def _msgpack_dumps(value: Any) -> bytes:
    return msgpack.packb(value, default=_msgpack_default, strict_types=True, use_bin_type=True)


def _msgpack_loads(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_msgpack_ext, raw=False, strict_map_key=False, use_list=True)


def _python_objects_dumps(records: list[Any]) -> bytes:
    """The one place this project pickles data at rest: state values that are not plain data."""
    return pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL)


def _python_objects_loads(payload: bytes) -> list[Any]:
    # Only ever called on a payload whose SHA-256 matched the driver checkpoint's record.
    return pickle.loads(payload)  # noqa: S301 - integrity-checked, see the module docstring


def encode_records(records: list[Any]) -> tuple[int, bytes]:
    """The codec and payload of one partition: msgpack when every record is plain data."""
    try:
        return CODEC_MSGPACK, _msgpack_dumps(records)
    except (TypeError, ValueError, OverflowError):
        return CODEC_PYTHON, _python_objects_dumps(records)


def frame(codec: int, payload: bytes) -> tuple[bytes, str]:
    """A partition file's bytes and the hex SHA-256 of its payload."""
    digest = hashlib.sha256(payload).digest()
    return MAGIC + bytes([codec]) + len(payload).to_bytes(8, "big") + payload + digest, digest.hex()


def unframe(data: bytes, expected: StateFile, where: str) -> list[Any]:
    """The records of a partition file, after checking it is the file the checkpoint recorded."""
    if len(data) != expected.size:
        raise StateCheckpointError(
            f"state checkpoint file {where} has {len(data)} bytes, {expected.size} were written (truncated?)"
        )
    if data[: len(MAGIC)] != MAGIC:
        raise StateCheckpointError(f"state checkpoint file {where} is not a state checkpoint file")
    codec = data[len(MAGIC)]
    length = int.from_bytes(data[len(MAGIC) + 1 : _HEADER_LEN], "big")
    if _HEADER_LEN + length + _DIGEST_LEN != len(data) or CODEC_NAMES.get(codec) != expected.codec:
        raise StateCheckpointError(f"state checkpoint file {where} has a damaged header")
    payload = data[_HEADER_LEN : _HEADER_LEN + length]
    digest = hashlib.sha256(payload).digest()
    if digest != data[-_DIGEST_LEN:] or digest.hex() != expected.sha256:
        raise StateCheckpointError(f"state checkpoint file {where} fails its SHA-256 check")
    records = _msgpack_loads(payload) if codec == CODEC_MSGPACK else _python_objects_loads(payload)
    if not isinstance(records, list) or len(records) != expected.records:
        raise StateCheckpointError(f"state checkpoint file {where} does not hold the records written")
    return records


# ---------------------------------------------------------------- file access (driver and executors)


def _store(directory: dict[str, Any] | str, name_parts: tuple[str, ...], data: bytes) -> None:
    if isinstance(directory, str):
        target_dir = Path(directory, *name_parts[:-1])
        _make_local_dirs(target_dir)
        write_atomically(target_dir, name_parts[-1], data, FILE_MODE)
        return
    from reliable_kafka.checkpoint_remote import store_errors  # noqa: PLC0415 - remote only
    from wal.fsspec_storage import set_mode  # noqa: PLC0415

    location = RemoteDirectory.from_dict(directory).locate()
    fs = location.fs
    assert fs is not None
    path = "/".join([location.path.rstrip("/"), *name_parts])
    parent = path.rsplit("/", 1)[0]
    with store_errors("write", path):
        if not fs.exists(parent):
            fs.makedirs(parent, exist_ok=True)
            set_mode(fs, parent, DIR_MODE)  # owner-only where the store has permissions (HDFS)
        fs.pipe_file(path, data)  # one whole object, under a name no other attempt uses
        set_mode(fs, path, FILE_MODE)


def _load(directory: dict[str, Any] | str, name_parts: tuple[str, ...]) -> bytes:
    where = "/".join(name_parts)
    try:
        if isinstance(directory, str):
            return Path(directory, *name_parts).read_bytes()
        location = RemoteDirectory.from_dict(directory).locate()
        assert location.fs is not None
        return bytes(location.fs.cat_file("/".join([location.path.rstrip("/"), *name_parts])))
    except FileNotFoundError as exc:
        raise StateCheckpointError(f"state checkpoint file {where} is missing") from exc
    except OSError as exc:
        raise StateCheckpointError(f"state checkpoint file {where} cannot be read: {exc}") from exc


def _make_local_dirs(path: Path) -> None:
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=DIR_MODE)
            directory.chmod(DIR_MODE)  # the umask filters mkdir's mode


def directory_handle(checkpoint_dir: str, options: FilesystemOptions | None = None) -> dict[str, Any] | str:
    """What a task carries to reach the state directory: a local path, or a remote directory's
    URL and access options (plain data; never logged)."""
    url = join(checkpoint_dir, STATE_DIR)
    if is_local(checkpoint_dir):
        return str(Path(checkpoint_dir) / STATE_DIR)
    remote = RemoteDirectory.configured(url) if options is None else RemoteDirectory(url, options)
    assert remote is not None
    return remote.to_dict()


# ---------------------------------------------------------------- writing and reading RDDs


def _partition_writer(handle: dict[str, Any] | str, snapshot_dir: str) -> Any:
    # Module-level so the closure pyspark ships holds plain data only.
    def write(index: int, records: Iterable[Any]) -> Iterator[dict[str, Any]]:
        data = list(records)
        codec, payload = encode_records(data)
        framed, digest = frame(codec, payload)
        name = f"part-{index:05d}-{uuid.uuid4().hex[:12]}"
        _store(handle, (snapshot_dir, name), framed)
        yield {
            "index": index,
            "file": StateFile(name, digest, len(framed), len(data), CODEC_NAMES[codec]).to_dict(),
        }

    return write


def write_snapshot(
    rdd: RDD[Any], handle: dict[str, Any] | str, position: int, time_ms: int, hash_partitioned: bool
) -> StateSnapshot:
    """Write ``rdd`` (steps 1 and 2 of the module docstring); its snapshot, to be recorded."""
    snapshot_dir = f"{position}-{time_ms}"
    results = rdd.mapPartitionsWithIndex(_partition_writer(handle, snapshot_dir)).collect()
    by_index = {r["index"]: StateFile.from_dict(r["file"]) for r in results}
    if sorted(by_index) != list(range(rdd.getNumPartitions())):
        raise StateCheckpointError(f"state checkpoint {snapshot_dir}: not every partition was written")
    files = tuple(by_index[i] for i in range(len(by_index)))
    if any(f.codec == "python" for f in files):
        logger.warning(
            "state checkpoint %s holds values that are not plain data (msgpack): stored pickled "
            "(see docs/recovery.md, Stateful streams)",
            snapshot_dir,
        )
    return StateSnapshot(time_ms, snapshot_dir, files, hash_partitioned)


def _partition_reader(handle: dict[str, Any] | str, snapshot: dict[str, Any]) -> Any:
    def read(index: int, _ignored: Iterable[Any]) -> Iterator[Any]:
        parsed = StateSnapshot.from_dict(snapshot)
        expected = parsed.files[index]
        parts = (parsed.directory, expected.name)
        yield from unframe(_load(handle, parts), expected, "/".join(parts))

    return read


def _partition_checker(handle: dict[str, Any] | str, snapshot: dict[str, Any]) -> Any:
    def check(index: int, _ignored: Iterable[Any]) -> Iterator[str | None]:
        parsed = StateSnapshot.from_dict(snapshot)
        expected = parsed.files[index]
        parts = (parsed.directory, expected.name)
        try:
            unframe(_load(handle, parts), expected, "/".join(parts))
        except StateCheckpointError as exc:
            yield str(exc)
        else:
            yield None

    return check


def verify_snapshot(sc: SparkContext, handle: dict[str, Any] | str, snapshot: StateSnapshot) -> list[str]:
    """What is wrong with the snapshot's files (checked on executors); empty when all are intact."""
    n = snapshot.num_partitions
    if n == 0:
        return []
    checks = sc.parallelize(range(n), n).mapPartitionsWithIndex(
        _partition_checker(handle, snapshot.to_dict())
    )
    return [problem for problem in checks.collect() if problem is not None]


def read_snapshot(sc: SparkContext, handle: dict[str, Any] | str, snapshot: StateSnapshot) -> RDD[Any]:
    """The snapshot as an RDD, partition ``i`` from file ``i``; hash-partitioned as it was when
    pyspark's default partitioner made it (any other partition function cannot be stored)."""
    from pyspark.rdd import Partitioner, portable_hash  # noqa: PLC0415 - executors never need it

    n = snapshot.num_partitions
    if n == 0:
        return sc.emptyRDD()
    rdd = sc.parallelize(range(n), n).mapPartitionsWithIndex(_partition_reader(handle, snapshot.to_dict()))
    if snapshot.hash_partitioned:
        rdd.partitioner = Partitioner(n, portable_hash)
    return rdd


def clean(handle: dict[str, Any] | str, keep: Mapping[int, int]) -> int:
    """Delete snapshot directories of stream ``position`` older than ``keep[position]`` (the oldest
    snapshot the last driver checkpoint names); newer ones may be in the middle of being written."""
    removed = 0
    for name in _list(handle):
        position, _, time_text = name.partition("-")
        if not (position.isdigit() and time_text.isdigit()):
            continue
        oldest_kept = keep.get(int(position))
        if oldest_kept is not None and int(time_text) < oldest_kept and _remove(handle, name):
            removed += 1
    return removed


def _list(handle: dict[str, Any] | str) -> list[str]:
    if isinstance(handle, str):
        try:
            return [p.name for p in Path(handle).iterdir() if p.is_dir()]
        except FileNotFoundError:
            return []
    location = RemoteDirectory.from_dict(handle).locate()
    assert location.fs is not None
    try:
        location.fs.invalidate_cache(location.path)
        return [str(p).rstrip("/").rsplit("/", 1)[-1] for p in location.fs.ls(location.path, detail=False)]
    except FileNotFoundError:
        return []


def _remove(handle: dict[str, Any] | str, name: str) -> bool:
    """Delete a snapshot directory; False if it held no files (already removed)."""
    if isinstance(handle, str):
        shutil.rmtree(Path(handle) / name, ignore_errors=True)
        return True
    location = locate(handle["url"], RemoteDirectory.from_dict(handle).options)
    fs = location.fs
    assert fs is not None
    directory = f"{location.path.rstrip('/')}/{name}"
    fs.invalidate_cache(directory)
    files = fs.find(directory)
    for path in files:  # one by one: not every fsspec store's rm takes a list (WebHDFS)
        with contextlib.suppress(FileNotFoundError):
            fs.rm_file(path)
    # Some stores keep an emptied directory listed (SeaweedFS's filer, HDFS): remove it as well.
    with contextlib.suppress(Exception):
        fs.rm(directory, recursive=True)
    return bool(files)

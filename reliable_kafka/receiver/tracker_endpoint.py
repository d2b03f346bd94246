"""The seam between a receiver's supervisor and the driver's receiver tracker.

Both directions are small protocols whose messages are plain data (``to_dict``/``from_dict``
with str/int/None/dict values only), because this call will later cross an authenticated
socket between an executor and the driver; nothing here may need pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from reliable_kafka.storage.block_id import StreamBlockId
from wal import RecordHandle


def _field(d: Mapping[str, Any], name: str, kinds: tuple[type, ...], owner: str) -> Any:
    if name not in d:
        raise ValueError(f"{owner}: missing field {name!r}")
    value = d[name]
    # No field here is a bool, and bool is an int subclass: True as a record count is a bug.
    if isinstance(value, bool) or not isinstance(value, kinds):
        expected = " or ".join(kind.__name__ for kind in kinds)
        raise ValueError(f"{owner}.{name}: expected {expected}, got {type(value).__name__} {value!r}")
    return value


def _check_num_records(owner: str, num_records: int | None) -> None:
    if num_records is not None and num_records < 0:
        raise ValueError(f"{owner}: num_records must be >= 0 or None, got {num_records}")


@dataclass(frozen=True, slots=True)
class BlockLocation:
    """Where a block kept on an executor is: the executor, the block's file on that host, and the
    port of the block server of the receiver that stored it (for readers on other hosts)."""

    host: str
    executor_id: str
    path: str | None = None
    port: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "executor_id": self.executor_id, "path": self.path, "port": self.port}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BlockLocation:
        owner = cls.__name__
        return cls(
            host=_field(d, "host", (str,), owner),
            executor_id=_field(d, "executor_id", (str,), owner),
            path=_field(d, "path", (str, type(None)), owner),
            port=_field(d, "port", (int, type(None)), owner),
        )


@dataclass(frozen=True, slots=True)
class ReceivedBlockStoreResult:
    """Where a block was stored: its id, its record count if known, its WAL handle if any, the
    executor keeping it (executor placement; None when the driver keeps it), for a level with
    replication 2, the peer executor keeping its second copy, and its size in the block format
    (None from versions before it was reported: the batch then gives the block a task of its own)."""

    block_id: StreamBlockId
    num_records: int | None
    wal_record_handle: RecordHandle | None = None
    location: BlockLocation | None = None
    replica: BlockLocation | None = None
    num_bytes: int | None = None

    def __post_init__(self) -> None:
        _check_num_records("ReceivedBlockStoreResult", self.num_records)
        if self.num_bytes is not None and self.num_bytes < 0:
            raise ValueError(
                f"ReceivedBlockStoreResult: num_bytes must be >= 0 or None, got {self.num_bytes}"
            )

    def to_dict(self) -> dict[str, Any]:
        d = {
            "block_id": self.block_id.name,
            "num_records": self.num_records,
            "wal_record_handle": None if self.wal_record_handle is None else self.wal_record_handle.to_dict(),
            "location": None if self.location is None else self.location.to_dict(),
        }
        # Only when there is one: records of unreplicated blocks stay as older versions read them.
        if self.replica is not None:
            d["replica"] = self.replica.to_dict()
        if self.num_bytes is not None:
            d["num_bytes"] = self.num_bytes
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReceivedBlockStoreResult:
        owner = cls.__name__
        handle = _field(d, "wal_record_handle", (dict, type(None)), owner)
        # Absent from metadata logs written before executor placement existed.
        location = _field(d, "location", (dict, type(None)), owner) if "location" in d else None
        # Absent from records of unreplicated blocks and of versions before replication.
        replica = _field(d, "replica", (dict, type(None)), owner) if "replica" in d else None
        # Absent from versions before block sizes were reported.
        num_bytes = _field(d, "num_bytes", (int, type(None)), owner) if "num_bytes" in d else None
        return cls(
            block_id=StreamBlockId.parse(_field(d, "block_id", (str,), owner)),
            num_records=_field(d, "num_records", (int, type(None)), owner),
            wal_record_handle=None if handle is None else RecordHandle.from_dict(handle),
            location=None if location is None else BlockLocation.from_dict(location),
            replica=None if replica is None else BlockLocation.from_dict(replica),
            num_bytes=num_bytes,
        )


@dataclass(frozen=True, slots=True)
class ReceivedBlockInfo:
    """What a supervisor reports for each stored block (Spark's ``AddBlock`` payload)."""

    stream_id: int
    num_records: int | None
    metadata: dict[str, Any] | None
    block_store_result: ReceivedBlockStoreResult

    def __post_init__(self) -> None:
        _check_num_records("ReceivedBlockInfo", self.num_records)

    @property
    def block_id(self) -> StreamBlockId:
        return self.block_store_result.block_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream_id": self.stream_id,
            "num_records": self.num_records,
            "metadata": self.metadata,
            "block_store_result": self.block_store_result.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReceivedBlockInfo:
        owner = cls.__name__
        return cls(
            stream_id=_field(d, "stream_id", (int,), owner),
            num_records=_field(d, "num_records", (int, type(None)), owner),
            metadata=_field(d, "metadata", (dict, type(None)), owner),
            block_store_result=ReceivedBlockStoreResult.from_dict(
                _field(d, "block_store_result", (dict,), owner)
            ),
        )


@runtime_checkable
class ReceiverControl(Protocol):
    """Messages from the tracker to one running receiver (Spark's ``ReceiverMessage``s)."""

    def update_rate_limit(self, rate: int) -> None:
        """New records-per-second limit for every block generator of the receiver."""
        ...

    def stop_receiver(self, message: str) -> None:
        """Stop the receiver and its supervisor for good."""
        ...

    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        """Delete blocks (and WAL data) older than ``thresh_time_ms``."""
        ...

    def remove_blocks(self, block_ids: list[str]) -> None:
        """Delete these blocks from the receiver's block store (the driver no longer needs them)."""
        ...


@runtime_checkable
class ReceiverTrackerEndpoint(Protocol):
    """Messages from a receiver's supervisor to the tracker. ``error`` is a formatted traceback
    (empty when there is none), since an exception object cannot cross the wire."""

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        """False when the tracker refuses to run this receiver here."""
        ...

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        """False when the tracker could not record the block."""
        ...

    def report_error(self, stream_id: int, message: str, error: str) -> None: ...

    def deregister_receiver(self, stream_id: int, message: str, error: str, *, fatal: bool = False) -> bool:
        """The receiver stopped; ``fatal``: with an error that ends its stream (see
        :mod:`~reliable_kafka.receiver.fatal_error`), so it must not be launched again."""
        ...

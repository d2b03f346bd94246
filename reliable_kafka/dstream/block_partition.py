"""One block of a batch of received blocks (``BlockPartition``, Spark's ``BlockRDDPartition``):
what it needs to produce its block, and the chain a task reads the block through. A partition of
the batch RDD holds one or more of them, consecutive blocks kept in the same place
(:mod:`~reliable_kafka.dstream.block_grouping`), read one after the other, each through its own chain.

A block carries its bytes (driver placement: taken from the driver's block store when the batch
is built), or where to find them: the executor keeping the block (executor placement; the
partition prefers that executor's host) and the block's write-ahead log handle. A task reads, in
order: its own bytes; the block's file when it runs on the host keeping it; a fetch from the block
server of the receiver that stored it; the same two for the block's second copy (levels with
replication 2: kept by a peer receiver, on another host where there is one); the write-ahead log;
a re-read from Kafka; else it fails as Spark does ("Could not compute split, block ... not
found"). Partition descriptors are msgpack (raw frames to the JVM), so neither block data nor
handles are ever pickled.

Then the block's records go through the stream's decoder (:func:`decoded_records`) a chunk of
the block at a time (:mod:`~reliable_kafka.dstream.chunk_decoding`: from the key and value
columns at once where the decoder offers it, else in C loops, not a Python generator step per
record).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import msgpack

from reliable_kafka.dstream.chunk_decoding import decoded_chunks, decoded_rows
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.rpc.tls import client_context
from reliable_kafka.storage.block_format import decode_block, decode_chunks
from reliable_kafka.storage.block_recovery import BlockRecoveryError, recover_block
from reliable_kafka.storage.block_server import fetch_block
from reliable_kafka.storage.executor_block_store import read_block_file
from reliable_kafka.util import instruments
from reliable_kafka.util.filesystems import RemoteDirectory
from wal import FileBasedWriteAheadLog, RecordHandle

# Logged under the name these lines have always had, so that logging configurations that quiet or
# route them keep working.
logger = logging.getLogger("reliable_kafka.dstream.batch_rdd")


# Records decoded per list when a block is in the row layout: bounds the decoded copies held at once.
_ROWS_PER_SLICE = 4096


class BlockNotFoundError(RuntimeError):
    """No copy of a block could be read: not on an executor, not in the write-ahead log."""


@dataclass(frozen=True, slots=True)
class BlockPartition:
    """What one partition needs to produce its block: the bytes, or where they are.

    ``fetch_secret`` authenticates a fetch from the block server at ``location``; it travels in
    the task and is never logged (it is left out of the repr).
    """

    block_id: str
    data: bytes | None = None
    wal_record_handle: RecordHandle | None = None
    location: BlockLocation | None = None
    fetch_secret: bytes | None = field(default=None, repr=False)
    # The CAs a fetch trusts when the receivers' sockets use TLS (None: plain TCP).
    fetch_tls_ca: str | None = None
    # Where to read the block again when its WAL record is unreadable (see block_recovery).
    recovery: dict[str, Any] | None = field(default=None, repr=False)
    # The checkpoint directory when it is remote: handles name paths within its filesystem, and
    # the executor reaches it with these options, not with anything of its own environment.
    wal_directory: RemoteDirectory | None = field(default=None, repr=False)
    # The block's second copy (storage levels with replication 2), read when the first is gone.
    replica: BlockLocation | None = None

    def __post_init__(self) -> None:
        if self.data is None and self.wal_record_handle is None and self.location is None:
            raise ValueError(f"block {self.block_id} has no data, executor or write-ahead log handle")

    @property
    def from_block_manager(self) -> bool:
        """Read from a block store (the driver's, or an executor's), not from the WAL."""
        return self.data is not None or self.location is not None

    @property
    def preferred_locations(self) -> list[str]:
        """The host keeping the block, not its executor: every process on the host reads the
        block's file, and an executor preference would hold the task for ``spark.locality.wait``
        (3 s) while the receiver's executor has no free core, longer than a batch takes."""
        return [where.host for where in (self.location, self.replica) if where is not None]

    def encode(self) -> bytes:
        return msgpack.packb(self._fields(), use_bin_type=True)

    @classmethod
    def decode(cls, raw: bytes) -> BlockPartition:
        return cls._from_fields(msgpack.unpackb(raw, raw=False))

    @staticmethod
    def encode_blocks(blocks: Sequence[BlockPartition]) -> bytes:
        """What a task of a batch RDD gets: its blocks, in order, in one msgpack array (the
        blocks' fields, not each block's encoding: bytes shipped with a block are copied once)."""
        return msgpack.packb([block._fields() for block in blocks], use_bin_type=True)

    @classmethod
    def decode_blocks(cls, raw: bytes) -> list[BlockPartition]:
        return [cls._from_fields(fields) for fields in msgpack.unpackb(raw, raw=False)]

    def _fields(self) -> dict[str, Any]:
        handle, location = self.wal_record_handle, self.location
        fields: dict[str, Any] = {
            "block_id": self.block_id,
            "data": self.data,
            "wal": None if handle is None else handle.to_dict(),
            "location": None if location is None else location.to_dict(),
            "secret": self.fetch_secret,
            "tls_ca": self.fetch_tls_ca,
        }
        if self.recovery is not None:
            fields["recovery"] = self.recovery
        if self.wal_directory is not None:
            fields["wal_directory"] = self.wal_directory.to_dict()
        if self.replica is not None:
            fields["replica"] = self.replica.to_dict()
        return fields

    @classmethod
    def _from_fields(cls, d: dict[str, Any]) -> BlockPartition:
        handle, location = d["wal"], d["location"]
        return cls(
            d["block_id"],
            d["data"],
            None if handle is None else RecordHandle.from_dict(handle),
            None if location is None else BlockLocation.from_dict(location),
            d["secret"],
            d.get("tls_ca"),
            d.get("recovery"),
            None if d.get("wal_directory") is None else RemoteDirectory.from_dict(d["wal_directory"]),
            None if d.get("replica") is None else BlockLocation.from_dict(d["replica"]),
        )

    @staticmethod
    def decoded_blocks(
        blocks: Iterable[BlockPartition], decoder: Callable[[Any], Any], skip: object
    ) -> Iterator[Any]:
        """The records of each block through ``decoder``, in order, as one iterator (each block
        read when the one before it is used up)."""
        return chain.from_iterable(block.decoded(decoder, skip) for block in blocks)

    def decoded(self, decoder: Callable[[Any], Any], skip: object) -> Iterator[Any]:
        """The block read (:meth:`read`), then its records through ``decoder`` (:func:`decoded_records`)."""
        return decoded_records(self.read(), decoder, skip)

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        fetch_error: Exception | None = None
        if self.location is not None:
            data, fetch_error = self._read_from_executor(self.location)
            if data is not None:
                return data
        if self.replica is not None:
            data, replica_error = self._read_from_executor(self.replica)
            if data is not None:
                instruments.BLOCKS_FROM_REPLICA.inc()
                # WARNING: a batch task's worker has no logging of its own, and only that reaches
                # the executor's log; it happens once per block of a lost executor.
                logger.warning(
                    "block %s read from its second copy on executor %s: the copy on %s is gone (%r)",
                    self.block_id,
                    _where(self.replica),
                    _where(self.location),
                    fetch_error,
                )
                return data
            fetch_error = fetch_error or replica_error
        handle = self.wal_record_handle
        if handle is None:
            kept_on = (
                f"executor {_where(self.location)}, which no longer has it"
                if self.replica is None
                else f"executors {_where(self.location)} and {_where(self.replica)}, neither of which has it"
            )
            gone = (
                f"it was kept on {kept_on}"
                + ("" if fetch_error is None else f" (fetching it: {fetch_error!r})")
                + ", and the receiver write-ahead log is off (spark.streaming.receiver.writeAheadLog.enable)"
            )
            if self.recovery is None:
                raise BlockNotFoundError(
                    f"Could not compute split, block {self.block_id} not found: {gone}, "
                    "so there is no other copy"
                )
            return self._read_again(gone)
        try:
            # Opening a log touches nothing on disk; here it is only the reader of this one handle.
            filesystem = None if self.wal_directory is None else self.wal_directory.locate().fs
            with FileBasedWriteAheadLog(posixpath.dirname(handle.path), filesystem=filesystem) as log:
                data = log.read(handle)
            if fetch_error is not None:
                # Expected after a restart (the receiver that held it is gone): one line, at INFO.
                logger.info(
                    "block %s read from the write-ahead log: its receiver's copy on %s is gone (%r)",
                    self.block_id,
                    _where(self.location),
                    fetch_error,
                )
            return data
        except Exception as exc:
            if self.recovery is None:
                raise
            wal_error = exc
        # The recovery source may hold credentials: only the block and the WAL error are logged.
        fetched = "" if fetch_error is None else f" and fetching it failed ({fetch_error!r})"
        logger.warning(
            "block %s: its write-ahead log record is unreadable (%s)%s; reading it again from its source",
            self.block_id,
            wal_error,
            fetched,
        )
        try:
            return recover_block(self.recovery)
        except BlockRecoveryError as exc:
            raise BlockRecoveryError(f"block {self.block_id}: {exc} (write-ahead log: {wal_error})") from exc

    def _read_again(self, gone: str) -> bytes:
        """The block read again from its source (its exact offset ranges from Kafka), its every
        copy being lost; only records the source no longer has fail the batch, named."""
        assert self.recovery is not None
        # The recovery source may hold credentials: only the block and where it was are logged.
        logger.warning("block %s: %s; reading it again from its source", self.block_id, gone)
        try:
            data = recover_block(self.recovery)
        except BlockRecoveryError as exc:
            message = f"Could not compute split, block {self.block_id}: {gone}; {exc}"
            raise BlockRecoveryError(message) from exc
        instruments.BLOCKS_REREAD.inc()
        return data

    def _read_from_executor(self, location: BlockLocation) -> tuple[bytes | None, Exception | None]:
        """The block from its file (same host), else from its receiver's block server; or why not
        (logged by the caller, once it knows whether another copy served)."""
        if location.path is not None:
            data = read_block_file(location.path)
            if data is not None:
                return data, None
        if location.port is None or self.fetch_secret is None:
            return None, None
        try:
            tls = None if self.fetch_tls_ca is None else client_context(self.fetch_tls_ca)
            return fetch_block(
                location.host, location.port, self.fetch_secret, self.block_id, ssl_context=tls
            ), None
        except Exception as exc:
            # The receiver (or its executor) is gone; the write-ahead log may still have it.
            return None, exc


def _where(location: BlockLocation | None) -> str:
    return "?" if location is None else f"{location.executor_id} on {location.host}"


def decoded_records(data: bytes, decoder: Callable[[Any], Any], skip: object) -> Iterator[Any]:
    """``decoder(record)`` of each record of a block, in order, leaving out what the decoder
    returns as ``skip``; a chunk (or, in the row layout, a slice) of the block at a time."""
    chunks = decode_chunks(data)
    if chunks is None:
        rows = decode_block(data)
        slices = (rows[start : start + _ROWS_PER_SLICE] for start in range(0, len(rows), _ROWS_PER_SLICE))
        return chain.from_iterable(decoded_rows(rows_slice, decoder, skip) for rows_slice in slices)
    return decoded_chunks(chunks, decoder, skip)

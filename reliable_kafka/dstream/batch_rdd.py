"""The RDD of one batch of received blocks: Spark's ``BlockRDD`` and ``WriteAheadLogBackedBlockRDD``
in one class; each batch exposes its Kafka ``OffsetRange``s.

One partition per block. A partition carries the block's bytes (driver placement: taken from the
driver's block store when the batch is built), or where to find them: the executor keeping the
block (executor placement; the partition prefers that executor) and the block's write-ahead log
handle. A task reads, in order: its own bytes; the block's file when it runs on the host keeping
it; a fetch from the block server of the receiver that stored it; the same two for the block's
second copy (levels with replication 2: kept by a peer receiver, on another host where there is
one); the write-ahead log; a re-read from Kafka; else it fails as Spark does ("Could not compute
split, block ... not found"). Partition descriptors are
msgpack (raw frames to the JVM), so neither block data nor handles are ever pickled; decoding
(block format, then the optional decoder) happens on the executors when the partition is computed.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack
from pyspark import RDD, SparkContext
from pyspark.rdd import PipelinedRDD
from pyspark.serializers import NoOpSerializer

from reliable_kafka.dstream.block_recovery import BlockRecoveryError, recover_block
from reliable_kafka.kafka.offset_range import OffsetRange, merge_offset_ranges, ranges_in_metadata
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.rpc.tls import client_context
from reliable_kafka.storage.block_format import decode_block
from reliable_kafka.storage.block_server import fetch_block
from reliable_kafka.storage.executor_block_store import read_block_file
from reliable_kafka.util import instruments
from reliable_kafka.util.filesystems import RemoteDirectory
from reliable_kafka.util.located_rdd import located_rdd
from wal import FileBasedWriteAheadLog, RecordHandle

if TYPE_CHECKING:
    # Driver-side types only: executors import this module to read blocks and need neither.
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
    from reliable_kafka.storage.block_store import BlockStore

logger = logging.getLogger(__name__)

Decoder = Callable[[Any], Any]


class BlockNotFoundError(RuntimeError):
    """No copy of a block could be read: not on an executor, not in the write-ahead log."""


class _SkipRecord:
    """What a decoder returns to leave a record out of the batch."""

    def __reduce__(self) -> str:
        # Pickled by name, so the one instance stays the one instance in every worker.
        return "SKIP_RECORD"

    def __repr__(self) -> str:
        return "SKIP_RECORD"


SKIP_RECORD = _SkipRecord()


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
        return msgpack.packb(fields, use_bin_type=True)

    @classmethod
    def decode(cls, raw: bytes) -> BlockPartition:
        d = msgpack.unpackb(raw, raw=False)
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


class _ReadBlocks:
    """The executor-side function of a batch RDD: descriptors in, decoded records out."""

    def __init__(self, decoder: Decoder | None) -> None:
        self.decoder = decoder

    def __call__(self, _split: int, descriptors: Iterable[bytes]) -> Iterator[Any]:
        decoder = self.decoder
        for raw in descriptors:
            records = decode_block(BlockPartition.decode(raw).read())
            if decoder is None:
                yield from records
            else:
                for item in map(decoder, records):
                    if item is not SKIP_RECORD:
                        yield item


def _descriptor_rdd(sc: SparkContext, descriptors: list[bytes]) -> RDD[bytes]:
    """One partition per descriptor, shipped as raw length-prefixed frames (no pickle)."""
    if not descriptors:
        return sc.emptyRDD()
    num_slices = len(descriptors)
    # pyspark's private parallelize path: it has no public one that takes another serializer.
    jvm = sc._jvm
    assert jvm is not None

    def reader_func(temp_filename: str) -> Any:
        return jvm.PythonRDD.readRDDFromFile(sc._jsc, temp_filename, num_slices)

    def server_func() -> Any:
        return jvm.PythonParallelizeServer(sc._jsc.sc(), num_slices)

    jrdd = sc._serialize_to_jvm(descriptors, NoOpSerializer(), reader_func, server_func)
    return RDD(jrdd, sc, NoOpSerializer())


class BlockRDD(PipelinedRDD):
    """The records of a batch's blocks, one partition per block, in block order.

    A plain PySpark RDD for everything downstream (``map`` etc. pipeline into the same Python
    worker); in addition it knows its blocks and, for Kafka input, its ``offsetRanges()``.
    """

    def __init__(
        self,
        sc: SparkContext,
        partitions: Sequence[BlockPartition],
        *,
        decoder: Decoder | None = None,
        offset_ranges: Sequence[OffsetRange] = (),
    ) -> None:
        if any(p.location is not None for p in partitions):
            source = located_rdd(sc, [(p.encode(), p.preferred_locations) for p in partitions])
        else:
            source = _descriptor_rdd(sc, [p.encode() for p in partitions])
        super().__init__(source, _ReadBlocks(decoder), preservesPartitioning=False)
        self.block_ids: list[str] = [p.block_id for p in partitions]
        self.num_from_block_manager = sum(p.from_block_manager for p in partitions)
        # Partitions whose bytes the driver ships (driver placement); 0 when executors keep blocks.
        self.num_with_driver_bytes = sum(p.data is not None for p in partitions)
        self.num_from_write_ahead_log = len(partitions) - self.num_from_block_manager
        self._offset_ranges = list(offset_ranges)
        # Input metadata known only once the batch ran (counts kept by executors), merged into
        # the listener's StreamInputInfo when the batch completes.
        self.late_input_metadata: Callable[[], dict[str, Any]] | None = None

    def offsetRanges(self) -> list[OffsetRange]:
        """The Kafka offsets this batch holds, one range per topic-partition."""
        return list(self._offset_ranges)


def _where(location: BlockLocation | None) -> str:
    return "?" if location is None else f"{location.executor_id} on {location.host}"


def offset_ranges_of(block_infos: Iterable[ReceivedBlockInfo]) -> list[OffsetRange]:
    """The batch's offset ranges, from each block's ``metadata["offset_ranges"]`` where present."""
    return merge_offset_ranges(ranges_in_metadata(info.metadata) for info in block_infos)


def create_block_rdd(
    sc: SparkContext,
    block_infos: Sequence[ReceivedBlockInfo],
    block_store: BlockStore | None,
    *,
    decoder: Decoder | None = None,
    receiver_wal_enabled: bool = False,
    fetch_secret: bytes | None = None,
    fetch_tls_ca: str | None = None,
    recovery_source: Callable[[ReceivedBlockInfo], dict[str, Any] | None] | None = None,
    wal_directory: RemoteDirectory | None = None,
) -> BlockRDD:
    """Spark's ``ReceiverInputDStream.createBlockRDD``: each block from the block store when it is
    there, else from the write-ahead log; a block in neither is left out with Spark's warning.

    ``block_store`` is the driver's (driver placement) or None: then blocks are read where the
    executors keep them (``fetch_secret`` authenticates fetches from other hosts). ``wal_directory``:
    the checkpoint directory when it is remote (where the WAL handles point)."""
    partitions: list[BlockPartition] = []
    included: list[ReceivedBlockInfo] = []
    missing: list[str] = []
    for info in block_infos:
        result = info.block_store_result
        handle = result.wal_record_handle
        data = block_store.get(info.block_id) if block_store is not None else None
        # A block not shipped with its bytes can be read again from its source: should its WAL
        # record be damaged, or, without the WAL, should its executor's copy be gone with its host.
        recovery = (
            recovery_source(info)
            if data is None and (handle is not None or result.location is not None) and recovery_source
            else None
        )
        if data is not None:
            partitions.append(BlockPartition(info.block_id.name, data))
        elif result.location is not None:
            # Kept by an executor (executor placement; on a local master, beside receivers that
            # run in the driver and store in ``block_store``).
            partitions.append(
                BlockPartition(
                    info.block_id.name,
                    None,
                    handle,
                    result.location,
                    fetch_secret,
                    fetch_tls_ca,
                    recovery,
                    None if handle is None else wal_directory,
                    result.replica,
                )
            )
        elif handle is not None:
            partitions.append(
                BlockPartition(
                    info.block_id.name, None, handle, recovery=recovery, wal_directory=wal_directory
                )
            )
        else:
            missing.append(info.block_id.name)
            continue
        included.append(info)
    with_handles = sum(info.block_store_result.wal_record_handle is not None for info in block_infos)
    if 0 < with_handles < len(block_infos):
        if receiver_wal_enabled:
            logger.error(
                "Some blocks do not have Write Ahead Log information; "
                "this is unexpected and data may not be recoverable after driver failures"
            )
        else:
            logger.warning("Some blocks have Write Ahead Log information; this is unexpected")
    if missing:
        logger.warning(
            "Some blocks could not be recovered as they were not found in memory. To prevent such data "
            "loss, enable Write Ahead Log (see programming guide for more details.) Missing: %s",
            ", ".join(missing),
        )
    return BlockRDD(sc, partitions, decoder=decoder, offset_ranges=offset_ranges_of(included))

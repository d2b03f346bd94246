"""The RDD of one batch of received blocks: Spark's ``BlockRDD`` and ``WriteAheadLogBackedBlockRDD``
in one class; each batch exposes its Kafka ``OffsetRange``s.

One partition per block. A partition carries either the block's bytes (taken from the block
manager when the batch is built) or only the block's write-ahead log handle, which the executor
reads. Partition descriptors are msgpack (``NoOpSerializer`` frames to the JVM), so neither block
data nor handles are ever pickled; decoding (block format, then the optional decoder) happens
on the executors when the partition is computed.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack
from pyspark import RDD, SparkContext
from pyspark.rdd import PipelinedRDD
from pyspark.serializers import NoOpSerializer

from reliable_kafka.dstream.block_recovery import BlockRecoveryError, recover_block
from reliable_kafka.kafka.offset_range import OffsetRange, merge_offset_ranges, ranges_in_metadata
from reliable_kafka.storage.block_format import decode_block
from wal import FileBasedWriteAheadLog, RecordHandle

if TYPE_CHECKING:
    # Driver-side types only: executors import this module to read blocks and need neither.
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
    from reliable_kafka.storage.block_store import BlockStore

logger = logging.getLogger(__name__)

Decoder = Callable[[Any], Any]


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
    """What one partition needs to produce its block: the bytes, or where they are in the WAL."""

    block_id: str
    data: bytes | None = None
    wal_record_handle: RecordHandle | None = None
    # Where to read the block again when its WAL record is unreadable (see block_recovery).
    recovery: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.data is None and self.wal_record_handle is None:
            raise ValueError(f"block {self.block_id} has neither data nor a write-ahead log handle")

    @property
    def from_block_manager(self) -> bool:
        return self.data is not None

    def encode(self) -> bytes:
        handle = self.wal_record_handle
        fields: dict[str, Any] = {
            "block_id": self.block_id,
            "data": self.data,
            "wal": None if handle is None else handle.to_dict(),
        }
        if self.recovery is not None:
            fields["recovery"] = self.recovery
        return msgpack.packb(fields, use_bin_type=True)

    @classmethod
    def decode(cls, raw: bytes) -> BlockPartition:
        d = msgpack.unpackb(raw, raw=False)
        handle = d["wal"]
        return cls(
            d["block_id"],
            d["data"],
            None if handle is None else RecordHandle.from_dict(handle),
            d.get("recovery"),
        )

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        handle = self.wal_record_handle
        assert handle is not None
        try:
            # Opening a log touches nothing on disk; here it is only the reader of this one handle.
            with FileBasedWriteAheadLog(posixpath.dirname(handle.path)) as log:
                return log.read(handle)
        except Exception as exc:
            if self.recovery is None:
                raise
            wal_error = exc
        # The recovery source may hold credentials: only the block and the WAL error are logged.
        logger.warning(
            "block %s: its write-ahead log record is unreadable (%s); reading it again from its source",
            self.block_id,
            wal_error,
        )
        try:
            return recover_block(self.recovery)
        except BlockRecoveryError as exc:
            raise BlockRecoveryError(f"block {self.block_id}: {exc} (write-ahead log: {wal_error})") from exc


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
        source = _descriptor_rdd(sc, [p.encode() for p in partitions])
        super().__init__(source, _ReadBlocks(decoder), preservesPartitioning=False)
        self.block_ids: list[str] = [p.block_id for p in partitions]
        self.num_from_block_manager = sum(p.from_block_manager for p in partitions)
        self.num_from_write_ahead_log = len(partitions) - self.num_from_block_manager
        self._offset_ranges = list(offset_ranges)
        # Input metadata known only once the batch ran (counts kept by executors), merged into
        # the listener's StreamInputInfo when the batch completes.
        self.late_input_metadata: Callable[[], dict[str, Any]] | None = None

    def offsetRanges(self) -> list[OffsetRange]:
        """The Kafka offsets this batch holds, one range per topic-partition."""
        return list(self._offset_ranges)


def offset_ranges_of(block_infos: Iterable[ReceivedBlockInfo]) -> list[OffsetRange]:
    """The batch's offset ranges, from each block's ``metadata["offset_ranges"]`` where present."""
    return merge_offset_ranges(ranges_in_metadata(info.metadata) for info in block_infos)


def create_block_rdd(
    sc: SparkContext,
    block_infos: Sequence[ReceivedBlockInfo],
    block_store: BlockStore,
    *,
    decoder: Decoder | None = None,
    receiver_wal_enabled: bool = False,
    recovery_source: Callable[[ReceivedBlockInfo], dict[str, Any] | None] | None = None,
) -> BlockRDD:
    """Spark's ``ReceiverInputDStream.createBlockRDD``: each block from the block store when it is
    there, else from the write-ahead log; a block in neither is left out with Spark's warning."""
    partitions: list[BlockPartition] = []
    included: list[ReceivedBlockInfo] = []
    missing: list[str] = []
    for info in block_infos:
        handle = info.block_store_result.wal_record_handle
        data = block_store.get(info.block_id)
        if data is not None or handle is not None:
            from_wal = data is None and handle is not None
            recovery = recovery_source(info) if from_wal and recovery_source is not None else None
            partitions.append(
                BlockPartition(info.block_id.name, data, handle if from_wal else None, recovery)
            )
            included.append(info)
        else:
            missing.append(info.block_id.name)
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

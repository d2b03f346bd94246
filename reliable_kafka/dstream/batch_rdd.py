"""The RDD of one batch of received blocks: Spark's ``BlockRDD`` and ``WriteAheadLogBackedBlockRDD``
in one class; each batch exposes its Kafka ``OffsetRange``s.

Each block is a :class:`~reliable_kafka.dstream.block_partition.BlockPartition` (its bytes or
where they are, and the chain a task reads it through); a partition holds a run of consecutive
blocks kept in the same place (:mod:`~reliable_kafka.dstream.block_grouping`;
``spark.streaming.blockRDD.maxPartitionBytes=0``: one block each, as in Spark). Decoding (block
format, then the optional decoder) happens on the executors when the partition is computed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

from pyspark import SparkContext
from pyspark.rdd import PipelinedRDD

from reliable_kafka.dstream.block_grouping import group_blocks, target_partition_bytes
from reliable_kafka.dstream.block_partition import BlockPartition
from reliable_kafka.storage.block_format import decode_block
from reliable_kafka.util.filesystems import RemoteDirectory
from reliable_kafka.util.located_rdd import located_rdd
from reliable_kafka.util.raw_bytes_rdd import raw_bytes_rdd

if TYPE_CHECKING:
    # Driver-side types only: executors import this module to read blocks and need neither.
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
    from reliable_kafka.storage.block_store import BlockStore
    from wal import RecordHandle

logger = logging.getLogger(__name__)

Decoder = Callable[[Any], Any]

# Blocks the driver ships (driver placement) travel inside their task (a parallelized collection),
# and Spark refuses a task larger than spark.rpc.message.maxSize (128 MiB by default): partitions
# of such blocks stay well below it, whatever spark.streaming.blockRDD.maxPartitionBytes says.
_MAX_SHIPPED_PARTITION_BYTES = 32 << 20


class _SkipRecord:
    """What a decoder returns to leave a record out of the batch."""

    def __reduce__(self) -> str:
        # Pickled by name, so the one instance stays the one instance in every worker.
        return "SKIP_RECORD"

    def __repr__(self) -> str:
        return "SKIP_RECORD"


SKIP_RECORD = _SkipRecord()


class _ReadBlocks:
    """The executor-side function of a batch RDD: descriptors in, decoded records out."""

    def __init__(self, decoder: Decoder | None) -> None:
        self.decoder = decoder

    def __call__(self, _split: int, descriptors: Iterable[bytes]) -> Iterator[Any]:
        # One descriptor per partition (its blocks, in order); each block is read when the one
        # before it is used up, so a task holds one block at a time however many it has.
        blocks = chain.from_iterable(BlockPartition.decode_blocks(raw) for raw in descriptors)
        if self.decoder is None:
            return chain.from_iterable(decode_block(block.read()) for block in blocks)
        # A chunk of a block at a time, in C loops, chained without a Python step per record
        # (block_partition.decoded_records).
        return BlockPartition.decoded_blocks(blocks, self.decoder, SKIP_RECORD)


class BlockRDD(PipelinedRDD):
    """The records of a batch's blocks, in block order: each partition a run of its blocks
    (``partitions``, each a sequence of blocks that share their preferred locations).

    A plain PySpark RDD for everything downstream (``map`` etc. pipeline into the same Python
    worker); in addition it knows its blocks and, for Kafka input, its ``offsetRanges()``.
    """

    def __init__(
        self,
        sc: SparkContext,
        partitions: Sequence[Sequence[BlockPartition]],
        *,
        decoder: Decoder | None = None,
        offset_ranges: Sequence[Any] = (),
    ) -> None:
        blocks = [block for partition in partitions for block in partition]
        if any(block.location is not None for block in blocks):
            # The blocks of a partition share their preferred locations (block_grouping).
            source = located_rdd(
                sc, [(BlockPartition.encode_blocks(p), p[0].preferred_locations) for p in partitions]
            )
        else:
            source = raw_bytes_rdd(sc, [BlockPartition.encode_blocks(p) for p in partitions])
        super().__init__(source, _ReadBlocks(decoder), preservesPartitioning=False)
        self.block_ids: list[str] = [block.block_id for block in blocks]
        # Counted in blocks, not partitions.
        self.num_from_block_manager = sum(block.from_block_manager for block in blocks)
        # Blocks whose bytes the driver ships (driver placement); 0 when executors keep blocks.
        self.num_with_driver_bytes = sum(block.data is not None for block in blocks)
        self.num_from_write_ahead_log = len(blocks) - self.num_from_block_manager
        self._offset_ranges = list(offset_ranges)
        # Input metadata known only once the batch ran (counts kept by executors), merged into
        # the listener's StreamInputInfo when the batch completes.
        self.late_input_metadata: Callable[[], dict[str, Any]] | None = None

    def offsetRanges(self) -> list[Any]:
        """The Kafka offsets this batch holds, one ``OffsetRange`` per topic-partition (what the
        input stream's ``offset_ranges_of`` made of the blocks' metadata)."""
        return list(self._offset_ranges)


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
    offset_ranges: Callable[[Sequence[ReceivedBlockInfo]], Sequence[Any]] | None = None,
    max_partition_bytes: int = 0,
    parallelism: int = 1,
) -> BlockRDD:
    """Spark's ``ReceiverInputDStream.createBlockRDD``: each block from the block store when it is
    there, else from the write-ahead log; a block in neither is left out with Spark's warning.

    ``block_store`` is the driver's (driver placement) or None: then blocks are read where the
    executors keep them (``fetch_secret`` authenticates fetches from other hosts). ``wal_directory``:
    the checkpoint directory when it is remote (where the WAL handles point). ``offset_ranges``:
    the batch's ``offsetRanges()`` from the blocks it reads (the input stream's hook).
    ``max_partition_bytes`` (``spark.streaming.blockRDD.maxPartitionBytes``) and ``parallelism``
    (the context's cores) size the partitions (:mod:`~reliable_kafka.dstream.block_grouping`);
    the default, 0, gives each block a partition, as Spark does."""
    partitions: list[BlockPartition] = []
    sizes: list[int | None] = []
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
        sizes.append(_block_size(result.num_bytes, data, handle))
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
    ranges = offset_ranges(included) if offset_ranges is not None else ()
    target = target_partition_bytes(sum(size or 0 for size in sizes), parallelism, max_partition_bytes)
    if any(p.data is not None for p in partitions):
        target = min(target, _MAX_SHIPPED_PARTITION_BYTES)
    groups = group_blocks([tuple(p.preferred_locations) for p in partitions], sizes, target)
    return BlockRDD(
        sc, [partitions[group.start : group.stop] for group in groups], decoder=decoder, offset_ranges=ranges
    )


def _block_size(num_bytes: int | None, data: bytes | None, handle: RecordHandle | None) -> int | None:
    """A block's size in the block format: as its receiver reported it, else as the bytes the
    driver holds or its write-ahead log record say (blocks of earlier versions); None: unknown."""
    if num_bytes is not None:
        return num_bytes
    if data is not None:
        return len(data)
    return None if handle is None else handle.length

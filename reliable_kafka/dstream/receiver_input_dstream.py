"""Spark's ``ReceiverInputDStream``: an input stream whose data a receiver pushes in as blocks.

The receiver tracker starts the receiver that :meth:`ReceiverInputDStream.get_receiver` returns
and allocates its blocks to batches; :meth:`compute` turns the blocks of one batch into a
:class:`~reliable_kafka.dstream.batch_rdd.BlockRDD` (a partition per run of blocks kept in the
same place, or per block with ``spark.streaming.blockRDD.maxPartitionBytes=0``; each block read
from the block manager or the write-ahead log, decoded on the executors).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from reliable_kafka.dstream.batch_rdd import BlockRDD, Decoder, create_block_rdd
from reliable_kafka.dstream.input_dstream import InputDStream
from reliable_kafka.receiver.descriptor import ReceiverDescriptor, ReceiverDescriptorError
from reliable_kafka.scheduler.rate_controller import RateController, ReceiverRateController
from reliable_kafka.scheduler.rate_estimator import RateEstimator
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.util.filesystems import RemoteDirectory

if TYPE_CHECKING:
    from pyspark import RDD

    from reliable_kafka.dstream.streaming_context import StreamingContextLike
    from reliable_kafka.receiver.receiver import Receiver
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
    from reliable_kafka.scheduler.receiver_input import ReceivedBlockSource

logger = logging.getLogger(__name__)


class ReceiverInputDStream(InputDStream):
    """Subclasses implement :meth:`get_receiver`. ``decoder``, if given, maps every record after the
    block is decoded, on the executors (e.g. Kafka key/value deserialization).

    With backpressure on (``settings.backpressure.enabled``) the stream has a
    :class:`ReceiverRateController` as ``rate_controller``, which the context attaches to the
    listener bus; its rates reach this stream's receiver through the receiver tracker.
    """

    is_receiver_input: ClassVar[bool] = True

    def __init__(self, ssc: StreamingContextLike, decoder: Decoder | None = None) -> None:
        # 1 once restored from a checkpoint (context.getOrCreate): the run before launched its
        # receiver, so this driver's first launch is no first contact with the source, and a
        # source that does not answer then is an outage to ride out, not a mistake.
        self.previous_launches = 0
        super().__init__(ssc)
        self.decoder = decoder
        self._block_source: ReceivedBlockSource | None = None
        if RateController.is_back_pressure_enabled(ssc.settings):
            estimator = RateEstimator.create(ssc.settings.backpressure, ssc.batch_duration_ms)
            self.rate_controller = ReceiverRateController(self.id, estimator, self._publish_rate)

    def receiver_descriptor(self) -> ReceiverDescriptor:
        """This stream's receiver as plain data, rebuilt wherever it runs (executor placement
        needs it: receivers cross to the executors without pickle)."""
        raise ReceiverDescriptorError(
            f"{type(self).__name__} has no receiver_descriptor(), so its receiver cannot run on the "
            "executors: implement it, or set spark.streaming.receiver.placement=driver"
        )

    def preferred_location(self) -> str | None:
        """The host the receiver should run on (Spark's ``Receiver.preferredLocation``); None: any."""
        return None

    def get_receiver(self) -> Receiver:
        """A new receiver for this stream; called for every (re)start of the receiver, as Spark
        ships a fresh copy of the receiver each time it launches it."""
        return self.receiver_descriptor().build()

    def stop(self) -> None:
        if self.rate_controller is not None:
            self.rate_controller.stop()

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        tracker = self._attached_block_source()
        # A batch from before this run's start has the blocks the metadata log still holds for it
        # (none without the log): a stateful stream restored from a state checkpoint recomputes
        # the batches after it from them, as Spark's recovered input streams do.
        block_infos: list[ReceivedBlockInfo] = tracker.get_blocks_of_batch_and_stream(valid_time_ms, self.id)
        receiver_settings = self._ssc.settings.receiver
        tls = receiver_settings.tls()
        max_partition_bytes = receiver_settings.block_rdd_max_partition_bytes
        return create_block_rdd(
            self._sc,
            block_infos,
            tracker.block_store,
            decoder=self.decoder,
            receiver_wal_enabled=self._ssc.settings.wal.enable,
            fetch_secret=tracker.block_fetch_secret,
            fetch_tls_ca=None if tls is None else tls.trusted_cas,
            recovery_source=self.block_recovery_source,
            wal_directory=RemoteDirectory.configured(self._ssc.checkpoint_dir),
            offset_ranges=self.offset_ranges_of,
            max_partition_bytes=max_partition_bytes,
            # A py4j call: only when it sizes partitions.
            parallelism=self._sc.defaultParallelism if max_partition_bytes and block_infos else 1,
        )

    def offset_ranges_of(self, block_infos: Sequence[ReceivedBlockInfo]) -> list[Any]:
        """What the batch's ``offsetRanges()`` returns, from the metadata of its blocks (Kafka
        input streams override it); none here."""
        return []

    def late_input_metadata(self, time_ms: int) -> Callable[[], dict[str, Any]] | None:
        """What the batch's input info learns only once its jobs ran (counts kept by the
        executors); None: nothing."""
        rdd = self.generated_rdds.get(time_ms)
        return rdd.late_input_metadata if isinstance(rdd, BlockRDD) else None

    def block_recovery_source(self, info: ReceivedBlockInfo) -> dict[str, Any] | None:
        """Where a block read from the write-ahead log can be read again if its record is
        unreadable (see ``storage.block_recovery``); None: nowhere, the batch fails."""
        return None

    def release_rdd(self, time_ms: int, rdd: RDD[Any]) -> None:
        """Spark's ``BlockRDD.removeBlocks``: a forgotten batch's blocks leave the block manager."""
        super().release_rdd(time_ms, rdd)
        if isinstance(rdd, BlockRDD):
            self._attached_block_source().remove_blocks([StreamBlockId.parse(name) for name in rdd.block_ids])

    def attach_block_source(self, source: ReceivedBlockSource) -> None:
        """The receiver tracker this stream's blocks come from (the context attaches it at start)."""
        self._block_source = source

    def _attached_block_source(self) -> ReceivedBlockSource:
        source = self._block_source
        if source is None:
            raise RuntimeError(f"{self} has no receiver tracker: the streaming context has not started")
        return source

    def _publish_rate(self, stream_id: int, rate: int) -> None:
        source = self._block_source
        if source is not None:
            source.send_rate_update(stream_id, rate)

"""``spark.readStream.format("reliable-kafka")``: Spark's Kafka source that keeps a consumer group.

A Python data source (pyspark 4.2+). Where the query's offsets come from and go to:

1. Start (``initialOffset``, a query without a checkpoint): each partition from the group's
   committed offset, in the store ``createStream`` used (ZooKeeper's 0.8 layout, Kafka's group
   coordinator, or both: ``kafka.offsets.registry``); ``startingOffsets`` only for partitions
   the group never committed. A restarted query starts from its checkpoint: Spark asks no
   source for a start then.
2. Plan (``latestOffset``): each partition's log end, bounded by ``maxOffsetsPerTrigger`` (the
   read limit) and, under ``Trigger.AvailableNow``, by the log ends seen when the query began.
   A partition that appears later (a topic grew, or ``subscribePattern`` matched a new topic)
   starts at its log start, as in Spark's source.
3. Read (``read``, on the executors): each partition's exact range, as Arrow record batches
   (``arrow_records``).
4. Commit: the group gets a batch's end only once the batch is in the query's commit log, so
   it is never ahead of what Spark committed. Spark's own hook, ``commit(end)``, comes late: it
   runs while the *next* batch is planned, so a query that reached the end of its data (an
   AvailableNow run's last batch, an idle stream) would leave the group one batch behind for as
   long as no new data comes. So ``latestOffset(start)`` commits ``start`` as well: Spark plans
   a batch only after the batch before it is in the commit log, and ``start`` is that batch's
   end (but for the first call of a new query, whose ``start`` is the group's own position). The
   store refuses to move an offset backwards (a query restarted from an older checkpoint leaves
   the group where it is until it passes it). A failed commit is a WARNING, not a failed query:
   the next batch's end is committed in its turn.

The driver side (1, 2, 4) runs in a Python worker Spark keeps for the query; it holds one lookup
client and the group's store, opened on first use and closed with the query.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.kafka_cluster import KafkaCluster
from reliable_kafka.kafka.direct.offset_commit import GroupStore, open_group_store
from reliable_kafka.kafka.offsets.store import log_refusals
from reliable_kafka.sql.options import EARLIEST, LATEST, KafkaSourceOptions
from reliable_kafka.sql.source_offsets import PartitionOffsets, admitted, from_json, to_json

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

FORMAT = "reliable-kafka"

_HEADERS = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``KafkaRecordToRowConverter``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    return StructType([*fields, _HEADERS] if include_headers else fields)


class ReliableKafkaSource(DataSource):
    """The data source Spark instantiates with the query's options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        # Called by load(): bad options fail there, before any query starts.
        options = KafkaSourceOptions.of(self.options)
        if options.subscribe is not None or options.assign is not None:
            _check_topics_exist(options)
        return kafka_schema(options.include_headers)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ReliableKafkaStreamReader(KafkaSourceOptions.of(self.options), schema)


def _check_topics_exist(options: KafkaSourceOptions) -> None:
    cluster = KafkaCluster(options.reader_params())
    try:
        wanted = options.subscribe or sorted({tp.topic for tp in options.assign or ()})
        existing = set(cluster.topics())
        missing = [topic for topic in wanted if topic not in existing]
        if missing:
            raise ValueError(
                f'format "reliable-kafka": topic {", ".join(map(repr, missing))} does not exist in Kafka '
                f"({options.kafka['bootstrap.servers']})"
            )
    finally:
        cluster.close()


class ReliableKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One query's reader: the driver's calls and the executors' reads (a copy per task)."""

    def __init__(
        self,
        options: KafkaSourceOptions,
        schema: StructType,
        *,
        lookups: KafkaCluster | None = None,
        group: GroupStore | None = None,
    ) -> None:
        self._options = options
        self._schema = schema
        # Opened on first use unless handed in: the executors' copies read ranges only, and
        # never open them.
        self._cluster = lookups
        self._group = group
        # Trigger.AvailableNow: the log ends when the query began; None otherwise.
        self._target: PartitionOffsets | None = None
        # The start initialOffset gave (nothing committed yet: not the group's to get), and what
        # the group last got from this reader (an idle query plans every few milliseconds).
        self._initial: PartitionOffsets | None = None
        self._committed: PartitionOffsets = {}

    # -- the driver's side -------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        if self._initial is not None:
            # Spark asks again within one start (Trigger.AvailableNow's wrapper, then the first
            # batch's planning): the same answer, without a second round of lookups.
            return to_json(self._initial)
        partitions = self._partitions()
        committed = self._group_store().store.fetch(partitions)
        start = {tp: offset for tp, offset in committed.items() if offset is not None}
        rest = [tp for tp in partitions if tp not in start]
        if rest:
            start.update(self._starting_offsets(rest))
        logger.info(
            "%s: group %s starts from its committed offsets on %d of %d partitions",
            FORMAT,
            self._options.group_id,
            len(partitions) - len(rest),
            len(partitions),
        )
        self._initial = dict(start)
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._log_ends(self._partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json(start)
        if begin != self._initial:
            self._commit_group(begin)  # the end of the batch Spark committed last
        partitions = self._partitions()
        new = [tp for tp in partitions if tp not in begin]
        if new:
            begin.update(self._log_starts(new))
        latest = self._log_ends(partitions)
        if self._target is not None:
            # Nothing past the ends seen at the start, nothing of a partition that came later.
            latest = {tp: min(end, self._target.get(tp, begin[tp])) for tp, end in latest.items()}
        latest = {tp: max(end, begin[tp]) for tp, end in latest.items()}  # never behind the start
        if isinstance(limit, ReadMaxRows):
            latest = admitted({tp: begin[tp] for tp in latest}, latest, limit.max_rows)
        # Partitions that went away keep their offsets: the JSON never drops what it had.
        return to_json({**from_json(start), **latest})

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin, until = from_json(start), from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self._log_starts(new))
        ranges = [OffsetRange(tp.topic, tp.partition, begin[tp], until[tp]) for tp in sorted(until)]
        # Plain data: pyspark pickles the partitions it hands the executors.
        return [InputPartition(r.to_dict()) for r in ranges if r.count() > 0]

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_group(from_json(end))

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._group is not None:
            self._group.close()
            self._group = None

    # -- the executors' side -----------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Imported here: the driver's side (a fresh Python process per query, which Spark starts
        # before the first batch) needs neither pyarrow nor the fetch path.
        from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

        from reliable_kafka.sql.arrow_records import read_batches  # noqa: PLC0415

        wanted = OffsetRange.from_metadata(partition.value)
        yield from read_batches(
            self._options.reader_params(),
            wanted,
            to_arrow_schema(self._schema, timezone="UTC"),
            fail_on_data_loss=self._options.fail_on_data_loss,
        )

    # -- helpers -----------------------------------------------------------------------------

    def _commit_group(self, offsets: PartitionOffsets) -> None:
        if all(self._committed.get(tp) == offset for tp, offset in offsets.items()):
            return
        # Tried once per batch end, failed or not: an idle query plans every few milliseconds,
        # and a store that is down would be asked (and logged) as often.
        self._committed.update(offsets)
        try:
            results = self._group_store().store.commit(offsets)
        except Exception as exc:
            logger.warning(
                "%s: committing a batch's end to group %s failed (the next batch's end is committed "
                "in its turn): %r",
                FORMAT,
                self._options.group_id,
                exc,
            )
            return
        log_refusals(logger, offsets, results, group=self._options.group_id)

    def _lookups(self) -> KafkaCluster:
        if self._cluster is None:
            self._cluster = KafkaCluster(self._options.reader_params())
        return self._cluster

    def _group_store(self) -> GroupStore:
        if self._group is None:
            self._group = open_group_store(self._options.group_params())
        return self._group

    def _partitions(self) -> list[TopicAndPartition]:
        options = self._options
        if options.assign is not None:
            return list(options.assign)
        cluster = self._lookups()
        if options.subscribe is not None:
            return cluster.partitions(options.subscribe)
        pattern = re.compile(options.subscribe_pattern or "")
        return cluster.partitions([topic for topic in cluster.topics() if pattern.fullmatch(topic)])

    def _log_starts(self, partitions: list[TopicAndPartition]) -> PartitionOffsets:
        return {tp: first for tp, (first, _) in self._lookups().offsets(partitions).items()}

    def _log_ends(self, partitions: list[TopicAndPartition]) -> PartitionOffsets:
        return self._lookups().latest_offsets(partitions)

    def _starting_offsets(self, partitions: list[TopicAndPartition]) -> PartitionOffsets:
        """``startingOffsets`` of partitions the group never committed."""
        logs = self._lookups().offsets(partitions)
        starting = self._options.starting_offsets
        chosen: PartitionOffsets = {}
        for tp in partitions:
            first, end = logs[tp]
            if isinstance(starting, Mapping):
                given = starting.get(tp, LATEST)
                chosen[tp] = first if given == EARLIEST else end if given == LATEST else given
            else:
                chosen[tp] = first if starting == "earliest" else end
        return chosen

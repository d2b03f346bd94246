"""Which receiver reads each Kafka partition, for the status page's partition table.

Several streams may read one group (one ``createStream`` per receiver, as Spark's guide
suggests): their partitions are told apart by the offset ranges of the blocks each stream
delivered, not by the group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reliable_kafka.kafka.client.offset_range import ranges_in_metadata
from reliable_kafka.scheduler.batch_input_info import BLOCKS_KEY
from reliable_kafka.ui.lag import LagSource
from reliable_kafka.ui.status_store import StatusSnapshot


@dataclass(frozen=True, slots=True)
class PartitionReceivers:
    """Which receiver reads each partition: the one that last delivered its records, else the
    group's only receiver, else none known ("-")."""

    delivered: Mapping[tuple[str, str, int], str]
    only_receiver_of_group: Mapping[str, str]

    def of(self, group: str, topic: str, partition: int) -> str:
        found = self.delivered.get((group, topic, partition))
        return found if found is not None else self.only_receiver_of_group.get(group, "-")


def receivers_of_partitions(sources: Sequence[LagSource], snapshot: StatusSnapshot) -> PartitionReceivers:
    """From the offset ranges of the retained batches' blocks."""
    names = {status.info.stream_id: status.info.name for status in snapshot.receivers}
    group_of_stream = {stream_id: s.group for s in sources for stream_id in s.receiver_stream_ids}
    receivers: dict[tuple[str, str, int], str] = {}
    for batch in (*snapshot.completed, *snapshot.running):  # oldest first: the last delivery wins
        for stream_id, info in batch.stream_id_to_input_info.items():
            group = group_of_stream.get(stream_id)
            if group is None:
                continue
            name = names.get(stream_id, f"stream {stream_id}")
            for block in info.metadata.get(BLOCKS_KEY, ()):
                for offset_range in ranges_in_metadata(block.get("metadata")):
                    receivers[(group, offset_range.topic, offset_range.partition)] = name
    only_receiver = {
        s.group: names.get(s.receiver_stream_ids[0], f"stream {s.receiver_stream_ids[0]}")
        for s in sources
        if len(s.receiver_stream_ids) == 1
    }
    return PartitionReceivers(receivers, only_receiver)

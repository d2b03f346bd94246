"""The supervisor/tracker seam: messages are plain data that survive msgpack, not pickle."""

from __future__ import annotations

import msgpack
import pytest

from reliable_kafka.receiver import (
    ReceivedBlockInfo,
    ReceivedBlockStoreResult,
    ReceiverControl,
    ReceiverTrackerEndpoint,
)
from reliable_kafka.receiver.receiver_supervisor import _SupervisorControl
from reliable_kafka.storage import StreamBlockId
from tests.support.receiver_fakes import FakeTracker
from wal import RecordHandle


def over_the_wire(d: dict) -> dict:
    return msgpack.unpackb(msgpack.packb(d, use_bin_type=True), raw=False)


@pytest.mark.parametrize(
    "result",
    [
        ReceivedBlockStoreResult(StreamBlockId(1, 42), 10),
        ReceivedBlockStoreResult(StreamBlockId(1, 43), None, RecordHandle("/ckpt/log-1-2", 0, 99)),
        ReceivedBlockStoreResult(StreamBlockId(1, 44), 10, num_bytes=1234),
    ],
)
def test_block_info_round_trips_through_msgpack(result: ReceivedBlockStoreResult) -> None:
    info = ReceivedBlockInfo(1, result.num_records, {"topic": "events", "offsets": [1, 2]}, result)
    assert ReceivedBlockInfo.from_dict(over_the_wire(info.to_dict())) == info
    assert info.block_id == result.block_id


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stream_id": "1"}, "stream_id: expected int"),
        ({"num_records": True}, "num_records: expected int or NoneType"),
        ({"metadata": [1]}, "metadata: expected dict or NoneType"),
        ({"block_store_result": None}, "block_store_result: expected dict"),
    ],
)
def test_malformed_block_info_is_rejected_with_the_field_named(change: dict, message: str) -> None:
    d = ReceivedBlockInfo(1, 3, None, ReceivedBlockStoreResult(StreamBlockId(1, 1), 3)).to_dict()
    d.update(change)
    with pytest.raises(ValueError, match=message):
        ReceivedBlockInfo.from_dict(d)


def test_negative_record_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="num_records"):
        ReceivedBlockStoreResult(StreamBlockId(1, 1), -1)
    with pytest.raises(ValueError, match="num_bytes"):
        ReceivedBlockStoreResult(StreamBlockId(1, 1), 1, num_bytes=-1)


def test_fakes_and_the_supervisor_control_satisfy_the_protocols() -> None:
    assert isinstance(FakeTracker(), ReceiverTrackerEndpoint)
    assert issubclass(_SupervisorControl, ReceiverControl)

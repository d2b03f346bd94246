"""Input streams' own checkpoint data (Spark's ``DStreamCheckpointData``): plain JSON in the driver
checkpoint, handed back to the stream of the same id and kind by getOrCreate."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka.checkpoint import Checkpoint, CheckpointError, InputStreamRecord, write_checkpoint
from reliable_kafka.context import StreamingContext
from reliable_kafka.dstream.queue_input_dstream import QueueInputDStream
from tests.streaming.sample_checkpoint import CHECKPOINT


class RememberingStream(QueueInputDStream):
    def __init__(self, ssc: StreamingContext) -> None:
        super().__init__(ssc, [])
        self.restored: dict[str, Any] | None = None

    def checkpoint_data(self) -> dict[str, Any]:
        return {"next": 7}

    def restore_checkpoint_data(self, data: dict[str, Any]) -> None:
        self.restored = data


def test_record_data_round_trips_and_older_records_have_none() -> None:
    record = InputStreamRecord(
        0, "RememberingStream", False, {"next": 7, "batches": {"1000": [["t", 0, 1, 2]]}}
    )
    assert InputStreamRecord.from_dict(record.to_dict()) == record
    assert "data" not in InputStreamRecord(1, "QueueInputDStream", False).to_dict()
    assert InputStreamRecord.from_dict({"id": 1, "kind": "Q", "is_receiver_input": False}).data is None
    with pytest.raises(ValueError, match="input stream data must be an object"):
        InputStreamRecord.from_dict({"id": 1, "kind": "Q", "is_receiver_input": False, "data": [1]})


def test_get_or_create_hands_each_stream_its_data(sc: SparkContext, tmp_path: Path) -> None:
    built: list[RememberingStream] = []

    def setup() -> StreamingContext:
        ssc = StreamingContext(sc, 1)
        stream = RememberingStream(ssc)
        stream.foreachRDD(lambda rdd: None)
        built.append(stream)
        return ssc

    checkpoint: Checkpoint = dataclasses.replace(
        CHECKPOINT, input_streams=(InputStreamRecord(0, "RememberingStream", False, {"next": 7}),)
    )
    write_checkpoint(tmp_path, checkpoint)
    StreamingContext.getOrCreate(str(tmp_path), setup)
    assert built[-1].restored == {"next": 7}

    elsewhere = dataclasses.replace(
        CHECKPOINT, input_streams=(InputStreamRecord(3, "RememberingStream", False, {"next": 7}),)
    )
    write_checkpoint(tmp_path, elsewhere)
    with pytest.raises(CheckpointError, match=r"data of input stream 3 \(RememberingStream\)"):
        StreamingContext.getOrCreate(str(tmp_path), setup)

"""The driver checkpoint file, and getOrCreate with and without one."""

from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path

import pytest

from reliable_kafka.checkpoint import (
    CheckpointError,
    InputStreamRecord,
    read_checkpoint,
    write_checkpoint,
)
from reliable_kafka.context import StreamingContext
from reliable_kafka.util.clock import ManualClock
from tests.streaming.fakes import FakeReceiverInputStream, FakeReceiverTracker, batch_ms, processed
from tests.streaming.sample_checkpoint import CHECKPOINT
from tests.support import wait_until


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_round_trip_atomic_write_and_permissions(tmp_path) -> None:
    directory = tmp_path / "new" / "checkpoint"
    path = write_checkpoint(directory, CHECKPOINT)
    assert path == directory / "metadata"
    assert read_checkpoint(directory) == CHECKPOINT
    assert mode(path) == 0o600
    assert mode(directory) == 0o700
    write_checkpoint(directory, CHECKPOINT)
    assert sorted(p.name for p in directory.iterdir()) == ["metadata"]  # no temp files left
    # Plain data only: the file is JSON a human can read.
    assert json.loads(path.read_text())["last_generated_batch_time_ms"] == 3000


def test_missing_checkpoint_is_none_and_corrupt_one_is_a_clear_error(tmp_path) -> None:
    assert read_checkpoint(tmp_path / "nothing-here") is None
    assert read_checkpoint(tmp_path) is None
    (tmp_path / "metadata").write_bytes(b'{"format": "reliable-kafka-driver-checkpoint", "vers')
    with pytest.raises(CheckpointError, match=r"delete .*metadata"):
        read_checkpoint(tmp_path)
    document = CHECKPOINT.to_dict() | {"zero_time_ms": True}
    (tmp_path / "metadata").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="zero_time_ms must be an integer"):
        read_checkpoint(tmp_path)
    (tmp_path / "metadata").write_text(json.dumps(CHECKPOINT.to_dict() | {"version": 99}))
    with pytest.raises(CheckpointError, match="unsupported checkpoint version"):
        read_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="nosuchfs"):  # a scheme no filesystem implements
        read_checkpoint("nosuchfs://namenode/checkpoints")
    assert read_checkpoint(f"file://{tmp_path}/nothing") is None


def make_setup(sc, clock: ManualClock, tracker: FakeReceiverTracker, times: list[int], calls: list[int]):
    def setup() -> StreamingContext:
        calls.append(1)
        ssc = StreamingContext(sc, 1, clock=clock, receiver_tracker_factory=lambda _ssc: tracker)
        stream = FakeReceiverInputStream(ssc)
        stream.foreachRDD(lambda time, rdd: times.append(batch_ms(time)))
        return ssc

    return setup


def test_get_or_create_without_then_with_a_checkpoint(sc, tmp_path) -> None:
    checkpoint_dir = str(tmp_path / "cp")
    calls: list[int] = []

    # First run: no checkpoint yet, so setupFunc builds a fresh context.
    clock, tracker, times = ManualClock(0), FakeReceiverTracker(), []
    ssc = StreamingContext.getOrCreate(checkpoint_dir, make_setup(sc, clock, tracker, times, calls))
    assert calls == [1] and ssc.initial_checkpoint is None
    assert [s.previous_launches for s in ssc.graph.get_receiver_input_streams()] == [0]
    assert ssc.checkpoint_dir == str(Path(checkpoint_dir).absolute())
    ssc.start()
    try:
        for time_ms in (1000, 2000, 3000):
            clock.set_time(time_ms)
            wait_until(lambda t=time_ms: processed(ssc, t), what=f"batch {time_ms}")
    finally:
        ssc.stop(stopSparkContext=False)
    assert times == [1000, 2000, 3000]
    written = read_checkpoint(checkpoint_dir)
    assert written is not None
    assert (written.zero_time_ms, written.last_generated_batch_time_ms, written.pending_times_ms) == (
        0,
        3000,
        (),
    )
    assert mode(Path(checkpoint_dir) / "metadata") == 0o600

    # Second run, at 6.5 s: setupFunc runs again, the metadata is restored, and the batches the
    # driver was down for (4-6 s) run, as does 2 s, which the tracker recovered as unfinished.
    clock, tracker, times = ManualClock(6500), FakeReceiverTracker(), []
    tracker.recovered_pending = [2000]
    restored = StreamingContext.getOrCreate(checkpoint_dir, make_setup(sc, clock, tracker, times, calls))
    assert calls == [1, 1]
    assert restored.initial_checkpoint == written
    # Its receiver reached its source before: this driver's first launch is no first contact.
    assert [s.previous_launches for s in restored.graph.get_receiver_input_streams()] == [1]
    restored.start()
    try:
        wait_until(lambda: processed(restored, 6000), what="regenerated batches")
        assert restored.graph.zero_time_ms == 0
        clock.set_time(7000)
        wait_until(lambda: processed(restored, 7000), what="first new batch")
    finally:
        restored.stop(stopSparkContext=False)
    assert times == [2000, 4000, 5000, 6000, 7000]
    assert [t for name, t in tracker.calls if name == "allocate"][:4] == [2000, 4000, 5000, 6000]
    assert read_checkpoint(checkpoint_dir).last_generated_batch_time_ms == 7000


def test_get_or_create_refuses_a_checkpoint_it_cannot_line_up_with(sc, tmp_path) -> None:
    calls: list[int] = []

    def setup(batch_s: float = 1, receivers: int = 1):
        def build() -> StreamingContext:
            calls.append(1)
            ssc = StreamingContext(sc, batch_s, receiver_tracker_factory=FakeReceiverTracker)
            for _ in range(receivers):
                FakeReceiverInputStream(ssc).foreachRDD(lambda rdd: None)
            return ssc

        return build

    with_receiver = dataclasses.replace(
        CHECKPOINT, input_streams=(InputStreamRecord(0, "FakeReceiverInputStream", True),)
    )
    write_checkpoint(tmp_path, with_receiver)
    with pytest.raises(CheckpointError, match="batch duration of 1000 ms"):
        StreamingContext.getOrCreate(str(tmp_path), setup(batch_s=2))
    with pytest.raises(CheckpointError, match="same receiver streams in the same order"):
        StreamingContext.getOrCreate(str(tmp_path), setup(receivers=2))
    assert StreamingContext.getOrCreate(str(tmp_path), setup()).initial_checkpoint == with_receiver

    (tmp_path / "metadata").write_text("not json")
    calls.clear()
    with pytest.raises(CheckpointError):
        StreamingContext.getOrCreate(str(tmp_path), setup())
    assert calls == []  # a corrupt checkpoint fails before anything is built

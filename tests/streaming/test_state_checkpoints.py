"""State checkpoints (issue 24): stateful streams write their state to the checkpoint directory and a
restarted driver (``getOrCreate``) continues from it, with the same results as a run never
interrupted; damaged files are never loaded; another graph's checkpoint is refused.

The input is a function of the batch time (as a direct stream's ranges are), so a restarted run
can recompute the batches after the restored state as a receiver stream does from its WAL.
"""

from __future__ import annotations

import operator
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark import RDD, SparkContext

from reliable_kafka.checkpoint import CheckpointError, read_checkpoint
from reliable_kafka.context import StreamingContext
from reliable_kafka.dstream.dstream import DStream
from reliable_kafka.dstream.input_dstream import InputDStream
from reliable_kafka.state_checkpoint import STATE_DIR
from reliable_kafka.util.clock import ManualClock
from tests.streaming.fakes import processed
from tests.support import wait_until

BATCH_MS = 1000


def words_of_batch(index: int) -> list[str]:
    """Batch ``index``'s words (index 1 is the first batch): keys come, go and come back."""
    words = ["a"] * (index % 3) + ["b"] * (index % 2) + [f"k{index % 4}"]
    return words if index % 5 else []  # every fifth batch is empty


class TimedInputDStream(InputDStream):
    """Each batch's RDD is a pure function of its time: replayable, as a direct stream is."""

    def __init__(self, ssc: StreamingContext, records_of: Callable[[int], list[Any]]) -> None:
        super().__init__(ssc)
        self._records_of = records_of

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        assert self.zero_time_ms is not None
        index = (valid_time_ms - self.zero_time_ms) // BATCH_MS
        return self._sc.parallelize(self._records_of(index), 2)


def running_total(values: list[int], total: int | None) -> int | None:
    new = (total or 0) + sum(values)
    return new if new else None


def other_total(values: list[int], total: int | None) -> int | None:
    return (total or 0) + sum(values)


class App:
    """One driver run: a context on a manual clock, its outputs by batch time."""

    def __init__(self, ssc: StreamingContext, clock: ManualClock) -> None:
        self.ssc = ssc
        self.clock = clock
        self.outputs: dict[int, list[Any]] = {}

    def advance_to(self, time_ms: int) -> None:
        if self.ssc.getState().value == "INITIALIZED":
            self.ssc.start()
        while self.clock.get_time_ms() < time_ms:
            target = (self.clock.get_time_ms() // BATCH_MS + 1) * BATCH_MS
            self.clock.set_time(target)
            wait_until(
                lambda t=target: processed(self.ssc, t), timeout_s=120, what=f"batch {target} to be processed"
            )
            self.ssc.awaitTerminationOrTimeout(0)

    def crash(self) -> None:
        """What the checkpoint directory keeps of a driver that dies now (not a graceful stop)."""
        self.ssc.stop(stopSparkContext=False)


Build = Callable[[StreamingContext], DStream]


def state_app(update: Callable[[list[int], int | None], int | None] = running_total) -> Build:
    def build(ssc: StreamingContext) -> DStream:
        pairs = TimedInputDStream(ssc, words_of_batch).map(lambda w: (w, 1))
        return pairs.updateStateByKey(update).checkpoint(2)

    return build


def window_app(ssc: StreamingContext) -> DStream:
    pairs = TimedInputDStream(ssc, words_of_batch).map(lambda w: (w, 1))
    # Window of 6 slides: reduced incrementally (inverse reduce), checkpointed every 2 batches.
    return pairs.reduceByKeyAndWindow(operator.add, operator.sub, 6, 1).checkpoint(2)


_APPS: dict[str, Build] = {"updateStateByKey": state_app(), "window_inverse": window_app}


_STARTED: list[App] = []


@pytest.fixture(autouse=True)
def _stop_apps() -> Iterator[None]:
    """A failed test's context must not keep the next test's from starting (one active at a time)."""
    yield
    while _STARTED:
        _STARTED.pop().crash()


def start_app(sc: SparkContext, checkpoint: Path | None, build: Build, now_ms: int = 0) -> App:
    clock = ManualClock(now_ms)
    holder: dict[str, App] = {}

    def setup() -> StreamingContext:
        ssc = StreamingContext(sc, BATCH_MS / 1000, clock=clock)
        app = holder["app"] = App(ssc, clock)
        _STARTED.append(app)

        def keep(time: Any, rdd: RDD[Any]) -> None:
            app.outputs[round(time.timestamp() * 1000)] = sorted(rdd.collect())

        build(ssc).foreachRDD(keep)
        return ssc

    if checkpoint is None:
        setup()
    else:
        StreamingContext.getOrCreate(str(checkpoint), setup)
    return holder["app"]


def uninterrupted(sc: SparkContext, build: Build, until_ms: int) -> dict[int, list[Any]]:
    app = start_app(sc, None, build)
    try:
        app.advance_to(until_ms)
    finally:
        app.crash()
    return app.outputs


# The longest run a test compares with. A batch's output is a function of the batches up to it, so
# one uninterrupted run per application serves every test of it, each taking the times it needs:
# half the batches this file would otherwise run (each a few Spark jobs).
_HORIZON_MS = 16_000
_UNINTERRUPTED: dict[str, dict[int, list[Any]]] = {}


def expected_outputs(sc: SparkContext, name: str, until_ms: int) -> dict[int, list[Any]]:
    """What the application ``name`` (an id of :data:`_APPS`) outputs up to ``until_ms``, run
    uninterrupted."""
    assert until_ms <= _HORIZON_MS
    if name not in _UNINTERRUPTED:
        _UNINTERRUPTED[name] = uninterrupted(sc, _APPS[name], _HORIZON_MS)
    return {t: v for t, v in _UNINTERRUPTED[name].items() if t <= until_ms}


def snapshot_dirs(checkpoint: Path) -> list[str]:
    return sorted(p.name for p in (checkpoint / STATE_DIR).iterdir())


@pytest.mark.parametrize("name", list(_APPS))
def test_a_restarted_driver_continues_from_the_state_checkpoint(
    sc: SparkContext, tmp_path: Path, name: str
) -> None:
    build = _APPS[name]
    expected = expected_outputs(sc, name, 16_000)
    checkpoint = tmp_path / "checkpoint"
    first = start_app(sc, checkpoint, build)
    first.advance_to(9_000)  # state written at 8 s; batch 9 s completed after it
    first.crash()
    recorded = read_checkpoint(checkpoint)
    assert recorded is not None
    assert [s.time_ms for s in recorded.state_streams[0].snapshots] == [6_000, 8_000]

    second = start_app(sc, checkpoint, build, now_ms=9_000)
    second.advance_to(16_000)
    second.crash()

    assert first.outputs == {t: v for t, v in expected.items() if t <= 9_000}
    assert second.outputs == {t: v for t, v in expected.items() if t > 9_000}


def test_a_restart_recomputes_the_batches_after_the_snapshot_and_those_it_was_down_for(
    sc: SparkContext, tmp_path: Path
) -> None:
    build = _APPS["updateStateByKey"]
    expected = expected_outputs(sc, "updateStateByKey", 14_000)
    checkpoint = tmp_path / "checkpoint"
    first = start_app(sc, checkpoint, build)
    first.advance_to(7_000)  # snapshot at 6 s; 7 s only in the input
    first.crash()
    # Down for three batches: 8, 9 and 10 s run (late) on restart, from the state of 6 s and input of 7 s.
    second = start_app(sc, checkpoint, build, now_ms=10_500)
    second.advance_to(14_000)
    second.crash()
    assert second.outputs == {t: v for t, v in expected.items() if t > 7_000}


@pytest.mark.parametrize("name", list(_APPS))
def test_a_driver_dead_before_its_first_state_checkpoint_is_recomputed_from_the_start(
    sc: SparkContext, tmp_path: Path, name: str
) -> None:
    build = _APPS[name]
    expected = expected_outputs(sc, name, 6_000)
    checkpoint = tmp_path / "checkpoint"
    first = start_app(sc, checkpoint, build)
    first.advance_to(1_000)  # the first state checkpoint would be at 2 s
    first.crash()
    second = start_app(sc, checkpoint, build, now_ms=3_500)
    second.advance_to(6_000)
    second.crash()
    assert second.outputs == {t: v for t, v in expected.items() if t > 1_000}


def test_old_state_checkpoints_go_and_files_are_owner_only(sc: SparkContext, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    app = start_app(sc, checkpoint, state_app())
    app.advance_to(12_000)
    app.crash()
    # The two newest snapshots stay (the older is the fallback); the four before them went.
    assert snapshot_dirs(checkpoint) == ["0-10000", "0-12000"]
    state = checkpoint / STATE_DIR
    for path in [state, *state.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    assert not [p for p in state.rglob(".*")], "temporary files left"


def damage(checkpoint: Path, snapshot_dir: str, how: str) -> Path:
    target = sorted((checkpoint / STATE_DIR / snapshot_dir).iterdir())[0]
    data = target.read_bytes()
    if how == "truncate":
        target.write_bytes(data[: len(data) // 2])
    elif how == "flip":
        middle = len(data) // 2
        target.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    else:
        target.unlink()
    return target


@pytest.fixture(scope="module")
def crashed_at_9_s(sc: SparkContext, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkpoint of a driver of the state application that died after its 9 s batch (state
    snapshots of 6 s and 8 s): made once, each damage test damages a copy of its own."""
    checkpoint = tmp_path_factory.mktemp("crashed-at-9-s") / "checkpoint"
    first = start_app(sc, checkpoint, _APPS["updateStateByKey"])
    first.advance_to(9_000)
    first.crash()
    assert expected_outputs(sc, "updateStateByKey", 9_000) == first.outputs
    return checkpoint


def copy_of(checkpoint: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "checkpoint"
    shutil.copytree(checkpoint, copy)
    return copy


@pytest.mark.parametrize("how", ["truncate", "flip", "delete"])
def test_a_damaged_snapshot_falls_back_to_the_one_before(
    sc: SparkContext, tmp_path: Path, crashed_at_9_s: Path, how: str
) -> None:
    build = _APPS["updateStateByKey"]
    expected = expected_outputs(sc, "updateStateByKey", 12_000)
    checkpoint = copy_of(crashed_at_9_s, tmp_path)
    damage(checkpoint, "0-8000", how)

    second = start_app(sc, checkpoint, build, now_ms=9_000)
    assert second.ssc.graph.checkpointed_streams()[0].restored_state_time_ms == 6_000
    second.advance_to(12_000)
    second.crash()
    assert second.outputs == {t: v for t, v in expected.items() if t > 9_000}


def test_no_intact_snapshot_is_refused_naming_the_file(
    sc: SparkContext, tmp_path: Path, crashed_at_9_s: Path
) -> None:
    checkpoint = copy_of(crashed_at_9_s, tmp_path)
    newer = damage(checkpoint, "0-8000", "truncate")
    older = damage(checkpoint, "0-6000", "flip")
    with pytest.raises(CheckpointError) as raised:
        start_app(sc, checkpoint, state_app(), now_ms=9_000)
    message = str(raised.value)
    assert f"0-8000/{newer.name}" in message and "truncated" in message
    assert f"0-6000/{older.name}" in message and "SHA-256" in message


def test_a_checkpoint_of_another_state_function_is_refused(sc: SparkContext, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    first = start_app(sc, checkpoint, state_app())
    first.advance_to(3_000)
    first.crash()
    with pytest.raises(CheckpointError, match="other_total"):
        start_app(sc, checkpoint, state_app(other_total), now_ms=3_000)
    with pytest.raises(CheckpointError, match="ReducedWindowedDStream"):
        start_app(sc, checkpoint, window_app, now_ms=3_000)


def test_values_that_are_not_plain_data_round_trip_pickled(sc: SparkContext, tmp_path: Path) -> None:
    def build(ssc: StreamingContext) -> DStream:
        pairs = TimedInputDStream(ssc, words_of_batch).map(lambda w: (w, 1))
        return pairs.updateStateByKey(lambda vs, s: (s or frozenset()) | {len(vs)}).checkpoint(2)

    checkpoint = tmp_path / "checkpoint"
    expected = uninterrupted(sc, build, 6_000)
    first = start_app(sc, checkpoint, build)
    first.advance_to(4_000)
    first.crash()
    recorded = read_checkpoint(checkpoint)
    assert recorded is not None
    # Files of partitions with records are pickled; an empty partition is plain data all the same.
    assert "python" in {f.codec for f in recorded.state_streams[0].snapshots[-1].files}
    second = start_app(sc, checkpoint, build, now_ms=4_000)
    second.advance_to(6_000)
    second.crash()
    assert second.outputs == {t: v for t, v in expected.items() if t > 4_000}
    assert os.listdir(checkpoint / STATE_DIR)

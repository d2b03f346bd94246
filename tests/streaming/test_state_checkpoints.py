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
# The state's partitions: two still spread its keys over several partitions and snapshot files;
# the session's default of four made each batch run half as many tasks again (a batch ~1.7 times
# as long on a loaded machine).
STATE_PARTITIONS = 2


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
        return pairs.updateStateByKey(update, numPartitions=STATE_PARTITIONS).checkpoint(2)

    return build


def window_app(ssc: StreamingContext) -> DStream:
    pairs = TimedInputDStream(ssc, words_of_batch).map(lambda w: (w, 1))
    # Window of 6 slides: reduced incrementally (inverse reduce), checkpointed every 2 batches.
    window = pairs.reduceByKeyAndWindow(operator.add, operator.sub, 6, 1, numPartitions=STATE_PARTITIONS)
    return window.checkpoint(2)


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


# The longest run a test compares with, per application. A batch's output is a function of the
# batches up to it, so one uninterrupted run per application serves every test of it, each taking
# the times it needs: half the batches this file would otherwise run (each a few Spark jobs).
_HORIZON_MS = {"updateStateByKey": 14_000, "window_inverse": 12_000}
_UNINTERRUPTED: dict[str, dict[int, list[Any]]] = {}


def expected_outputs(sc: SparkContext, name: str, until_ms: int) -> dict[int, list[Any]]:
    """What the application ``name`` (an id of :data:`_APPS`) outputs up to ``until_ms``, run
    uninterrupted."""
    assert until_ms <= _HORIZON_MS[name]
    if name not in _UNINTERRUPTED:
        _UNINTERRUPTED[name] = uninterrupted(sc, _APPS[name], _HORIZON_MS[name])
    return {t: v for t, v in _UNINTERRUPTED[name].items() if t <= until_ms}


def snapshot_dirs(checkpoint: Path) -> list[str]:
    return sorted(p.name for p in (checkpoint / STATE_DIR).iterdir())


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
def crashed_at_9_s(sc: SparkContext, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The checkpoint of a driver of the application ``name`` (an id of :data:`_APPS`) that died
    after its 9 s batch, state written at 6 s and 8 s: made once per application, its outputs up
    to then checked against the uninterrupted run's; each test restarts from a copy of its own."""
    made: dict[str, Path] = {}

    def of(name: str) -> Path:
        if name not in made:
            checkpoint = tmp_path_factory.mktemp(f"crashed-at-9-s-{name}") / "checkpoint"
            first = start_app(sc, checkpoint, _APPS[name])
            first.advance_to(9_000)  # state written at 8 s; batch 9 s completed after it
            first.crash()
            recorded = read_checkpoint(checkpoint)
            assert recorded is not None
            assert [s.time_ms for s in recorded.state_streams[0].snapshots] == [6_000, 8_000]
            assert first.outputs == expected_outputs(sc, name, 9_000)
            made[name] = checkpoint
        return made[name]

    return of


def copy_of(checkpoint: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "checkpoint"
    shutil.copytree(checkpoint, copy)
    return copy


@pytest.mark.parametrize("name", list(_APPS))
def test_a_restarted_driver_continues_from_the_state_checkpoint(
    sc: SparkContext, tmp_path: Path, crashed_at_9_s: Callable[[str], Path], name: str
) -> None:
    """And the state checkpoints it no longer needs go, the dead driver's too; files are owner-only."""
    expected = expected_outputs(sc, name, 12_000)
    checkpoint = copy_of(crashed_at_9_s(name), tmp_path)
    second = start_app(sc, checkpoint, _APPS[name], now_ms=9_000)
    # To 12 s: the window's batches 4 to 6, from before the crash, leave it after the restart.
    second.advance_to(12_000)
    second.crash()
    assert second.outputs == {t: v for t, v in expected.items() if t > 9_000}

    # The two newest snapshots stay (the older is the fallback); the four before them went, the
    # dead driver's 6 s and 8 s with them.
    assert snapshot_dirs(checkpoint) == ["0-10000", "0-12000"]
    state = checkpoint / STATE_DIR
    for path in [state, *state.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    assert not [p for p in state.rglob(".*")], "temporary files left"


def test_a_restart_recomputes_the_batches_after_the_snapshot_and_those_it_was_down_for(
    sc: SparkContext, tmp_path: Path, crashed_at_9_s: Callable[[str], Path]
) -> None:
    expected = expected_outputs(sc, "updateStateByKey", 14_000)
    # Snapshot at 8 s; 9 s only in the input. Down for three batches: 10, 11 and 12 s run (late)
    # on restart, from the state of 8 s and the input of 9 s.
    checkpoint = copy_of(crashed_at_9_s("updateStateByKey"), tmp_path)
    second = start_app(sc, checkpoint, _APPS["updateStateByKey"], now_ms=12_500)
    second.advance_to(14_000)
    second.crash()
    assert second.outputs == {t: v for t, v in expected.items() if t > 9_000}


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


@pytest.mark.parametrize("how", ["truncate", "flip", "delete"])
def test_a_damaged_snapshot_falls_back_to_the_one_before(
    sc: SparkContext, tmp_path: Path, crashed_at_9_s: Callable[[str], Path], how: str
) -> None:
    expected = expected_outputs(sc, "updateStateByKey", 10_000)
    checkpoint = copy_of(crashed_at_9_s("updateStateByKey"), tmp_path)
    damage(checkpoint, "0-8000", how)

    second = start_app(sc, checkpoint, _APPS["updateStateByKey"], now_ms=9_000)
    assert second.ssc.graph.checkpointed_streams()[0].restored_state_time_ms == 6_000
    # One batch shows it: its output is the whole state, recomputed from 6 s through 7, 8 and 9 s.
    second.advance_to(10_000)
    second.crash()
    assert second.outputs == {t: v for t, v in expected.items() if t > 9_000}


def test_no_intact_snapshot_is_refused_naming_the_file(
    sc: SparkContext, tmp_path: Path, crashed_at_9_s: Callable[[str], Path]
) -> None:
    checkpoint = copy_of(crashed_at_9_s("updateStateByKey"), tmp_path)
    newer = damage(checkpoint, "0-8000", "truncate")
    older = damage(checkpoint, "0-6000", "flip")
    with pytest.raises(CheckpointError) as raised:
        start_app(sc, checkpoint, state_app(), now_ms=9_000)
    message = str(raised.value)
    assert f"0-8000/{newer.name}" in message and "truncated" in message
    assert f"0-6000/{older.name}" in message and "SHA-256" in message


def test_a_checkpoint_of_another_state_function_is_refused(
    sc: SparkContext, tmp_path: Path, crashed_at_9_s: Callable[[str], Path]
) -> None:
    checkpoint = copy_of(crashed_at_9_s("updateStateByKey"), tmp_path)  # of running_total
    with pytest.raises(CheckpointError, match="other_total"):
        start_app(sc, checkpoint, state_app(other_total), now_ms=9_000)
    with pytest.raises(CheckpointError, match="ReducedWindowedDStream"):
        start_app(sc, checkpoint, window_app, now_ms=9_000)


def test_values_that_are_not_plain_data_round_trip_pickled(sc: SparkContext, tmp_path: Path) -> None:
    def build(ssc: StreamingContext) -> DStream:
        pairs = TimedInputDStream(ssc, words_of_batch).map(lambda w: (w, 1))
        return pairs.updateStateByKey(lambda vs, s: (s or frozenset()) | {len(vs)}).checkpoint(2)

    checkpoint = tmp_path / "checkpoint"
    expected = uninterrupted(sc, build, 4_000)
    first = start_app(sc, checkpoint, build)
    first.advance_to(2_000)  # its first state checkpoint
    first.crash()
    recorded = read_checkpoint(checkpoint)
    assert recorded is not None
    # Files of partitions with records are pickled; an empty partition is plain data all the same.
    assert "python" in {f.codec for f in recorded.state_streams[0].snapshots[-1].files}
    second = start_app(sc, checkpoint, build, now_ms=2_000)
    second.advance_to(4_000)
    second.crash()
    assert second.outputs == {t: v for t, v in expected.items() if t > 2_000}
    assert os.listdir(checkpoint / STATE_DIR)

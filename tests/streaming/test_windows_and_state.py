"""Windowed operations (with and without an inverse reduce) and updateStateByKey across batches."""

from __future__ import annotations

import operator
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.streaming.conftest import ManualRun

BATCH_MS = 1000
PAIR_BATCHES: list[list[tuple[str, int]]] = [
    [("a", 1), ("b", 1)],
    [("a", 1)],
    [("c", 2)],
    [],
    [("a", 1)],
    [("b", 3)],
    [],
    [],
]


def window_of(batches: list[list[Any]], end_index: int, width: int) -> list[Any]:
    """Records of batches (end_index - width, end_index], indexes from 1."""
    return [record for i in range(max(1, end_index - width + 1), end_index + 1) for record in batches[i - 1]]


def sums(records: list[tuple[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for key, value in records:
        total[key] += value
    return dict(total)


def test_window_and_count_by_window(make_run) -> None:
    run: ManualRun = make_run()
    batches = [[1], [2, 3], [4], [], [5], [6]]
    stream = run.queue_of_one_partition_each(batches)
    windowed = run.collect(stream.window(3))
    sliding = run.collect(stream.window(4, 2))
    counted = run.collect(stream.countByWindow(3, 1))
    reduced = run.collect(stream.reduceByWindow(operator.add, None, 2, 1))
    run.advance(len(batches))

    assert windowed == [sorted(window_of(batches, i, 3)) for i in range(1, 7)]
    # Slide of two batches: outputs at 2 s, 4 s, 6 s only.
    assert sliding == [sorted(window_of(batches, i, 4)) for i in (2, 4, 6)]
    assert counted == [[len(window_of(batches, i, 3))] for i in range(1, 7)]
    assert reduced == [
        [sum(window_of(batches, i, 2))] if window_of(batches, i, 2) else [] for i in range(1, 7)
    ]


def test_reduce_by_key_and_window_with_and_without_inverse(make_run) -> None:
    run: ManualRun = make_run()
    stream = run.queue_of_one_partition_each(PAIR_BATCHES)
    # Five slides per window: pyspark's threshold for the incremental (inverse) path.
    incremental = run.collect(stream.reduceByKeyAndWindow(operator.add, operator.sub, 5, 1))
    filtered = run.collect(
        stream.reduceByKeyAndWindow(operator.add, operator.sub, 5, 1, filterFunc=lambda kv: kv[1] > 0)
    )
    plain = run.collect(stream.reduceByKeyAndWindow(operator.add, None, 5, 1))
    by_value = run.collect(stream.map(lambda kv: kv[0]).countByValueAndWindow(5, 1))
    run.advance(len(PAIR_BATCHES))
    inverse_stream = run.ssc.graph.output_streams[0].parent
    assert inverse_stream.generated_rdds, "the incremental stream keeps its previous windows"

    seen: set[str] = set()
    for i in range(1, len(PAIR_BATCHES) + 1):
        in_window = sums(window_of(PAIR_BATCHES, i, 5))
        seen |= set(in_window)
        # The inverse path keeps keys whose window value fell to zero (pyspark's semantics)...
        assert incremental[i - 1] == sorted(((k, in_window.get(k, 0)) for k in seen), key=repr), i
        # ...unless a filter drops them; the plain path only has keys in the window.
        assert filtered[i - 1] == sorted(in_window.items(), key=repr), i
        assert plain[i - 1] == sorted(in_window.items(), key=repr), i
        counts = Counter(k for k, _ in window_of(PAIR_BATCHES, i, 5))
        assert by_value[i - 1] == sorted(counts.items(), key=repr), i


def test_group_by_key_and_window_and_slide_longer_than_a_batch(make_run) -> None:
    run: ManualRun = make_run()
    stream = run.queue_of_one_partition_each(PAIR_BATCHES[:4])
    grouped = run.collect(stream.groupByKeyAndWindow(2, 1).mapValues(sorted))
    sliding = run.collect(stream.reduceByKeyAndWindow(operator.add, operator.sub, 4, 2))
    run.advance(4)

    for i in range(1, 5):
        window = window_of(PAIR_BATCHES, i, 2)
        expected = {k: sorted(v for kk, v in window if kk == k) for k, _ in window}
        assert grouped[i - 1] == sorted(expected.items(), key=repr)
    assert sliding == [sorted(sums(window_of(PAIR_BATCHES, i, 4)).items(), key=repr) for i in (2, 4)]


def test_window_durations_must_be_multiples_of_the_batch(make_run) -> None:
    run: ManualRun = make_run()
    stream = run.ssc.queueStream([[1]])
    with pytest.raises(ValueError, match="windowDuration must be multiple"):
        stream.window(1.5)
    with pytest.raises(ValueError, match="slideDuration must be multiple"):
        stream.reduceByKeyAndWindow(operator.add, operator.sub, 2, 0.5)


def update(values: list[int], state: int | None) -> int | None:
    if -1 in values:
        return None  # drops the key
    return (state or 0) + sum(values)


def test_update_state_by_key_across_batches(make_run, sc) -> None:
    run: ManualRun = make_run()
    batches = [[("a", 1), ("b", 2)], [("a", 3)], [("b", -1)], [], [("b", 5)]]
    stream = run.queue_of_one_partition_each(batches)
    state = run.collect(stream.updateStateByKey(update))
    with_initial = run.collect(
        stream.updateStateByKey(update, initialRDD=sc.parallelize([("c", 10), ("a", 100)]))
    )
    from_list = run.collect(stream.updateStateByKey(update, numPartitions=1, initialRDD=[("z", 0)]))
    run.advance(len(batches))

    assert state == [
        [("a", 1), ("b", 2)],
        [("a", 4), ("b", 2)],
        [("a", 4)],
        [("a", 4)],
        [("a", 4), ("b", 5)],
    ]
    assert with_initial == [
        [("a", 101), ("b", 2), ("c", 10)],
        [("a", 104), ("b", 2), ("c", 10)],
        [("a", 104), ("c", 10)],
        [("a", 104), ("c", 10)],
        [("a", 104), ("b", 5), ("c", 10)],
    ]
    assert from_list[-1] == [("a", 4), ("b", 5), ("z", 0)]
    state_stream = run.ssc.graph.output_streams[0].parent
    # Stateful streams truncate lineage by default every max(10 s, slide) and remember two intervals.
    assert state_stream.checkpoint_duration_ms == 10_000
    assert state_stream.remember_duration_ms == 20_000


def test_a_stateful_stream_runs_without_spark_warning_of_each_forgotten_checkpoint(tmp_path: Path) -> None:
    """Spark warns "RDD n was locally checkpointed, its lineage has been truncated..." for every
    locally checkpointed RDD unpersisted: a stateful stream forgot one per checkpoint interval."""
    repo = Path(__file__).resolve().parents[2]
    # Ten batches of 0.2 s, checkpointed every 0.4 s and remembered for 0.8 s: by the last batch
    # the stream has forgotten the checkpointed RDDs of 0.4 s and 0.8 s, each once a warning.
    child = subprocess.run(
        [sys.executable, "-m", "tests.streaming.stateful_child", str(tmp_path / "checkpoint"), "10"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-4000:]
    assert child.stdout.strip().splitlines()[-1] == 'counts {"a": 20, "b": 10}', child.stdout
    assert "was locally checkpointed" not in child.stderr, child.stderr[-4000:]

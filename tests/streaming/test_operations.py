"""Every DStream operation against queueStream batches, compared to what the operation means."""

from __future__ import annotations

import collections
import operator
from datetime import datetime

import pytest
from pyspark import RDD, StorageLevel

from tests.streaming.conftest import ManualRun

BATCHES = [[1, 2, 3, 2], [4, 5], []]
PAIRS = [[("a", 1), ("b", 2), ("a", 3)], [("b", 4)], []]


def test_element_wise_operations(make_run) -> None:
    run: ManualRun = make_run()
    stream = run.queue_of_one_partition_each(BATCHES)
    mapped = run.collect(stream.map(lambda x: x * 10))
    flat = run.collect(stream.flatMap(lambda x: [x, -x]))
    filtered = run.collect(stream.filter(lambda x: x % 2 == 0))
    partitions = run.collect(stream.mapPartitions(lambda it: [sum(it)]))
    indexed = run.collect(stream.mapPartitionsWithIndex(lambda i, it: [(i, len(list(it)))]))
    globbed = run.collect(stream.glom().map(sorted))
    repartitioned = run.collect(stream.repartition(3).glom().map(len))
    run.advance(3)

    assert mapped == [[10, 20, 20, 30], [40, 50], []]
    assert flat == [sorted([1, -1, 2, -2, 3, -3, 2, -2], key=repr), [-4, -5, 4, 5], []]
    assert filtered == [[2, 2], [4], []]
    assert [sum(batch) for batch in partitions] == [8, 9, 0]
    assert [sum(n for _, n in batch) for batch in indexed] == [4, 2, 0]
    assert [sorted(x for part in batch for x in part) for batch in globbed] == [[1, 2, 2, 3], [4, 5], []]
    assert [len(batch) for batch in repartitioned][:2] == [3, 3]


def test_count_reduce_and_count_by_value(make_run) -> None:
    run: ManualRun = make_run()
    stream = run.queue_of_one_partition_each(BATCHES)
    counted = run.collect(stream.count())
    reduced = run.collect(stream.reduce(operator.add))
    by_value = run.collect(stream.countByValue())
    run.advance(3)

    # Spark's count: one element per batch, 0 for an empty one.
    assert counted == [[4], [2], [0]]
    assert reduced == [[8], [9], []]
    assert by_value == [[(1, 1), (2, 2), (3, 1)], [(4, 1), (5, 1)], []]


def test_key_value_operations(make_run) -> None:
    run: ManualRun = make_run()
    stream = run.queue_of_one_partition_each(PAIRS)
    mapped_values = run.collect(stream.mapValues(lambda v: v + 100))
    flat_values = run.collect(stream.flatMapValues(lambda v: range(v)))
    reduced = run.collect(stream.reduceByKey(operator.add))
    grouped = run.collect(stream.groupByKey().mapValues(sorted))
    combined = run.collect(
        stream.combineByKey(lambda v: [v], lambda c, v: [*c, v], operator.add).mapValues(sorted)
    )
    partitioned = run.collect(stream.partitionBy(1).glom().map(len))
    run.advance(3)

    assert mapped_values == [[("a", 101), ("a", 103), ("b", 102)], [("b", 104)], []]
    assert flat_values[1] == [("b", 0), ("b", 1), ("b", 2), ("b", 3)]
    assert len(flat_values[0]) == 1 + 2 + 3
    assert reduced == [[("a", 4), ("b", 2)], [("b", 4)], []]
    assert grouped == [[("a", [1, 3]), ("b", [2])], [("b", [4])], []]
    assert combined == grouped
    assert partitioned[:2] == [[3], [1]]


def test_joins_and_cogroup(make_run) -> None:
    run: ManualRun = make_run()
    left = run.queue_of_one_partition_each([[("a", 1), ("b", 2)], [("c", 3)]])
    right = run.queue_of_one_partition_each([[("a", "x"), ("z", "y")], []])
    joined = run.collect(left.join(right))
    left_outer = run.collect(left.leftOuterJoin(right))
    right_outer = run.collect(left.rightOuterJoin(right))
    full_outer = run.collect(left.fullOuterJoin(right))
    cogrouped = run.collect(left.cogroup(right).mapValues(lambda vs: (list(vs[0]), list(vs[1]))))
    run.advance(2)

    assert joined == [[("a", (1, "x"))], []]
    assert left_outer == [[("a", (1, "x")), ("b", (2, None))], [("c", (3, None))]]
    assert right_outer == [[("a", (1, "x")), ("z", (None, "y"))], []]
    assert full_outer == [[("a", (1, "x")), ("b", (2, None)), ("z", (None, "y"))], [("c", (3, None))]]
    assert cogrouped[0] == [("a", ([1], ["x"])), ("b", ([2], [])), ("z", ([], ["y"]))]


def test_union_and_transforms(make_run) -> None:
    run: ManualRun = make_run()
    ssc = run.ssc
    a = ssc.queueStream([[1], [2]])
    b = ssc.queueStream([[10], [20]])
    c = ssc.queueStream([[100], [200]])
    seen_times: list[datetime] = []

    def with_time(time: datetime, rdd: RDD[int]) -> RDD[int]:
        seen_times.append(time)
        return rdd.map(lambda x: x + 1)

    unioned = run.collect(a.union(b))
    context_union = run.collect(ssc.union(a, b, c))
    transformed = run.collect(a.transform(lambda rdd: rdd.map(lambda x: -x)))
    timed = run.collect(a.transform(with_time))
    transformed_with = run.collect(a.transformWith(lambda x, y: x.cartesian(y), b))
    context_transform = run.collect(ssc.transform([a, b, c], lambda rdds: rdds[0].union(rdds[2])))
    run.advance(2)

    assert unioned == [[1, 10], [2, 20]]
    assert context_union == [[1, 10, 100], [2, 20, 200]]
    assert transformed == [[-1], [-2]]
    assert timed == [[2], [3]]
    assert seen_times == [datetime.fromtimestamp(1), datetime.fromtimestamp(2)]
    assert transformed_with == [[(1, 10)], [(2, 20)]]
    assert context_transform == [[1, 100], [2, 200]]


def test_union_needs_equal_slides_and_transform_must_return_an_rdd(make_run) -> None:
    run: ManualRun = make_run()
    a = run.ssc.queueStream([[1]])
    with pytest.raises(ValueError, match="same slide duration"):
        a.union(a.window(2, 2))
    with pytest.raises(TypeError, match="argument"):
        a.transform(lambda x, y, z: x)
    run.collect(a.transform(lambda rdd: [1, 2]))
    run.ssc.start()
    run.clock.advance(1000)
    with pytest.raises(TypeError, match="must return an RDD"):
        run.ssc.awaitTerminationOrTimeout(20)


def test_queue_stream_modes(make_run, sc) -> None:
    run: ManualRun = make_run()
    ssc = run.ssc
    live: collections.deque = collections.deque([sc.parallelize([1])])
    all_at_once = run.collect(ssc.queueStream([[1], [2, 3]], oneAtATime=False))
    with_default = run.collect(ssc.queueStream([[7]], default=sc.parallelize([0])))
    live_stream = run.collect(ssc.queueStream(live))
    run.advance(1)
    live.append([5, 6])  # a deque is read live, as Spark's mutable queue
    run.advance(2)

    assert all_at_once == [[1, 2, 3], [], []]
    assert with_default == [[7], [0], [0]]
    assert live_stream == [[1], [5, 6], []]


def test_foreach_rdd_gets_datetime_and_pprint_prints_sparks_banner(make_run, capsys) -> None:
    run: ManualRun = make_run()
    stream = run.ssc.queueStream([list(range(12)), []])
    times: list[tuple[datetime, int]] = []
    stream.foreachRDD(lambda time, rdd: times.append((time, rdd.count())))
    stream.pprint(num=3)
    run.advance(2)

    assert times == [(datetime.fromtimestamp(1), 12), (datetime.fromtimestamp(2), 0)]
    out = capsys.readouterr().out
    banner = "-------------------------------------------"
    assert out == (
        f"{banner}\nTime: {datetime.fromtimestamp(1)}\n{banner}\n0\n1\n2\n...\n\n"
        f"{banner}\nTime: {datetime.fromtimestamp(2)}\n{banner}\n\n"
    )


def test_save_as_text_files(make_run, tmp_path) -> None:
    run: ManualRun = make_run()
    run.ssc.queueStream([["a", "b"]]).saveAsTextFiles(str(tmp_path / "out"), "txt")
    run.advance(1)
    written = tmp_path / "out-1000.txt"
    lines = sorted(line for part in written.glob("part-*") for line in part.read_text().splitlines())
    assert lines == ["a", "b"]


def test_slice_returns_remembered_rdds(make_run) -> None:
    run: ManualRun = make_run()
    run.ssc.remember(10)
    stream = run.ssc.queueStream([[1], [2], [3]])
    run.collect(stream)
    run.advance(3)
    rdds = stream.slice(datetime.fromtimestamp(2), 3)
    assert [rdd.collect() for rdd in rdds] == [[2], [3]]


def test_cache_persists_and_old_rdds_are_unpersisted(make_run) -> None:
    run: ManualRun = make_run()
    stream = run.ssc.queueStream([[1], [2], [3], [4]]).map(lambda x: x).cache()
    run.collect(stream)
    run.advance(1)
    first = stream.generated_rdds[1000]
    assert first.is_cached and first.getStorageLevel() == StorageLevel.MEMORY_ONLY
    run.advance(3)
    # Remember duration is one batch: older RDDs are forgotten and unpersisted.
    assert sorted(stream.generated_rdds) == [4000]
    assert not first.is_cached
    with pytest.raises(ValueError, match="after streaming context has started"):
        stream.persist(StorageLevel.DISK_ONLY)


def test_unpersist_off_keeps_old_rdds_cached(make_run) -> None:
    from reliable_kafka.settings import StreamingSettings

    settings = StreamingSettings.from_spark_conf({"spark.streaming.unpersist": "false"})
    run: ManualRun = make_run(settings=settings)
    stream = run.ssc.queueStream([[1], [2], [3]]).map(lambda x: x).cache()
    run.collect(stream)
    run.advance(1)
    first = stream.generated_rdds[1000]
    run.advance(2)
    assert 1000 not in stream.generated_rdds
    assert first.is_cached


def test_checkpoint_interval_truncates_lineage_locally(make_run) -> None:
    run: ManualRun = make_run()
    stream = run.ssc.queueStream([[1], [2], [3]]).map(lambda x: x).checkpoint(2)
    run.collect(stream)
    run.advance(2)
    assert stream.checkpoint_duration_ms == 2000
    # Every checkpoint interval (2 s from zero time 0) the RDD is marked for a local checkpoint.
    assert stream.generated_rdds[2000].isLocallyCheckpointed()
    assert not stream.generated_rdds[1000].isLocallyCheckpointed()
    # Remember duration becomes two checkpoint intervals, so a newer checkpoint always exists.
    assert stream.remember_duration_ms == 4000

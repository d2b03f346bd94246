"""State checkpoints on a remote checkpoint directory (issue 24): tasks write and read the partition
files on the session's real HDFS and S3 servers, a damaged object is reported, old snapshots go."""

from __future__ import annotations

import pytest
from pyspark import SparkContext

from reliable_kafka.state_checkpoint import (
    STATE_DIR,
    clean,
    directory_handle,
    read_snapshot,
    verify_snapshot,
    write_snapshot,
)
from reliable_kafka.util.filesystems import options_from_spark_conf
from tests.e2e.remote_stores import STORES, RemoteStore, remote_store

pytestmark = pytest.mark.integration


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> RemoteStore:
    return remote_store(request, request.param)


def test_state_snapshots_on_a_remote_store(spark_context: SparkContext, store: RemoteStore) -> None:
    sc = spark_context
    options = options_from_spark_conf(store.spark_conf.items(), environ={})
    handle = directory_handle(store.checkpoint, options)
    pairs = [(f"k{i}", (i, [i, "v"])) for i in range(50)]
    rdd = sc.parallelize(pairs, 2).partitionBy(3).cache()

    older = write_snapshot(rdd, handle, 0, 2000, hash_partitioned=True)
    newer = write_snapshot(rdd, handle, 0, 4000, hash_partitioned=True)
    assert verify_snapshot(sc, handle, newer) == []
    restored = read_snapshot(sc, handle, newer)
    assert restored.getNumPartitions() == 3 and restored.partitioner == rdd.partitioner
    assert restored.glom().collect() == rdd.glom().collect()  # partition i from file i

    fs, state = store.fs(), f"{store.path().rstrip('/')}/{STATE_DIR}"
    damaged = f"{state}/{newer.directory}/{newer.files[1].name}"
    fs.pipe_file(damaged, bytes(fs.cat_file(damaged))[:-10])
    (problem,) = verify_snapshot(sc, handle, newer)
    assert f"{newer.directory}/{newer.files[1].name}" in problem and "truncated" in problem

    assert clean(handle, {0: newer.time_ms}) == 1
    fs.invalidate_cache()
    # Files, not directories: some stores keep an emptied directory listed for a while.
    remaining = {p.rsplit("/", 2)[-2] for p in fs.find(state)}
    assert remaining == {newer.directory}
    assert clean(handle, {0: newer.time_ms}) == 0  # nothing left to remove
    assert older.directory != newer.directory

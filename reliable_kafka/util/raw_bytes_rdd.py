"""An RDD of raw byte strings, one partition each, through pyspark's private parallelize path.

The risk: pyspark has no public way to parallelize with a serializer of one's own, so this uses
``SparkContext._serialize_to_jvm`` and, through py4j, ``PythonRDD.readRDDFromFile`` and
``PythonParallelizeServer``, which pyspark's ``parallelize`` calls and which may change in any
release (``tests/scheduler/test_batch_rdd.py`` reads batches through it).
"""

from __future__ import annotations

from typing import Any

from pyspark import RDD, SparkContext
from pyspark.serializers import NoOpSerializer


def raw_bytes_rdd(sc: SparkContext, descriptors: list[bytes]) -> RDD[bytes]:
    """One partition per descriptor, shipped as raw length-prefixed frames (no pickle); each
    partition's one element is the descriptor's bytes."""
    if not descriptors:
        return sc.emptyRDD()
    num_slices = len(descriptors)
    # pyspark's private parallelize path: it has no public one that takes another serializer.
    jvm = sc._jvm
    assert jvm is not None

    def reader_func(temp_filename: str) -> Any:
        return jvm.PythonRDD.readRDDFromFile(sc._jsc, temp_filename, num_slices)

    def server_func() -> Any:
        return jvm.PythonParallelizeServer(sc._jsc.sc(), num_slices)

    jrdd = sc._serialize_to_jvm(descriptors, NoOpSerializer(), reader_func, server_func)
    return RDD(jrdd, sc, NoOpSerializer())

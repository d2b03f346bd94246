"""``pprint``'s take of a cached RDD, read from the cache by the JVM: no Python worker lost per batch.

pyspark's ``RDD.take`` runs a Python function over each partition it scans. Over a cached RDD
that function runs in a Python worker of its own (a cached RDD does not pipeline into the next
function), and it stops reading its partition once it has its records. pyspark does not reuse a
worker that left input unread: it exits, and a later task forks a new one from the daemon, which
imports ``pyspark.worker`` and the modules of its task's function again (about 0.6 s of CPU per
new worker on a 2-core machine: once per batch of the README's word count, whose counts are
cached and printed, before this).

Over a cached RDD, Spark's own ``RDD.take`` (in the JVM) gives the same records: it scans the
partitions in the same order, reads them from the cache (computing a partition first, where that
is needed, by the same Python worker that would compute it for any other action, and which reads
all of its input), and stops without a Python worker of its own. Its elements are the RDD's
serialized batches (each at least one record), which the driver deserializes with the RDD's own
deserializer, as ``collect`` does.

The risk: ``RDD._jrdd`` and ``RDD._jrdd_deserializer`` are pyspark's private surface, which
``collect`` and ``take`` themselves use; a deserializer other than the batched and no-op ones
(e.g. the pair deserializer of ``zip``, whose two JVM elements make one batch, or a text file's,
whose elements are strings) takes pyspark's path.
"""

from __future__ import annotations

import io
import struct
from typing import TypeVar

from pyspark import RDD
from pyspark.serializers import BatchedSerializer, NoOpSerializer

T = TypeVar("T")

# Deserializers whose every JVM element is a byte array holding one frame of at least one record.
_ONE_FRAME_PER_ELEMENT = (BatchedSerializer, NoOpSerializer)
_FRAME_LENGTH = struct.Struct(">i")


def take_first(rdd: RDD[T], num: int) -> list[T]:
    """``rdd.take(num)``: from the cache by the JVM when ``rdd`` is cached, else pyspark's own."""
    if num <= 0:
        return []
    deserializer = rdd._jrdd_deserializer
    if not rdd.is_cached or not isinstance(deserializer, _ONE_FRAME_PER_ELEMENT):
        return rdd.take(num)
    # At most num elements: each holds one or more records.
    elements = list(rdd._jrdd.take(num))
    frames = io.BytesIO(b"".join(_FRAME_LENGTH.pack(len(e)) + bytes(e) for e in elements))
    records: list[T] = []
    for record in deserializer.load_stream(frames):
        records.append(record)
        if len(records) == num:
            return records
    if len(elements) == num:
        # Some element held no record (no serializer here writes one): the JVM's num elements
        # do not bound the records. pyspark's take reads on.
        return rdd.take(num)
    return records

"""pyspark's ``StorageLevel`` with the names pyspark 3 dropped, for the 2.4 import swap.

pyspark 2.4 apps pass ``StorageLevel.MEMORY_AND_DISK_SER_2`` to ``KafkaUtils.createStream``;
pyspark 3 removed the ``_SER`` names (in 2.4 they were deprecated aliases of the serialized
levels every pyspark level already is), so such an app fails with ``AttributeError`` before
our code runs. This is pyspark's own class, so its levels work wherever pyspark takes one
(``rdd.persist``, ``DStream.persist``), with 2.4's names back on it.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark import StorageLevel as _PySparkStorageLevel


class StorageLevel(_PySparkStorageLevel):
    """``pyspark.StorageLevel`` plus pyspark 2.4's ``MEMORY_ONLY_SER``, ``MEMORY_ONLY_SER_2``,
    ``MEMORY_AND_DISK_SER`` and ``MEMORY_AND_DISK_SER_2``; equal to pyspark's levels of the
    same flags (Python data is always serialized: ``MEMORY_AND_DISK_SER_2 == MEMORY_AND_DISK_2``)."""

    MEMORY_ONLY_SER: ClassVar[_PySparkStorageLevel]
    MEMORY_ONLY_SER_2: ClassVar[_PySparkStorageLevel]
    MEMORY_AND_DISK_SER: ClassVar[_PySparkStorageLevel]
    MEMORY_AND_DISK_SER_2: ClassVar[_PySparkStorageLevel]


StorageLevel.MEMORY_ONLY_SER = StorageLevel(False, True, False, False, 1)
StorageLevel.MEMORY_ONLY_SER_2 = StorageLevel(False, True, False, False, 2)
StorageLevel.MEMORY_AND_DISK_SER = StorageLevel(True, True, False, False, 1)
StorageLevel.MEMORY_AND_DISK_SER_2 = StorageLevel(True, True, False, False, 2)

"""StorageLevel: Spark's constants, conversion from pyspark levels and names, clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reliable_kafka.storage import StorageLevel


def test_constants_have_sparks_flags() -> None:
    assert StorageLevel(False, True, True, 1) == StorageLevel.MEMORY_ONLY
    assert StorageLevel(False, True, False, 2) == StorageLevel.MEMORY_ONLY_SER_2
    assert StorageLevel(True, True, False, 2) == StorageLevel.MEMORY_AND_DISK_SER_2
    assert StorageLevel(True, False, False, 1) == StorageLevel.DISK_ONLY
    assert StorageLevel.DISK_ONLY_2.replication == 2
    assert StorageLevel.MEMORY_ONLY_2.name == "MEMORY_ONLY_2"  # Scala's: no pyspark level has its flags


def test_a_level_prints_as_pyspark_names_it() -> None:
    # pyspark's MEMORY_AND_DISK_2 (the createStream default) is Scala's MEMORY_AND_DISK_SER_2.
    assert str(StorageLevel.of("MEMORY_AND_DISK_2")) == "MEMORY_AND_DISK_2"
    assert StorageLevel.MEMORY_AND_DISK_SER_2.name == "MEMORY_AND_DISK_2"
    assert StorageLevel.MEMORY_AND_DISK.name == "MEMORY_AND_DISK_DESER"
    assert StorageLevel(True, True, True, 3).name == "StorageLevel(Disk Memory Deserialized 3x Replicated)"


def test_the_package_exports_pysparks_storage_level_with_24s_names() -> None:
    import pyspark

    import reliable_kafka

    level_class = reliable_kafka.StorageLevel
    assert issubclass(level_class, pyspark.StorageLevel)  # accepted wherever pyspark takes a level
    for name in ("MEMORY_ONLY_SER", "MEMORY_ONLY_SER_2", "MEMORY_AND_DISK_SER", "MEMORY_AND_DISK_SER_2"):
        plain = name.replace("_SER", "")
        # As in pyspark 2.4, the _SER names are the serialized levels pyspark's names already are.
        assert getattr(level_class, name) == getattr(pyspark.StorageLevel, plain), name
        assert StorageLevel.of(getattr(level_class, name)).name == plain
    for name in ("MEMORY_ONLY", "MEMORY_AND_DISK_2", "DISK_ONLY", "DISK_ONLY_2", "OFF_HEAP"):
        assert getattr(level_class, name) == getattr(pyspark.StorageLevel, name), name


def test_of_accepts_a_level_a_name_or_a_pyspark_level() -> None:
    import pyspark

    assert StorageLevel.of(StorageLevel.DISK_ONLY) is StorageLevel.DISK_ONLY
    assert StorageLevel.of("memory_and_disk_ser_2") == StorageLevel.MEMORY_AND_DISK_SER_2
    # PySpark's levels are all serialized ("data is always serialized on the Python side").
    assert StorageLevel.of(pyspark.StorageLevel.MEMORY_AND_DISK_2) == StorageLevel.MEMORY_AND_DISK_SER_2
    assert StorageLevel.of(pyspark.StorageLevel.DISK_ONLY_3) == StorageLevel(True, False, False, 3)
    assert StorageLevel.of(pyspark.StorageLevel.MEMORY_AND_DISK_DESER) == StorageLevel.MEMORY_AND_DISK


def test_a_name_means_what_pysparks_constant_of_that_name_means() -> None:
    import pyspark

    for name in ("MEMORY_ONLY", "MEMORY_ONLY_2", "MEMORY_AND_DISK", "MEMORY_AND_DISK_2", "DISK_ONLY_3"):
        assert StorageLevel.of(name) == StorageLevel.of(getattr(pyspark.StorageLevel, name)), name
    assert StorageLevel.of("memory_and_disk_deser") == StorageLevel.of(
        pyspark.StorageLevel.MEMORY_AND_DISK_DESER
    )
    # Scala-only names keep Scala's meaning.
    assert StorageLevel.of("MEMORY_AND_DISK_SER_2") == StorageLevel.MEMORY_AND_DISK_SER_2


def test_of_rejects_anything_else_clearly() -> None:
    import pyspark

    with pytest.raises(ValueError, match=r"unknown storage level 'MEMORY_ONLY_3'.*MEMORY_AND_DISK"):
        StorageLevel.of("MEMORY_ONLY_3")
    with pytest.raises(ValueError, match="off-heap"):
        StorageLevel.of(pyspark.StorageLevel.OFF_HEAP)
    with pytest.raises(TypeError, match=r"expected a StorageLevel.*got int"):
        StorageLevel.of(3)


def test_invalid_levels_are_refused() -> None:
    with pytest.raises(ValueError, match="memory, disk or both"):
        StorageLevel(False, False)
    with pytest.raises(ValueError, match="replication"):
        StorageLevel(True, True, False, 0)
    with pytest.raises(TypeError, match="replication"):
        StorageLevel(True, True, False, 1.5)  # type: ignore[arg-type]


def test_importing_storage_does_not_import_pyspark() -> None:
    code = "import sys, reliable_kafka.storage; assert 'pyspark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

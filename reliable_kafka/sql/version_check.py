"""Which pyspark the Structured Streaming source needs, checked before anything of it is imported.

The source is a Python data source (``pyspark.sql.datasource``, pyspark 4.0) whose stream reader
takes read limits and ``Trigger.AvailableNow`` (``pyspark.sql.streaming.datasource``, 4.2). On an
older pyspark the imports fail with a bare ``ModuleNotFoundError`` or, worse, the query starts and
its first batch fails on a missing method: this check says which pyspark is there instead.
"""

from __future__ import annotations

# The first pyspark whose Python stream readers have read limits and Trigger.AvailableNow.
MINIMUM = (4, 2)


class UnsupportedPysparkError(RuntimeError):
    """The installed pyspark has no Python stream readers with read limits."""


def _major_minor(version: str) -> tuple[int, int]:
    parts = [*version.split("."), "0"][:2]
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except ValueError:
        return 0, 0


def require_stream_readers(pyspark_version: str) -> None:
    """``UnsupportedPysparkError`` naming ``pyspark_version`` when it is older than :data:`MINIMUM`."""
    if _major_minor(pyspark_version) < MINIMUM:
        needed = ".".join(map(str, MINIMUM))
        raise UnsupportedPysparkError(
            f'format "reliable-kafka" needs pyspark {needed} or later (Python data sources with read '
            f"limits and Trigger.AvailableNow); this is pyspark {pyspark_version}. On pyspark 3.5 keep "
            "KafkaUtils.createStream (reliable_kafka.KafkaUtils), which this source takes over from"
        )


def check_installed_pyspark() -> None:
    """:func:`require_stream_readers` of the pyspark this process imports."""
    import pyspark  # noqa: PLC0415  (only when asked: importing this module loads no Spark)

    require_stream_readers(pyspark.__version__)

"""A SparkSession over the session's one SparkContext, with the ``reliable-kafka`` format registered.

Skipped as a whole on a pyspark without Python stream readers (the 3.5 smoke set of ``.ci/run``),
but for ``test_version_check.py``, which needs no Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyspark
import pytest
from pyspark import SparkContext

from reliable_kafka.sql.version_check import UnsupportedPysparkError, require_stream_readers

try:
    require_stream_readers(pyspark.__version__)
    STREAM_READERS = True
except UnsupportedPysparkError:
    STREAM_READERS = False


def pytest_ignore_collect(collection_path: Any, config: pytest.Config) -> bool | None:
    # The source's modules import pyspark.sql.datasource, which pyspark 3.5 does not have.
    if not STREAM_READERS and collection_path.name != "test_version_check.py":
        return True
    return None


@pytest.fixture(scope="session")
def spark(spark_context: SparkContext) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    import reliable_kafka.sql

    session = SparkSession.builder.getOrCreate()
    reliable_kafka.sql.register(session)
    yield session

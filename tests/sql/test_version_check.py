"""The pyspark the source needs, said before any query starts; runs on pyspark 3.5 too."""

from __future__ import annotations

import pytest

from reliable_kafka.sql.version_check import UnsupportedPysparkError, require_stream_readers


@pytest.mark.parametrize("version", ["3.5.3", "4.0.1", "4.1.0.dev0"])
def test_a_pyspark_without_stream_read_limits_is_named(version: str) -> None:
    with pytest.raises(
        UnsupportedPysparkError, match=rf"needs pyspark 4\.2 or later .*this is pyspark {version}\b"
    ):
        require_stream_readers(version)


@pytest.mark.parametrize("version", ["4.2.0", "4.3.0", "5.0.0.dev1"])
def test_pyspark_4_2_and_later_pass(version: str) -> None:
    require_stream_readers(version)

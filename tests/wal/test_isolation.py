"""The write-ahead log and its tests stand alone: no Spark, Kafka, ZooKeeper or reliable_kafka."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
_FORBIDDEN = ("pyspark", "confluent_kafka", "kazoo", "reliable_kafka")


def test_wal_and_its_test_fixtures_import_nothing_from_spark_kafka_or_reliable_kafka():
    # A fresh interpreter: this one already holds whatever other test modules imported.
    probe = (
        "import sys\n"
        "import wal, wal.file_based, wal.batched, wal.filesystem, wal.fsspec_storage, wal.local_storage\n"
        "import tests.conftest, tests.wal.conftest\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {_FORBIDDEN!r})\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=_ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == ""

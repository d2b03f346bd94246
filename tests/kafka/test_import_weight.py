"""Import rules: the ZooKeeper wing loads without Spark, the RPC layer or the write-ahead log."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["reliable_kafka.kafka.client.zk.paths", "reliable_kafka.kafka"])
def test_the_zookeeper_wing_and_the_kafka_package_load_no_pyspark_rpc_or_wal(module: str) -> None:
    """``import reliable_kafka.kafka.client.zk.paths`` loaded 385 modules (pyspark, the RPC layer, the
    write-ahead log...) through the package's eager imports."""
    code = (
        "import sys\n"
        f"import {module}\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'wal', 'pydantic')"
        " or m.startswith(('reliable_kafka.rpc', 'reliable_kafka.scheduler')))\n"
        "print(heavy)\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert loaded.strip() == "[]", loaded


def test_the_package_still_exports_every_name_it_lists() -> None:
    import reliable_kafka.kafka as kafka

    for name in kafka.__all__:
        assert getattr(kafka, name) is not None, name

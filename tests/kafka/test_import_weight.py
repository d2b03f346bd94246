"""Import rules: the ZooKeeper wing loads without Spark, the RPC layer, the write-ahead log or the
settings (pydantic)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "reliable_kafka.kafka.client.zk.paths",
        "reliable_kafka.kafka.client.zk.client",
        "reliable_kafka.kafka.offsets.zk.group_membership",
        "reliable_kafka.kafka.offsets.zk.offset_store",
        "reliable_kafka.kafka.offsets.group.offset_store",
        "reliable_kafka.kafka",
    ],
)
def test_the_zookeeper_wing_and_the_kafka_package_load_no_pyspark_rpc_wal_or_settings(module: str) -> None:
    """``import reliable_kafka.kafka.zk.paths`` loaded 385 modules (pyspark, the RPC layer, the
    write-ahead log...) through the package's eager imports; the ZooKeeper client and group
    membership loaded the settings and pydantic (~1 s) through the kafkaParams parser."""
    code = (
        "import sys\n"
        f"import {module}\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'wal', 'pydantic')"
        " or m.startswith(('reliable_kafka.rpc', 'reliable_kafka.scheduler', 'reliable_kafka.settings')))\n"
        "print(heavy)\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert loaded.strip() == "[]", loaded


def test_the_package_still_exports_every_name_it_lists() -> None:
    import reliable_kafka.kafka as kafka

    for name in kafka.__all__:
        assert getattr(kafka, name) is not None, name


def test_a_batch_tasks_decoder_imports_no_kafka_utils_into_a_fresh_worker() -> None:
    """A Python worker forked from the worker daemon (which imported the batch read chain) and
    handed a batch task imported ``KafkaUtils`` with it, the direct stream and the receiver's
    driver side (73 modules, 0.3-0.5 s), to unpickle the task's decoder: once per new worker."""
    from pyspark import cloudpickle

    from reliable_kafka.dstream.batch_rdd import _ReadBlocks
    from reliable_kafka.kafka.kafka_utils import KafkaRecordDecoder

    task_function = cloudpickle.dumps(_ReadBlocks(KafkaRecordDecoder(decode_errors="skip")))
    code = (
        "import json, sys\n"
        "from pyspark import cloudpickle\n"
        "from reliable_kafka.util.worker_daemon import preimport\n"
        "preimport()\n"
        "before = set(sys.modules)\n"
        "cloudpickle.loads(sys.stdin.buffer.read())\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith('reliable_kafka'))))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], input=task_function, check=True, capture_output=True
    ).stdout.decode()
    driver_side = ("kafka_utils", "kafka_input_dstream", "direct_kafka_input_dstream", "streaming_context")
    assert not [m for m in json.loads(loaded) if m.rsplit(".", 1)[-1] in driver_side], loaded

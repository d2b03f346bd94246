"""Python workers on a local master fork from a daemon that imported the receiver and batch task
code (issue 26 item 8: a fresh worker no longer imports it in the first batch with records)."""

from __future__ import annotations

import subprocess
import sys
import uuid

from pyspark import SparkContext

from reliable_kafka import StreamingContext
from reliable_kafka.util.worker_daemon import PREIMPORTED
from reliable_kafka.util.worker_python import DAEMON_MODULE, DAEMON_MODULE_KEY
from tests.util.worker_probe import worker_state


def test_a_streaming_context_on_a_local_master_starts_workers_with_the_task_code_imported(
    spark_context: SparkContext,
) -> None:
    StreamingContext(spark_context, 1)
    assert spark_context.getConf().get(DAEMON_MODULE_KEY) == DAEMON_MODULE
    # A variable of its own: PySpark keeps a daemon per worker environment, so this job starts a
    # daemon now, with the setting, whatever jobs of the session started theirs before.
    key = f"RELIABLE_KAFKA_TEST_DAEMON_{uuid.uuid4().hex}"
    spark_context.environment[key] = "1"
    try:
        [(parent, imported)] = spark_context.parallelize([0], 1).mapPartitions(worker_state).collect()
    finally:
        del spark_context.environment[key]
    assert f"-m {DAEMON_MODULE} " in f"{parent} "
    assert imported == list(PREIMPORTED)


def test_the_daemon_module_imports_quietly_and_survives_a_module_it_cannot_import() -> None:
    # stdout is the daemon's channel to the JVM (its port): the preimport must write nothing there.
    code = (
        "import sys\n"
        "from reliable_kafka.util.worker_daemon import PREIMPORTED, preimport\n"
        "failed = preimport(PREIMPORTED + ('reliable_kafka.no_such_module',))\n"
        "sys.stderr.write(repr(failed) + '|' + repr([m for m in PREIMPORTED if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout == ""
    assert "could not import reliable_kafka.no_such_module" in done.stderr
    assert done.stderr.endswith(f"['reliable_kafka.no_such_module']|{list(PREIMPORTED)!r}")

"""Python workers on a local master fork from a daemon that imported the receiver and batch task
code (issue 26 item 8: a fresh worker no longer imports it in the first batch with records)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pyspark
from pyspark import SparkContext

from reliable_kafka import StreamingContext
from reliable_kafka.util.worker_daemon import PREIMPORTED, without_installed_pyspark_zip
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
        [(parent, imported, pyspark_file, frozen)] = (
            spark_context.parallelize([0], 1).mapPartitions(worker_state).collect()
        )
    finally:
        del spark_context.environment[key]
    assert f"-m {DAEMON_MODULE} " in f"{parent} "
    assert imported == list(PREIMPORTED)
    # The installed pyspark's compiled modules, not the zip Spark puts first on the workers' path.
    assert pyspark_file == pyspark.__file__, pyspark_file
    # The daemon froze what it imported: the collector after each task leaves it alone.
    assert frozen > 10_000, frozen


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


def test_only_the_zip_of_an_installed_pyspark_the_path_reaches_is_left_out(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    installed_zip = str(site / "pyspark" / "python" / "lib" / "pyspark.zip")
    py4j = str(site / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip")
    distribution_zip = str(tmp_path / "spark-4.3.0" / "python" / "lib" / "pyspark.zip")
    path = ["/app", installed_zip, py4j, "/usr/lib/python3.11", str(site)]
    assert without_installed_pyspark_zip(path) == ["/app", py4j, "/usr/lib/python3.11", str(site)]
    # The installed package is not on the path: its zip is the only pyspark there is.
    assert without_installed_pyspark_zip(path[:-1]) == path[:-1]
    # A Spark distribution's zip (SPARK_HOME) has no installed package around it.
    assert without_installed_pyspark_zip([distribution_zip, str(site)]) == [distribution_zip, str(site)]

"""The suite's Spark JVMs map the class-data sharing archives of tests/support/spark_jvm_archive.py."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.conftest import _NO_ARCHIVES, _TEST_JVM_OPTIONS
from tests.support.spark_jvm_archive import archive_key, suite_spark_properties

if TYPE_CHECKING:
    from pyspark import SparkContext


def _archives_in_session_properties() -> dict[str, Path]:
    properties = suite_spark_properties()
    if not properties:
        pytest.skip("the environment named its own PYSPARK_SUBMIT_ARGS or SPARK_CONF_DIR")
    assert not _NO_ARCHIVES, f"the session has no archives: {_NO_ARCHIVES}"
    found = dict(
        re.findall(r"spark\.(driver|executor)\.defaultJavaOptions .*-XX:SharedArchiveFile=(\S+)", properties)
    )
    assert set(found) == {"driver", "executor"}, properties
    return {role: Path(path) for role, path in found.items()}


def test_the_sessions_driver_jvm_maps_its_archive(spark_context: SparkContext) -> None:
    archives = _archives_in_session_properties()
    jvm = spark_context._gateway.proc.pid  # spark-submit execs the JVM: the same process
    mapped = Path(f"/proc/{jvm}/maps").read_text()
    assert str(archives["driver"]) in mapped, f"the driver JVM {jvm} does not map {archives['driver']}"


def test_both_archives_fit_the_classpath_spark_gives_its_jvms(spark_context: SparkContext) -> None:
    """Executors get the driver's classpath (the conf dir, then pyspark's jars), built by the same
    launcher; -Xshare:on makes a JVM that cannot map the archive fail instead of running without."""
    archives = _archives_in_session_properties()
    command = Path(f"/proc/{spark_context._gateway.proc.pid}/cmdline").read_text().split("\0")
    classpath = command[command.index("-cp") + 1]
    for role, archive in archives.items():
        java = subprocess.run(
            [
                "java",
                *_TEST_JVM_OPTIONS.split(),
                "-Xshare:on",
                f"-XX:SharedArchiveFile={archive}",
                "-cp",
                classpath,
                "-version",
            ],
            capture_output=True,
            text=True,
        )
        assert java.returncode == 0, f"the {role} archive does not map: {java.stdout}{java.stderr}"


def test_an_archive_is_dumped_anew_for_other_jvm_options() -> None:
    assert archive_key("-XX:+UseSerialGC") != archive_key("-XX:+UseParallelGC")
    assert archive_key("-XX:+UseSerialGC") == archive_key("-XX:+UseSerialGC")

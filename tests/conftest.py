"""Session fixtures: a real ZooKeeper + Kafka, started by this project or by docker compose."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark import SparkContext

    from reliable_kafka.local import LocalCluster
    from tests.cluster_backends import ClusterUnderTest

logging.getLogger("kazoo.client").setLevel(logging.WARNING)


@pytest.fixture(scope="session", autouse=True)
def spark_worker_dirs_removed() -> Iterator[None]:
    """local-cluster's standalone workers write each application's logs under
    ``SPARK_HOME/work`` (Spark 4 passes them no other directory): remove what this session added."""
    try:
        import pyspark
    except ImportError:  # tests/wal runs without Spark
        yield
        return
    work = Path(pyspark.__file__).resolve().parent / "work"
    before = set(work.iterdir()) if work.is_dir() else None
    yield
    if not work.is_dir():
        return
    for path in set(work.iterdir()) - (before or set()):
        shutil.rmtree(path, ignore_errors=True)
    if before is None:
        with contextlib.suppress(OSError):
            work.rmdir()


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The cluster the project starts itself; the fault-injection tests need this one."""
    # Imported here, not at module level: tests/wal must run without Spark or Kafka installed.
    from reliable_kafka.local import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("local-cluster"))
    with cluster:
        yield cluster


@pytest.fixture(scope="session")
def docker_compose_file() -> Path:
    from tests.cluster_backends import COMPOSE_FILE

    return COMPOSE_FILE


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    return "reliable-kafka-tests"


@pytest.fixture(scope="session", params=["local", "docker"])
def kafka_cluster(request: pytest.FixtureRequest) -> ClusterUnderTest:
    """Every integration test runs against both backends; docker is skipped where no engine answers."""
    from tests.cluster_backends import DockerComposeCluster, docker_engine_answers

    if request.param == "local":
        return request.getfixturevalue("local_cluster")
    reason = docker_engine_answers()
    if reason is not None:
        pytest.skip(f"docker path skipped: {reason}")
    cluster = DockerComposeCluster(request.getfixturevalue("docker_services"))
    cluster.wait_ready()
    return cluster


@pytest.fixture(scope="session")
def spark_context() -> Iterator[SparkContext]:
    """The one real Spark of the session (a process can hold only one SparkContext).

    local[4]: receivers run as driver threads, so every core slot is free for batch jobs.
    """
    from pyspark import SparkConf, SparkContext

    # Python workers must run this interpreter (the venv with msgpack and the project).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster("local[4]")
        .setAppName("reliable-kafka-tests")
        .set("spark.ui.enabled", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.default.parallelism", "4")
        .set("spark.sql.shuffle.partitions", "4")
        .set("spark.driver.memory", "1g")
    )
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    yield sc
    sc.stop()

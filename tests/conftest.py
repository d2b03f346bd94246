"""Session fixtures: a real ZooKeeper + Kafka, started by this project or by docker compose."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import COMPOSE_FILE, ClusterUnderTest, DockerComposeCluster, docker_engine_answers

logging.getLogger("kazoo.client").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The cluster the project starts itself; the fault-injection tests need this one."""
    cluster = LocalCluster(tmp_path_factory.mktemp("local-cluster"))
    with cluster:
        yield cluster


@pytest.fixture(scope="session")
def docker_compose_file() -> Path:
    return COMPOSE_FILE


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    return "reliable-kafka-tests"


@pytest.fixture(scope="session", params=["local", "docker"])
def kafka_cluster(request: pytest.FixtureRequest) -> ClusterUnderTest:
    """Every integration test runs against both backends; docker is skipped where no engine answers."""
    if request.param == "local":
        return request.getfixturevalue("local_cluster")
    reason = docker_engine_answers()
    if reason is not None:
        pytest.skip(f"docker path skipped: {reason}")
    cluster = DockerComposeCluster(request.getfixturevalue("docker_services"))
    cluster.wait_ready()
    return cluster

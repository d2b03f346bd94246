"""The secured local cluster, once per session and broker kind (its start is the cost: 8-11 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reliable_kafka.local import LocalCluster


class _SecuredClusters:
    """One secured cluster per broker kind, started on first use; the previous kind's is stopped
    first, as the plain clusters are (the tests come broker by broker)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._started: dict[str, LocalCluster] = {}

    def of(self, kafka_version: str) -> LocalCluster:
        if kafka_version not in self._started:
            self.stop_all()
            work_dir = self._factory.mktemp(f"secured-cluster-{kafka_version}")
            self._started[kafka_version] = LocalCluster(work_dir, kafka=kafka_version, secure=True).start()
        return self._started[kafka_version]

    def stop_all(self) -> None:
        while self._started:
            _, cluster = self._started.popitem()
            cluster.stop()


@pytest.fixture(scope="session")
def secured_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_SecuredClusters]:
    clusters = _SecuredClusters(tmp_path_factory)
    try:
        yield clusters
    finally:
        clusters.stop_all()


@pytest.fixture(scope="session")
def secured_cluster(kafka_version: str, secured_clusters: _SecuredClusters) -> LocalCluster:
    """A cluster with TLS, SASL, client certificates, an authorizer and a SASL ZooKeeper
    (see reliable_kafka.local.secured)."""
    return secured_clusters.of(kafka_version)

"""Fixtures the Kafka receiver tests share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reliable_kafka.local import LocalCluster


@pytest.fixture
def admin_zk(local_cluster: LocalCluster) -> Iterator[Any]:
    """A ZooKeeper client of the test's cluster, to read and seed what the receivers write."""
    zk = local_cluster.zookeeper_client()
    yield zk
    zk.stop()
    zk.close()

"""Direct streams as the end-to-end tests make them: the cluster's client settings under 2.4's key
name, a context that commits the group's offsets, and the offset spans the batches covered."""

from __future__ import annotations

import itertools
from typing import Any

from pyspark import SparkContext

from reliable_kafka import OffsetRange, StreamingContext
from reliable_kafka.settings import DirectKafkaSettings, UISettings
from tests.cluster_backends import ClusterUnderTest
from tests.e2e.conftest import BATCH_S, e2e_settings


def direct_params(cluster: ClusterUnderTest, **more: Any) -> dict[str, Any]:
    """The cluster's client settings under 2.4's key name for the brokers."""
    params: dict[str, Any] = dict(cluster.client_config())
    params["metadata.broker.list"] = params.pop("bootstrap.servers")
    return {**params, **more}


def covered(ranges: list[OffsetRange], partition: int) -> list[tuple[int, int]]:
    return sorted((r.fromOffset, r.untilOffset) for r in ranges if r.partition == partition and r.count())


def contiguous(spans: list[tuple[int, int]]) -> bool:
    return all(a[1] == b[0] for a, b in itertools.pairwise(spans))


def committing_context(spark_context: SparkContext) -> StreamingContext:
    settings = e2e_settings(wal=False).model_copy(
        update={
            "kafka": DirectKafkaSettings(commit_completed_batches=True),
            "ui": UISettings(enabled=False, lag_refresh_ms=0),
        }
    )
    return StreamingContext(spark_context, BATCH_S, settings)

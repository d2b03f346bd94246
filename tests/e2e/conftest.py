"""Streaming contexts on the session's one SparkContext, stopped (Spark kept) after each test."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark import SparkContext

from reliable_kafka import StreamingContext
from reliable_kafka.settings import JobSettings, ReceiverSettings, StreamingSettings, WriteAheadLogSettings
from tests.conftest import selected_spark
from tests.e2e.kill_harness import ChildApp
from tests.spark_backends import SparkBackend

logging.getLogger("py4j").setLevel(logging.WARNING)

BATCH_S = 1.0
BLOCK_INTERVAL_MS = 200


def e2e_settings(*, wal: bool) -> StreamingSettings:
    return StreamingSettings(
        receiver=ReceiverSettings(block_interval_ms=BLOCK_INTERVAL_MS),
        wal=WriteAheadLogSettings(enable=wal),
        # Spark's default (ten batches) is short on a loaded two-core machine; losing nothing
        # matters here, not how long the stop takes.
        jobs=JobSettings(graceful_stop_timeout_ms=120_000),
    )


@pytest.fixture
def make_ssc(spark_context: SparkContext, tmp_path: Path) -> Iterator[Callable[..., StreamingContext]]:
    """``make_ssc(wal=..., checkpoint=True)``: a 1 s-batch context, with a checkpoint dir unless told not."""
    contexts: list[StreamingContext] = []

    def make(*, wal: bool, checkpoint: bool = True) -> StreamingContext:
        ssc = StreamingContext(spark_context, BATCH_S, e2e_settings(wal=wal))
        if checkpoint:
            ssc.checkpoint(str(tmp_path / f"checkpoint-{len(contexts)}"))
        contexts.append(ssc)
        return ssc

    yield make
    for ssc in contexts:
        ssc.stop(stopSparkContext=False)


@pytest.fixture
def applications() -> Iterator[list[ChildApp]]:
    """The child applications a test starts, killed when it ends, failed or not."""
    started: list[ChildApp] = []
    yield started
    while started:
        started.pop().kill()


@pytest.fixture
def host_loss_backend(request: pytest.FixtureRequest, spark_backend: SparkBackend) -> SparkBackend:
    """``spark_backend`` for a test of losing a host: the several-hosts cluster where the run has
    it (a local-cluster's executors share one filesystem, which such a test is about not
    having); a local-cluster only when it is the run's only cluster."""
    if spark_backend.hosts is None and "hosts" in selected_spark(request.config):
        pytest.skip("runs on the hosts cluster, where hosts share no files")
    return spark_backend

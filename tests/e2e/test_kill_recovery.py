"""Zero data loss across driver crashes: the user's application is SIGKILLed again and again while
messages flow, and restarted each time with ``StreamingContext.getOrCreate``.

The producer keeps sending until the last run has started (each kill lands while messages flow).
What its foreachRDD wrote across all runs must hold every produced message; what a run's receiver
read again must, per partition, fit in one block that the killed run before it stored (one block
per partition per kill); and every batch that had begun (so was allocated) but not finished when
the driver died must run again, from the write-ahead logs, after the restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.e2e.driver_kills import assert_no_loss_across_driver_kills

pytestmark = [pytest.mark.integration, pytest.mark.slow]


# Kafka 4 (offsets and membership in Kafka) meets the same driver kills, receivers on executors, in
# test_remote_kill_recovery[s3-kafka-4-executors] (its bounds and kills are these) and in the
# fault campaign's driver kills (test_chaos[kafka-4]); a third run of them here added only time.
@pytest.mark.brokers("3.9")
@pytest.mark.parametrize("placement", ["executors", "driver"])
def test_no_loss_across_driver_kills(local_cluster: LocalCluster, tmp_path: Path, placement: str) -> None:
    assert_no_loss_across_driver_kills(local_cluster, tmp_path, placement, str(tmp_path / "checkpoint"))

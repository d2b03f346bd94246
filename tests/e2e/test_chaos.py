"""The fault campaign (benchmarks/chaos.py), short and with a fixed seed: three minutes of random
driver, executor, broker, ZooKeeper, session, WAL-disk and (on the several-hosts cluster) host
faults against a running stream, on Kafka 3.9 with the group in ZooKeeper and on Kafka 4 with the
group in Kafka (no ZooKeeper, so no ZooKeeper fault), then the audit (nothing lost, at most one
block per partition delivered again per fault, committed offsets never backwards, every fault
recovered within 60 s, no process left behind).

It runs the campaign as its own program, with its own cluster, exactly as a person would: a
failure prints the command that replays the same faults (``--seed``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import selected_spark

# The campaign starts its own cluster of the broker kind (its faults kill it): the parameter only
# picks the kind, and groups the test with that broker's tests.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.brokers("3.9", "4")]

REPO = Path(__file__).resolve().parents[2]
SEED = 1616
MINUTES = 3


def test_a_three_minute_fault_campaign_loses_nothing(
    kafka_version: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # On the several-hosts cluster where the run has it: its faults include losing a host.
    spark = "hosts" if "hosts" in selected_spark(request.config) else "local-cluster"
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "chaos.py"),
        *("--minutes", str(MINUTES), "--seed", str(SEED), "--work-dir", str(tmp_path / "campaign")),
        *("--spark", spark, "--kafka", kafka_version),
    ]
    started = time.monotonic()
    # The campaign drains and stops gracefully after its minutes; a stuck one must not hang CI.
    result = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=MINUTES * 60 + 900, check=False
    )
    took = time.monotonic() - started
    print(result.stdout)
    assert result.returncode == 0, (
        f"campaign failed after {took:.0f} s; replay: python benchmarks/chaos.py --minutes {MINUTES} "
        f"--seed {SEED} --spark {spark} --kafka {kafka_version}\n"
        f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    )
    assert "PASS" in result.stdout
    if spark == "hosts":
        assert "fault" in result.stdout and "host-loss (host " in result.stdout, result.stdout[-3000:]
    # Kafka 4's group has no ZooKeeper to kill; its session faults evict the member instead.
    assert ("zookeeper-kill" in result.stdout) == (kafka_version == "3.9"), result.stdout[-3000:]

"""The fault campaign (benchmarks/chaos.py), short and with a fixed seed: three minutes of random
driver, executor, broker, ZooKeeper, session, WAL-disk and (on the several-hosts cluster) host
faults against a running stream, then the audit (nothing lost, at most one block per partition
delivered again per fault, committed offsets never backwards, every fault recovered within 60 s,
no process left behind).

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

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SEED = 1616
MINUTES = 3


def test_a_three_minute_fault_campaign_loses_nothing(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # On the several-hosts cluster where the run has it: its faults include losing a host.
    spark = "hosts" if "hosts" in selected_spark(request.config) else "local-cluster"
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "chaos.py"),
        *("--minutes", str(MINUTES), "--seed", str(SEED), "--work-dir", str(tmp_path / "campaign")),
        *("--spark", spark),
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
        f"--seed {SEED}\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    )
    assert "PASS" in result.stdout
    if spark == "hosts":
        assert "fault" in result.stdout and "host-loss (host " in result.stdout, result.stdout[-3000:]

"""The main job with ``--secure``: a secured local cluster, the job logged in as alice (SCRAM over
SASL_SSL, its group in a SASL ZooKeeper), every word counted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.kill_harness import REPO_ROOT
from tests.e2e.wordcount_example import committed_offsets_line

pytestmark = pytest.mark.integration


@pytest.mark.brokers("3.9")
def test_wordcount_example_counts_every_word_on_a_secured_cluster(kafka_version: str) -> None:
    command = [sys.executable, "-m", "reliable_kafka.examples.wordcount", "--secure", "--seconds", "3"]
    result = subprocess.run(
        [*command, "--rate", "20", "--kafka", kafka_version],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "OK: every word produced was counted" in result.stdout
    assert "secured: the job logs in as alice over SASL_SSL (SCRAM-SHA-512) at 127.0.0.1:" in result.stdout
    assert "ZooKeeper over SASL (DIGEST-MD5)" in result.stdout
    assert f"{committed_offsets_line(True, 'words')} 0=" in result.stdout

"""The README's main command: the word count example runs, counts every word produced, exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.kill_harness import REPO_ROOT

pytestmark = pytest.mark.integration


@pytest.mark.brokers("3.9", "0.9")
def test_wordcount_example_counts_every_word(kafka_version: str) -> None:
    # Its own process: the example starts its own cluster and its own SparkContext.
    command = [sys.executable, "-m", "reliable_kafka.examples.wordcount", "--seconds", "5", "--rate", "40"]
    if kafka_version != "3.9":  # the README's command runs the default, without --kafka
        command += ["--kafka", kafka_version]
    result = subprocess.run(
        command,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "OK: every word produced was counted" in result.stdout
    assert f"Kafka {kafka_version}." in result.stdout
    assert "committed offsets /consumers/wordcount/offsets/words/<partition>: 0=" in result.stdout
    assert "Time: " in result.stdout  # pprint's banner

"""The README's main command: the word count example runs, counts every word produced, exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.kill_harness import REPO_ROOT

pytestmark = pytest.mark.integration


def test_wordcount_example_counts_every_word() -> None:
    # Its own process: the example starts its own cluster and its own SparkContext.
    result = subprocess.run(
        [sys.executable, "-m", "reliable_kafka.examples.wordcount", "--seconds", "5", "--rate", "40"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "OK: every word produced was counted" in result.stdout
    assert "Kafka 3.9." in result.stdout  # the default broker
    assert "committed offsets /consumers/wordcount/offsets/words/<partition>: 0=" in result.stdout
    assert "Time: " in result.stdout  # pprint's banner

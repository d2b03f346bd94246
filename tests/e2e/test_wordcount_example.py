"""The README's main command: the word count example runs, counts every word produced, exits 0."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest

from reliable_kafka.local import LocalCluster
from tests.e2e.console import noise
from tests.e2e.kill_harness import REPO_ROOT
from tests.e2e.wordcount_example import committed_offsets_line, run_against_existing_cluster

pytestmark = pytest.mark.integration


@pytest.mark.brokers("3.9", "4", "0.9")
def test_wordcount_example_counts_every_word_and_prints_no_warning(kafka_version: str) -> None:
    """The README's first command as a new user runs it: every word counted, and a console with
    nothing to worry about in it."""
    # Its own process: the example starts its own cluster and its own SparkContext.
    command = [sys.executable, "-m", "reliable_kafka.examples.wordcount", "--seconds", "5", "--rate", "40"]
    if kafka_version != "3.9":  # the README's command runs the default, without --kafka
        command += ["--kafka", kafka_version]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "OK: every word produced was counted" in result.stdout
    assert f"Kafka {kafka_version}." in result.stdout
    assert f"{committed_offsets_line(kafka_version != '4', 'words')} 0=" in result.stdout
    assert "Time: " in result.stdout  # pprint's banner
    # On two cores the example's batches take about their interval (issue 45), so its graceful stop
    # may find a few queued and say so, once, at WARNING with its bound: the one line allowed.
    console = noise(result.stdout + result.stderr)
    announced = [line for line in console if "Stopping gracefully with " in line]
    assert len(announced) <= 1, announced
    assert [line for line in console if line not in announced] == []
    # Each batch's blocks (one receiver, one place, a few kB) are read by one task, not one per block.
    batches = [
        (int(words), int(tasks))
        for words, tasks in re.findall(
            r"(\d+) words in this batch \(input read by (\d+) tasks?\)", result.stdout
        )
    ]
    tasks_of_batches_with_words = [tasks for words, tasks in batches if words > 0]
    assert tasks_of_batches_with_words and set(tasks_of_batches_with_words) == {1}, batches
    summary = re.search(
        r"processing time p50 (\d+) ms, p99 (\d+) ms, max (\d+) ms \(interval 1000 ms\); "
        r"scheduling delay max (\d+) ms",
        result.stdout,
    )
    assert summary is not None, result.stdout[-3000:]
    p50, p99, longest, _ = (int(group) for group in summary.groups())
    assert p50 <= p99 <= longest


# On 3.9 here; the same path against Kafka 4 (group in Kafka) and 0.9 runs in the docker half
# (test_docker_clusters.py::test_the_readme_main_job_against_the_compose_cluster, each broker).
@pytest.mark.brokers("3.9")
def test_wordcount_example_runs_against_an_existing_cluster(local_cluster: LocalCluster) -> None:
    output = run_against_existing_cluster(local_cluster, f"wordcount-existing-{uuid.uuid4().hex[:8]}")
    assert "Kafka 3.9" not in output and "Kafka 4" not in output, "it started a LocalCluster of its own"
    # A stop that gave up on batches, or whose drain outlasted gracefulStopTimeout, says so.
    assert "Graceful stop:" not in output and "Batches still to process" not in output

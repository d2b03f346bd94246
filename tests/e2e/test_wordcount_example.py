"""The README's main command: the word count example runs, counts every word produced, exits 0."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from reliable_kafka.local import LocalCluster
from tests.e2e.console import noise
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


@pytest.mark.brokers("3.9", "0.9")
def test_a_healthy_main_job_prints_no_warning_or_error(kafka_version: str) -> None:
    """The console of the README's first command, as a new user sees it: nothing to worry about."""
    command = [sys.executable, "-m", "reliable_kafka.examples.wordcount", "--seconds", "5", "--rate", "40"]
    command += ["--kafka", kafka_version]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert noise(result.stdout + result.stderr) == []


@pytest.mark.brokers("3.9")
def test_wordcount_example_runs_against_an_existing_cluster(local_cluster: LocalCluster) -> None:
    topic = f"wordcount-existing-{uuid.uuid4().hex[:8]}"  # missing: the example creates it
    command = [
        sys.executable,
        "-m",
        "reliable_kafka.examples.wordcount",
        *("--zookeeper", local_cluster.zookeeper_connect),
        *("--bootstrap-servers", local_cluster.bootstrap_servers),
        *("--topic", topic, "--duration", "4", "--rate", "40", "--partitions", "3"),
        # Short batches: ten of them (Spark's default graceful stop timeout) pass before a backlog
        # of batches drains, which is what made a normal stop warn.
        *("--batch-duration", "0.25"),
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    output = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, output
    assert "OK: every word produced was counted" in result.stdout
    assert "Kafka 3.9" not in result.stdout, "it started a LocalCluster of its own"
    assert f"created topic {topic} with 3 partitions" in result.stdout
    assert f"committed offsets /consumers/wordcount/offsets/{topic}/<partition>: 0=" in result.stdout
    assert "batch " in result.stdout and "(printed at " in result.stdout
    assert "Timed out while stopping the job generator" not in output
    summary = re.search(r"produced (\d+) words in (\d+) lines; counted (\d+) words", result.stdout)
    assert summary is not None, output
    produced, lines, counted = (int(g) for g in summary.groups())
    assert produced == counted > 0
    # What it produced went to the given topic of this cluster.
    assert words_in_topic(local_cluster, topic, partitions=3, lines=lines) == produced


def words_in_topic(cluster: LocalCluster, topic: str, partitions: int, lines: int) -> int:
    consumer = Consumer(cluster.client_config(**{"group.id": f"check-{topic}", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        read = words = 0
        while read < lines:
            message = consumer.poll(30)
            assert message is not None, f"read {read} of {lines} lines"
            if message.error() is None:
                read += 1
                words += len(message.value().split(b" "))
        return words
    finally:
        consumer.close()

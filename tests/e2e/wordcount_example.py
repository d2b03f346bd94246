"""The README's word count example (``python -m reliable_kafka.examples.wordcount``) run as a
command against an existing cluster, and how it names the offsets its group committed."""

from __future__ import annotations

import re
import subprocess
import sys

from confluent_kafka import Consumer, TopicPartition

from tests.cluster_backends import ClusterUnderTest
from tests.e2e.kill_harness import REPO_ROOT


def committed_offsets_line(in_zookeeper: bool, topic: str) -> str:
    """How the example names the offsets its group committed: where they live."""
    if in_zookeeper:
        return f"committed offsets /consumers/wordcount/offsets/{topic}/<partition>:"
    return f"committed offsets of group wordcount in Kafka, {topic}/<partition>:"


def run_against_existing_cluster(cluster: ClusterUnderTest, topic: str) -> str:
    """The README's ``--zookeeper/--bootstrap-servers`` path (``--bootstrap-servers`` alone without
    a ZooKeeper: the group in Kafka) on a topic it creates: every word counted, and what it
    produced went to that topic. Returns the example's output."""
    command = [sys.executable, "-m", "reliable_kafka.examples.wordcount"]
    if cluster.has_zookeeper:
        command += ["--zookeeper", cluster.zookeeper_connect]
    command += [
        *("--bootstrap-servers", cluster.bootstrap_servers),
        *("--topic", topic, "--duration", "4", "--rate", "40", "--partitions", "3"),
        # Short batches: ten of them (Spark's default graceful stop timeout) pass before a backlog
        # of batches drains, which is what made a normal stop warn.
        *("--batch-duration", "0.25"),
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    output = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, output
    assert "OK: every word produced was counted" in result.stdout, output
    assert f"created topic {topic} with 3 partitions" in result.stdout
    assert f"{committed_offsets_line(cluster.has_zookeeper, topic)} 0=" in result.stdout
    assert "batch " in result.stdout and "(printed at " in result.stdout
    summary = re.search(r"produced (\d+) words in (\d+) lines; counted (\d+) words", result.stdout)
    assert summary is not None, output
    produced, lines, counted = (int(g) for g in summary.groups())
    assert produced == counted > 0
    # What it produced went to the given topic of this cluster.
    assert words_in_topic(cluster, topic, partitions=3, lines=lines) == produced
    return output


def words_in_topic(cluster: ClusterUnderTest, topic: str, partitions: int, lines: int) -> int:
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

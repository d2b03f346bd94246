"""Kafka's command-line tools (``kafka-consumer-groups``...) for tests, from the broker's version.

The cached broker holds the broker's jars only; since Kafka 3.7 the tools live in
``org.apache.kafka:kafka-tools``, resolved here once with Maven into a sibling of the broker's
cache (checksums verified by Maven, as for the broker).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.distribution import KafkaDistribution, kafka_classpath, kafka_distribution
from reliable_kafka.local.java import find_java

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

_POM = """<project>
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.reliable-kafka</groupId>
  <artifactId>kafka-tools-for-tests</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{version}</version></dependency>
  </dependencies>
</project>
"""


def _tools_libs(dist: KafkaDistribution) -> Path:
    home = dist.cache_dir.parent / f"kafka-tools-{dist.version}"
    libs = home / "libs"
    if any(libs.glob("kafka-tools-*.jar")):
        return libs
    mvn = shutil.which("mvn")
    assert mvn is not None, f"'mvn' is needed once to fetch Kafka {dist.version}'s tools"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "pom.xml").write_text(_POM.format(version=dist.version))
    done = subprocess.run(
        [
            mvn,
            "-B",
            "-q",
            "--strict-checksums",
            "-f",
            str(home / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={libs}",
            "-DincludeScope=runtime",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and any(libs.glob("kafka-tools-*.jar")), (
        f"fetching Kafka {dist.version}'s tools failed:\n{done.stdout[-3000:]}"
    )
    return libs


def run_tool(kafka: str, main_class: str, *args: str, timeout_s: float = 120.0) -> str:
    """Run one of Kafka ``kafka``'s tools (``3.9``, ``4``); its stdout. Fails the test on exit != 0."""
    dist = kafka_distribution(kafka)
    # The tools' own jars first: they pin the versions the tool was built against.
    classpath = f"{_tools_libs(dist)}/*:{kafka_classpath(kafka)}"
    done = subprocess.run(
        [find_java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath, main_class, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"{main_class} exited with {done.returncode}:\n{done.stderr[-2000:]}"
    return done.stdout


def describe_group(cluster: LocalCluster, group: str) -> dict[tuple[str, int], dict[str, str]]:
    """``kafka-consumer-groups --describe --group``, one row per partition, by column name.

    On 4.x, the tool of Kafka 3.9: the 4.x broker's jars hold no tools, and its own kafka-tools
    artifact does not resolve here; the 3.9 tool speaks the Admin API every 4.x broker serves.
    """
    out = run_tool(
        "3.9" if cluster.kafka == "4" else cluster.kafka,
        CONSUMER_GROUP_COMMAND,
        "--bootstrap-server",
        cluster.bootstrap_servers,
        "--describe",
        "--group",
        group,
    )
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header_at = next(i for i, line in enumerate(lines) if line[:2] == ["GROUP", "TOPIC"])
    rows = [dict(zip(lines[header_at], line, strict=False)) for line in lines[header_at + 1 :]]
    return {(row["TOPIC"], int(row["PARTITION"])): row for row in rows if row["GROUP"] == group}

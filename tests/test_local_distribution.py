"""Which broker a name means, and the pom Maven resolves it from (no download here)."""

from __future__ import annotations

import io
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reliable_kafka.local import distribution
from tests.conftest import KAFKA_KINDS


def test_the_test_suite_knows_every_broker_the_library_runs() -> None:
    assert KAFKA_KINDS == distribution.KAFKA_KINDS
    assert distribution.DEFAULT_KAFKA == "3.9"


@pytest.mark.parametrize(
    ("name", "kind"), [("3.9", "3.9"), ("kafka-3.9", "3.9"), ("4", "4"), ("4.x", "4"), ("KAFKA-0.9", "0.9")]
)
def test_broker_names(name: str, kind: str) -> None:
    assert distribution.kafka_distribution(name).kind == kind


def test_an_unknown_broker_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"choose one of 3\.9, 4, 0\.9"):
        distribution.kafka_distribution("2.8")


def test_modes_and_protocols() -> None:
    modern, kraft, legacy = (distribution.kafka_distribution(k) for k in ("3.9", "4", "0.9"))
    assert modern.needs_zookeeper and not modern.kraft and not modern.legacy_protocol
    assert kraft.kraft and not kraft.needs_zookeeper and not kraft.legacy_protocol
    assert legacy.needs_zookeeper and legacy.legacy_protocol and not legacy.maven_artifacts


@pytest.mark.parametrize("kind", ["3.9", "4"])
def test_the_generated_pom_asks_for_the_broker_and_its_log_binding(kind: str) -> None:
    dist = distribution.kafka_distribution(kind)
    root = ET.fromstring(distribution._pom(dist))
    coordinates = [
        ":".join(d.findtext(part) or "" for part in ("groupId", "artifactId", "version"))
        for d in root.iterfind("dependencies/dependency")
    ]
    assert coordinates == list(dist.maven_artifacts)
    assert f"org.apache.kafka:kafka_2.13:{dist.version}" in coordinates
    assert dist.version.startswith(f"{kind}.")


FAKE_MVN = """#!/bin/sh
# Prints what `mvn -B ... dependency:copy-dependencies` prints with every jar already in ~/.m2.
for arg in "$@"; do
    case "$arg" in -DoutputDirectory=*) libs="${arg#-DoutputDirectory=}" ;; esac
done
mkdir -p "$libs"
echo "[INFO] Scanning for projects..."
echo "[INFO] --- maven-dependency-plugin:2.8:copy-dependencies (default-cli) @ kafka-broker-3.9 ---"
for jar in kafka_2.13-3.9.2.jar kafka-clients-3.9.2.jar zstd-jni-1.5.6-4.jar; do
    echo "[INFO] Copying $jar to $libs/$jar"
    : > "$libs/$jar"
done
echo "[INFO] BUILD SUCCESS"
"""


def test_a_fetch_from_a_warm_maven_repository_shows_a_progress_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 42, item 5: with every jar already in ~/.m2, Maven downloads nothing and copies the
    jars: the copies are the progress (a real mvn is not needed to print its lines)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text(FAKE_MVN)
    (bin_dir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    jars = distribution.MavenJars(
        "Kafka 3.9.2", "kafka-broker-3.9", ("org.apache.kafka:kafka_2.13:3.9.2",), 47, "kafka_2.13-3.9.2.jar"
    )
    distribution.maven_copy_jars(jars, tmp_path, tmp_path / "libs", lambda why: why)

    start, progress, done = capsys.readouterr().err.splitlines()
    assert start == "reliable-kafka: fetching Kafka 3.9.2 (about 47 MB, once) with mvn"
    assert re.fullmatch(
        r"reliable-kafka: fetching Kafka 3\.9\.2: 0 files downloaded \(0\.0 MB; the jars are about 47 MB\), "
        r"1 jars copied, \d+ s",
        progress,
    ), progress
    assert re.fullmatch(
        r"reliable-kafka: fetched Kafka 3\.9\.2: 3 jars in [\d.]+ s \(0 files downloaded, 0\.0 MB\), "
        r"checksums verified by Maven",
        done,
    ), done


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


DOWNLOADED = "[INFO] Downloaded from central: https://repo/x/{0} (1.5 MB at 3 MB/s)"


def test_elsewhere_than_a_terminal_the_progress_line_comes_at_most_every_ten_seconds() -> None:
    clock, log = Clock(), io.StringIO()
    progress = distribution._Progress("Kafka 4.4.0", 45, stream=log, now=clock)
    for second in range(25):
        clock.now = float(second)
        progress.line(DOWNLOADED.format(f"a{second}.jar"))
    lines = log.getvalue().splitlines()
    assert [line.rsplit(", ", 1)[-1] for line in lines] == ["0 s", "10 s", "20 s"]
    assert lines[1] == (
        "reliable-kafka: fetching Kafka 4.4.0: 11 files downloaded (16.5 MB; the jars are about 45 MB), "
        "0 jars copied, 10 s"
    )


def test_on_a_terminal_the_progress_line_is_rewritten_in_place() -> None:
    clock, screen = Clock(), Terminal()
    progress = distribution._Progress("Kafka 4.4.0", 45, stream=screen, now=clock)
    progress.line(DOWNLOADED.format("a.jar"))
    progress.line("[INFO] Downloading from central: https://repo/x/b.jar")  # not a finished file
    progress.line("[INFO] Copying a.jar to /libs/a.jar")
    clock.now = 3.0
    progress.done(1)
    counts = "1 files downloaded (1.5 MB; the jars are about 45 MB)"
    assert screen.getvalue() == (
        f"\rreliable-kafka: fetching Kafka 4.4.0: {counts}, 0 jars copied, 0 s"
        f"\rreliable-kafka: fetching Kafka 4.4.0: {counts}, 1 jars copied, 0 s\n"
        "reliable-kafka: fetched Kafka 4.4.0: 1 jars in 3.0 s (1 files downloaded, 1.5 MB), "
        "checksums verified by Maven\n"
    )

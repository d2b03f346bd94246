"""Spark's own JVM Kafka connectors, the DStream one with a small app of ours on it and the
Structured Streaming source, for benchmarks that compare against them.

``spark-streaming-kafka-0-10_2.13`` 4.2.0 (the newest Maven Central serves; it runs on pyspark 4.3's
JVM) with the two jars it needs beyond what pyspark's ``jars/`` already holds, resolved once with
``mvn dependency:copy`` (Maven checks each checksum) into the user cache dir, beside the brokers.
Transitive dependencies are left out on purpose: Spark, Scala, Hadoop, lz4 and snappy come from
pyspark itself, and a second copy on the class path would clash with them.

``spark-sql-kafka-0-10_2.13`` 4.2.0 (the Structured Streaming source, for ``spark.jars``) is fetched
the same way into a directory of its own, with what its POM needs at compile scope that pyspark's
``jars/`` lacks: the token provider, ``kafka-clients`` and ``commons-pool2`` (its consumer pool).

The app, benchmarks/jvm/DirectKafkaCount.java, is compiled with ``javac`` against pyspark's jars and
the connector into a jar beside them, named by the hash of its source and pyspark's version: it is
compiled again only when either changed. ``spark-submit`` (pyspark's own) runs it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pyspark

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliable_kafka.local.distribution import cache_root, maven_pom

COORDINATES = (
    "org.apache.spark:spark-streaming-kafka-0-10_2.13:4.2.0",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.2.0",
    "org.apache.kafka:kafka-clients:3.9.2",
)
SQL_COORDINATES = (
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.2.0",
    "org.apache.kafka:kafka-clients:3.9.2",
    "org.apache.commons:commons-pool2:2.13.1",
)
_MAVEN_TIMEOUT_S = 900
APP_SOURCE = Path(__file__).resolve().parent / "jvm" / "DirectKafkaCount.java"
APP_CLASS = "DirectKafkaCount"
PYSPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_SUBMIT = PYSPARK_HOME / "bin" / "spark-submit"


def kafka010_jars() -> list[Path]:
    """The DStream connector's jars, fetched on first use."""
    return _maven_jars("spark-streaming-kafka-0-10-4.2.0", "spark-kafka010-bench", COORDINATES)


def sql_kafka_jars() -> list[Path]:
    """The Structured Streaming Kafka source's jars, fetched on first use."""
    return _maven_jars("spark-sql-kafka-0-10-4.2.0", "spark-sql-kafka010-bench", SQL_COORDINATES)


def _maven_jars(directory: str, artifact_id: str, coordinates: tuple[str, ...]) -> list[Path]:
    libs = cache_root() / directory
    names = [f"{c.split(':')[1]}-{c.split(':')[2]}.jar" for c in coordinates]
    if not all((libs / name).is_file() for name in names):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise SystemExit("Spark's Kafka connectors are fetched with 'mvn', which is not on PATH")
        libs.mkdir(parents=True, exist_ok=True)
        pom = libs / "pom.xml"
        pom.write_text(maven_pom(artifact_id, coordinates))
        command = [
            *(mvn, "-B", "-q", "--strict-checksums", "-f", str(pom), "dependency:copy-dependencies"),
            *(f"-DoutputDirectory={libs}", "-DexcludeTransitive=true", "-DincludeScope=runtime"),
        ]
        subprocess.run(command, check=True, timeout=_MAVEN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return [libs / name for name in names]


def direct_kafka_count_jar() -> Path:
    """benchmarks/jvm/DirectKafkaCount.java compiled (Java 17) into a jar beside the connector's."""
    connector = kafka010_jars()
    source = APP_SOURCE.read_bytes()
    digest = hashlib.sha256(source + pyspark.__version__.encode()).hexdigest()[:16]
    jar = connector[0].parent / f"direct-kafka-count-{digest}.jar"
    if jar.is_file():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise SystemExit(
            f"{APP_SOURCE.name} is compiled with javac (JDK 17), which is not on PATH: "
            "install openjdk-17-jdk-headless"
        )
    classpath = os.pathsep.join([str(PYSPARK_HOME / "jars" / "*"), *map(str, connector)])
    with tempfile.TemporaryDirectory(dir=jar.parent) as scratch:
        classes = Path(scratch) / "classes"
        command = [javac, "--release", "17", "-cp", classpath, "-d", str(classes), str(APP_SOURCE)]
        subprocess.run(command, check=True, timeout=300, stdin=subprocess.DEVNULL)
        staged = Path(scratch) / jar.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        staged.replace(jar)
    return jar


if __name__ == "__main__":
    for jar in [*kafka010_jars(), *sql_kafka_jars()]:
        print(jar)
    print(direct_kafka_count_jar())

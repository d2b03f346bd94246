"""Spark's own JVM Kafka DStream connector, for benchmarks that compare against it.

``spark-streaming-kafka-0-10_2.13`` 4.2.0 (the newest Maven Central serves; it runs on pyspark 4.3's
JVM) with the two jars it needs beyond what pyspark's ``jars/`` already holds, resolved once with
``mvn dependency:copy`` (Maven checks each checksum) into the user cache dir, beside the brokers.
Transitive dependencies are left out on purpose: Spark, Scala, Hadoop, lz4 and snappy come from
pyspark itself, and a second copy on the class path would clash with them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliable_kafka.local.distribution import cache_root, maven_pom

COORDINATES = (
    "org.apache.spark:spark-streaming-kafka-0-10_2.13:4.2.0",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.2.0",
    "org.apache.kafka:kafka-clients:3.9.2",
)
_MAVEN_TIMEOUT_S = 900


def kafka010_jars() -> list[Path]:
    """The connector's jars, fetched on first use."""
    libs = cache_root() / "spark-streaming-kafka-0-10-4.2.0"
    names = [f"{c.split(':')[1]}-{c.split(':')[2]}.jar" for c in COORDINATES]
    if not all((libs / name).is_file() for name in names):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise SystemExit("Spark's Kafka connector is fetched with 'mvn', which is not on PATH")
        libs.mkdir(parents=True, exist_ok=True)
        pom = libs / "pom.xml"
        pom.write_text(maven_pom("spark-kafka010-bench", COORDINATES))
        command = [
            *(mvn, "-B", "-q", "--strict-checksums", "-f", str(pom), "dependency:copy-dependencies"),
            *(f"-DoutputDirectory={libs}", "-DexcludeTransitive=true", "-DincludeScope=runtime"),
        ]
        subprocess.run(command, check=True, timeout=_MAVEN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return [libs / name for name in names]


if __name__ == "__main__":
    for jar in kafka010_jars():
        print(jar)

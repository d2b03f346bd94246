"""What this project is tested with: one place, read by the docs (``docs/hooks/versions.py``
renders it as a table) and by the tests (``tests/test_versions.py`` checks it against the local
cluster's brokers, the test suite's broker kinds, ``.ci/run`` and the interpreter, pyspark and Java
the suite runs on).

Plain data only: importing it loads nothing else, so the docs build and ``tests/wal`` stay light.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tested:
    """One component: the versions CI runs the suite (or the named subset) on."""

    name: str
    versions: tuple[str, ...]
    how: str


# The brokers ``reliable_kafka.local`` runs, by kind (``--kafka``): the full version of each.
KAFKA: dict[str, str] = {"3.9": "3.9.2", "4": "4.4.0", "0.9": "0.9.0.1"}
PYTHON: tuple[str, ...] = ("3.11",)
# pyspark 4.x runs the whole suite; 3.5 the smoke set of ``.ci/run`` (in a virtualenv of its own).
PYSPARK: tuple[str, ...] = ("4.x", "3.5")
PYSPARK_SMOKE_PIN = "pyspark>=3.5,<3.6"
# confluent-kafka (and its librdkafka): the newest verified runs the suite, the oldest accepted the smoke set.
CONFLUENT_KAFKA: tuple[str, ...] = ("2.16", "2.6")
CONFLUENT_KAFKA_SMOKE_PIN = "confluent-kafka>=2.6,<2.7"
JAVA: tuple[str, ...] = ("17",)

TESTED: tuple[Tested, ...] = (
    Tested("Python", PYTHON, "every test; 3.11 or later is required"),
    Tested(
        "pyspark",
        PYSPARK,
        "4.x: the whole suite; 3.5: the smoke set of `.ci/run` (located tasks, Spark internals, "
        "the reliable receiver, driver kills, the main job)",
    ),
    Tested(
        "Kafka",
        tuple(KAFKA.values()),
        "3.9.2 (ZooKeeper mode): the whole suite; 4.4.0 (KRaft, no ZooKeeper): the tests that need "
        "no ZooKeeper; 0.9.0.1: the receiver protocol tests and direct streams",
    ),
    Tested(
        "confluent-kafka",
        CONFLUENT_KAFKA,
        "2.16 (the newest packed fetch is verified with): the whole suite; 2.6: the pyspark 3.5 smoke set",
    ),
    Tested("Java", JAVA, "ZooKeeper, the brokers, HDFS and Spark's JVM in every test (17 or later)"),
)

"""Which broker a name means, and the pom Maven resolves it from (no download here)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

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

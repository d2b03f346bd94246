"""reliable_kafka/versions.py, the one place the docs state what is tested, agrees with what the
suite runs: the local cluster's brokers, the suite's broker kinds, this interpreter, pyspark,
confluent-kafka and Java, and the pins of .ci/run's pyspark 3.5 smoke set."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from importlib.metadata import version

import pytest

from reliable_kafka import versions
from reliable_kafka.local import distribution
from tests.conftest import KAFKA_KINDS
from tests.support.docs_blocks import REPO


def _minor(text: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", text).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def test_the_brokers_are_the_local_cluster_s() -> None:
    assert {kind: d.version for kind, d in distribution.DISTRIBUTIONS.items()} == versions.KAFKA
    assert tuple(versions.KAFKA) == KAFKA_KINDS


def test_this_interpreter_is_a_tested_python() -> None:
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in versions.PYTHON


def test_the_installed_pyspark_and_confluent_kafka_are_tested_ones() -> None:
    pyspark = _minor(version("pyspark"))
    assert any(
        pyspark[0] == int(v.split(".")[0]) if v.endswith(".x") else pyspark == _minor(v)
        for v in versions.PYSPARK
    ), pyspark
    tested = sorted(_minor(v) for v in versions.CONFLUENT_KAFKA)
    assert tested[0] <= _minor(version("confluent-kafka")) <= tested[-1]


def test_java_is_a_tested_one() -> None:
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    banner = subprocess.run([java, "-version"], capture_output=True, text=True, check=True).stderr
    major = int(re.search(r'version "(\d+)', banner).group(1))  # type: ignore[union-attr]
    assert major >= int(min(versions.JAVA)), banner


def test_ci_runs_the_smoke_set_on_the_stated_pins() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert f"'{versions.PYSPARK_SMOKE_PIN}'" in ci
    assert f"'{versions.CONFLUENT_KAFKA_SMOKE_PIN}'" in ci


def test_the_docs_table_shows_every_version() -> None:
    path = REPO / "docs" / "hooks" / "versions.py"
    spec = importlib.util.spec_from_file_location("docs_versions_hook", path)
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    table = hook.on_page_markdown("before\n{{ tested_versions }}\nafter")
    for tested in versions.TESTED:
        assert f"| {tested.name} | {', '.join(tested.versions)} |" in table


def test_the_local_cluster_page_names_the_same_brokers() -> None:
    page = (REPO / "docs" / "local-cluster.md").read_text(encoding="utf-8")
    for kind, full in versions.KAFKA.items():
        assert f'| `"{kind}"`' in page and f"Kafka {full}" in page, (kind, full)

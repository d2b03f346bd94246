"""The suite's parallel layout (tests/parallel_layout.py) and the flake loop's bookkeeping."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.parallel_layout import auto_workers, broker_in_node_id, group_of, load_durations
from tests.support.flake_loop import AlongsideLoad, junit_name, outcomes, watch_list

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("node_id", "broker"),
    [
        ("tests/x.py::t[kafka-3.9]", "3.9"),
        ("tests/x.py::t[local-kafka-4]", "4"),
        ("tests/x.py::t[docker-kafka-0.9-dual]", "0.9"),
        ("tests/x.py::t[spark-hosts-kafka-4]@spark-hosts", "4"),
        ("tests/x.py::t[kafka-3.9-executors]", "3.9"),
        ("tests/x.py::t", None),
        ("tests/x.py::t[hdfs]", None),
    ],
)
def test_the_broker_is_read_from_the_test_id(node_id: str, broker: str | None) -> None:
    assert broker_in_node_id(node_id) == broker


def test_the_worker_count_can_be_set_and_is_at_least_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELIABLE_KAFKA_TEST_WORKERS", "2")
    assert auto_workers() == 2
    monkeypatch.delenv("RELIABLE_KAFKA_TEST_WORKERS")
    assert 1 <= auto_workers() <= 3


@pytest.mark.parametrize(
    ("cores", "gib", "workers"), [(1, 24.0, 2), (2, 24.0, 3), (8, 24.0, 3), (2, 10.0, 2)]
)
def test_one_worker_more_than_the_cores_within_memory(
    monkeypatch: pytest.MonkeyPatch, cores: int, gib: float, workers: int
) -> None:
    monkeypatch.delenv("RELIABLE_KAFKA_TEST_WORKERS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(cores)))
    monkeypatch.setattr("tests.parallel_layout._available_memory_gib", lambda: gib)
    assert auto_workers() == workers


def test_the_durations_file_names_tests_of_this_suite() -> None:
    durations = load_durations()
    assert durations, "tests/durations.json is empty or unreadable"
    files = {node_id.split("::", 1)[0] for node_id in durations}
    gone = sorted(f for f in files if not (ROOT / f).exists())
    assert not gone, (
        f"tests/durations.json names files that are gone (python -m tests.support.durations --prune): {gone}"
    )


def test_every_watched_test_names_a_file_of_the_suite() -> None:
    ids = watch_list()
    assert len(ids) >= 20
    assert all((ROOT / test_id.split("::", 1)[0]).exists() for test_id in ids), ids


def test_the_load_alongside_is_started_again_once_it_ends_and_stopped_at_the_end() -> None:
    load = AlongsideLoad(shlex.join([sys.executable, "-c", "import time; time.sleep(600)"]))
    try:
        load.keep_running()
        load.keep_running()
        assert load.starts == 1  # still running: left alone
        load.stop()
        load.keep_running()
        assert load.starts == 2  # ended: started again
    finally:
        load.stop()


def test_a_rounds_outcomes_are_read_per_test_from_its_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "round.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.e2e.test_x" name="test_a[kafka-3.9]" time="1"/>'
        '<testcase classname="tests.e2e.test_x" name="test_b" time="1"><failure message="no"/></testcase>'
        '<testcase classname="tests.e2e.test_x" name="test_c" time="1"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    found = outcomes(report)
    assert found[junit_name("tests/e2e/test_x.py::test_a[kafka-3.9]")] is True
    assert found[junit_name("tests/e2e/test_x.py::test_b")] is False
    assert found[junit_name("tests/e2e/test_x.py::test_c")] is True


@pytest.mark.parametrize(
    ("node_id", "group"),
    [
        ("tests/kafka/test_x.py::t[docker-kafka-4-kafka]", "docker-kafka-4"),
        ("tests/e2e/test_executor_placement.py::t[spark-hosts-kafka-3.9]", "several hosts"),
        ("tests/e2e/test_remote_host_loss.py::t[hdfs-spark-hosts-kafka-3.9]", "several hosts"),
        ("tests/e2e/test_executor_placement.py::t[spark-local-cluster-kafka-3.9]", None),
        ("tests/e2e/test_kill_recovery.py::t[kafka-3.9-executors]", None),
        ("tests/e2e/test_packed_venv_deploy.py::t[kafka-3.9]", "several hosts"),
        ("tests/integration/test_local_spark_hosts.py::t", "several hosts"),
        ("tests/kafka/test_x.py::t[spark-hosts-kafka-4]", "several hosts"),
        ("tests/integration/test_local_cluster.py::t[docker-kafka-3.9]", "docker-kafka-3.9"),
        # The compose clusters' own tests name the cluster kind after the broker.
        ("tests/integration/test_docker_clusters.py::t[kafka-4-docker]", "docker-kafka-4"),
        ("tests/integration/test_docker_clusters.py::t[kafka-0.9-docker]", "docker-kafka-0.9"),
        ("tests/util/test_located_rdd.py::t[pyspark-4.3.0]", "module tests/util/test_located_rdd.py"),
        ("tests/wal/test_write_ahead_log.py::t", None),
        ("tests/yarn/test_yarn_wordcount.py::t[client-kafka-3.9]", "yarn"),
        ("tests/yarn/test_local_yarn.py::t", "yarn"),
    ],
)
def test_tests_that_must_share_a_worker_are_grouped_by_their_id(node_id: str, group: str | None) -> None:
    assert group_of(node_id) == group

"""located_rdd on a real Spark, once per Spark line (the running pyspark's version is in the
test id): a two-executor ``local-cluster`` and ``local[2]``, each in a child process because a
process holds one SparkContext and the session's shared one is ``local[4]``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyspark
import pytest

from reliable_kafka.util import located_rdd as located

pytestmark = pytest.mark.integration

CHILD = Path(__file__).with_name("located_rdd_child.py")
REPO = Path(__file__).resolve().parents[2]
# Only a guard against a hung child; nothing here measures time.
CHILD_TIMEOUT_S = 540


def _run_child(master: str, work_dir: Path, *args: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    # The standalone workers of local-cluster write under SPARK_HOME/work unless told otherwise.
    env["SPARK_WORKER_DIR"] = str(work_dir / "worker")
    env["SPARK_LOCAL_DIRS"] = str(work_dir / "local")
    env.pop(located.DRIVER_HOST_ENV, None)
    completed = subprocess.run(
        [sys.executable, str(CHILD), master, *args],
        cwd=work_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    assert completed.returncode == 0 and lines, (
        f"child on {master} failed ({completed.returncode}):\n{completed.stdout[-4000:]}\n"
        f"{completed.stderr[-8000:]}"
    )
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.fixture(scope="module", params=[pyspark.__version__], ids=lambda v: f"pyspark-{v}")
def spark_line(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def cluster(spark_line: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    result = _run_child("local-cluster[2,2,1024]", tmp_path_factory.mktemp("local-cluster"))
    assert result["pyspark"] == spark_line
    return result


@pytest.fixture(scope="module")
def local(spark_line: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    result = _run_child("local[2]", tmp_path_factory.mktemp("local"))
    assert result["pyspark"] == spark_line
    return result


@pytest.fixture(scope="module")
def starved(spark_line: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    result = _run_child("local-cluster[1,1,1024]", tmp_path_factory.mktemp("starved"), "starved")
    assert result["pyspark"] == spark_line
    return result


def _executors(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [tuple(pair) for pair in result["executor_locations"]]


def _loc(host: str, executor_id: str) -> str:
    return f"executor_{host}_{executor_id}"


def test_executor_locations_are_the_two_executors_not_the_driver(cluster: dict[str, Any]) -> None:
    executors = _executors(cluster)
    assert len(executors) == 2
    assert len({executor_id for _, executor_id in executors}) == 2
    assert "driver" not in {executor_id for _, executor_id in executors}
    assert [tuple(pair) for pair in cluster["executors"]] == executors


def test_waiting_for_more_executors_than_there_are_returns_those_there(cluster: dict[str, Any]) -> None:
    assert [tuple(pair) for pair in cluster["too_many_wanted"]] == _executors(cluster)


def test_waiting_where_no_executor_can_start_returns_none_and_leaves_no_job(starved: dict[str, Any]) -> None:
    assert starved["executors"] == []
    # The dummy job that waited for executors was cancelled and its thread is gone.
    assert starved["waiting_threads"] == []


def test_one_element_rdd_runs_on_the_executor_it_names_first_a_then_b(cluster: dict[str, Any]) -> None:
    for host, executor_id in _executors(cluster):
        run = cluster["single"][executor_id]
        assert run["num_partitions"] == 1
        assert run["source_locations"] == [[_loc(host, executor_id)]]
        # The scheduler sees the preference through the pipelined Python RDD on top.
        assert run["scheduler_locations"] == [[_loc(host, executor_id)]]
        [row] = run["rows"]
        assert (row["host"], row["executor"]) == (host, executor_id)
        # A standalone worker starts its executors without --bind-address: they bind their host.
        assert row["bind_address"] == host


def test_each_element_reaches_python_as_its_raw_bytes(cluster: dict[str, Any]) -> None:
    for _, executor_id in _executors(cluster):
        [row] = cluster["single"][executor_id]["rows"]
        assert bytes.fromhex(row["data"]) == b"\x00\xffone-" + executor_id.encode()


def test_many_elements_each_run_where_their_partition_prefers(cluster: dict[str, Any]) -> None:
    preferences = cluster["mixed_preferences"]
    run = cluster["mixed"]
    assert run["num_partitions"] == len(preferences)
    assert run["source_locations"] == [sorted(p) for p in preferences]
    assert run["scheduler_locations"] == [sorted(p) for p in preferences]
    rows = sorted(run["rows"], key=lambda row: row["split"])
    assert [bytes.fromhex(row["data"]) for row in rows] == [
        f"block-{i}".encode() for i in range(len(preferences))
    ]
    for row, preferred in zip(rows, preferences, strict=True):
        here = _loc(row["host"], row["executor"])
        # A plain host preference means any executor on that host.
        assert here in preferred or row["host"] in preferred, (row, preferred)
    assert {row["executor"] for row in rows} == {executor_id for _, executor_id in _executors(cluster)}


def test_a_partition_without_preference_lets_spark_run_executor_preferences_host_local(
    cluster: dict[str, Any],
) -> None:
    """Spark's NO_PREF pass also takes NODE_LOCAL tasks without delay scheduling, so with a
    partition that prefers nothing in the set, another executor on the preferred host may run
    a partition; the block store therefore keeps blocks readable by every process on the host."""
    preferences = cluster["unpreferred_preferences"]
    rows = sorted(cluster["unpreferred"]["rows"], key=lambda row: row["split"])
    assert [bytes.fromhex(row["data"]) for row in rows] == [
        f"free-{i}".encode() for i in range(len(preferences))
    ]
    hosts = {host for host, _ in _executors(cluster)}
    for row, preferred in zip(rows, preferences, strict=True):
        assert row["host"] in hosts
        for location in preferred:
            assert location.startswith(f"executor_{row['host']}_")


def test_a_task_on_another_executor_reads_a_block_file_by_its_path(cluster: dict[str, Any]) -> None:
    """The executor placement's data path: a receiver task's store on A, a batch task on B."""
    (_, a), (_, b) = _executors(cluster)[:2]
    stored, read = cluster["cross_executor"]["stored"], cluster["cross_executor"]["read"]
    assert (stored["executor"], read["executor"]) == (a, b)
    assert bytes.fromhex(read["data"]) == b"\x00block\xff"


def test_first_attempt_number_is_zero(cluster: dict[str, Any]) -> None:
    assert {row["attempt"] for row in cluster["mixed"]["rows"]} == {0}


def test_empty_element_list_gives_an_empty_rdd(cluster: dict[str, Any]) -> None:
    assert cluster["empty"] == []


def test_local_master_has_one_executor_the_driver_and_tasks_name_it(local: dict[str, Any]) -> None:
    [(host, executor_id)] = _executors(local)
    assert executor_id == "driver"
    run = local["single"]["driver"]
    assert run["source_locations"] == [[_loc(host, "driver")]]
    [row] = run["rows"]
    assert (row["host"], row["executor"], row["bind_address"]) == (host, "driver", host)
    assert bytes.fromhex(row["data"]) == b"\x00\xffone-driver"


def test_current_executor_outside_a_spark_worker_says_so() -> None:
    with pytest.raises(RuntimeError, match="cannot tell which executor"):
        located.current_executor()


def test_task_attempt_number_outside_a_task_says_so() -> None:
    with pytest.raises(RuntimeError, match="outside a Spark task"):
        located.task_attempt_number()

"""How the suite runs on several pytest-xdist workers (``-n auto``): how many, in which order, and
which tests must share a worker.

- Workers: one more than the cores, at most three, fewer where memory is short.
- The end-to-end tests (Spark applications of their own, kill loops) spread over the workers like
  the rest: they wait on batches and restarts about half of their time, so three of them at once
  keep two cores busy (measured: docs/local-cluster.md, Tests).
- Groups (:func:`group_of`, scheduled by :func:`make_scheduler`'s scheduler): tests that must not
  run beside each other, or that share something expensive, run on one worker, one at a time:
  every test on the several-hosts cluster (its hosts have fixed addresses), a broker's compose
  cluster (fixed ports), a module with a module-scoped fixture (built once).
- Order: the several-hosts group, then the YARN group (the longest units: their workers start on
  them at once while the others take the rest), then the serial order (broker by broker), so that
  each worker starts each broker's cluster about once.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import pytest

DURATIONS_FILE = Path(__file__).with_name("durations.json")
ROOT = Path(__file__).resolve().parents[1]
# A worker's share of memory: its brokers (up to five JVMs), a Spark driver, local-cluster
# executors or a child application's, and the Python workers.
_GIB_PER_WORKER = 5
_MAX_WORKERS = 3
SEVERAL_HOSTS = "several hosts"
YARN = "yarn"
# Options that select every test an id can name: each broker, Spark cluster, compose cluster and
# the YARN cluster, whatever the defaults.
SELECT_EVERY_TEST = ("--kafka", "all", "--spark", "all", "--docker", "--yarn")
# Tests on the several-hosts cluster whose ids do not say so: the cluster's own test, and the
# deploy test's hosts (a module fixture of their own, on the same addresses).
_ON_SEVERAL_HOSTS_FILES = frozenset(
    {"tests/integration/test_local_spark_hosts.py", "tests/e2e/test_packed_venv_deploy.py"}
)

# A compose cluster's test: ``[docker-kafka-4-kafka]`` for the docker half's, ``[kafka-4-docker]``
# for tests/integration/test_docker_clusters.py's (the broker parameter first there).
_ON_DOCKER_IN_ID = re.compile(r"[\[-]docker[\]-]")
_BROKER_IN_ID = re.compile(r"\[(?:[^\]]*-)?kafka-(3\.9|4|0\.9)(?:-[^\]]*)?\]")


def broker_in_node_id(node_id: str) -> str | None:
    """The broker a test id names (``test_x[local-kafka-4]`` -> ``4``), else None. Read from the id,
    not from the collected item, because the xdist controller collects nothing."""
    found = _BROKER_IN_ID.search(node_id)
    return found.group(1) if found else None


def _available_memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float(_GIB_PER_WORKER)


def auto_workers() -> int:
    """``-n auto``: one worker more than the cores (an end-to-end test waits on batches and
    restarts much of its time: on two cores, three workers ran the suite in 21.5 minutes, the
    machine's CPU 1.6 cores busy on average), at most :data:`_MAX_WORKERS` (each worker runs Spark
    contexts and brokers of its own, and takes CPU from the others' restarts), fewer where memory
    is short; ``RELIABLE_KAFKA_TEST_WORKERS`` overrides."""
    override = os.environ.get("RELIABLE_KAFKA_TEST_WORKERS")
    if override:
        return max(0, int(override))
    cores = len(os.sched_getaffinity(0))
    by_memory = int(_available_memory_gib() // _GIB_PER_WORKER)
    return max(1, min(cores + 1, _MAX_WORKERS, by_memory))


def load_durations() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS_FILE.read_text()).items()}
    except (OSError, ValueError):
        return {}


@functools.cache
def _has_module_fixture(test_file: str) -> bool:
    """Whether a test module defines a module-scoped fixture. Read from its text: the xdist
    controller, which groups the work, has test ids only, not collected items."""
    try:
        return 'scope="module"' in (ROOT / test_file).read_text()
    except OSError:
        return False


def on_several_hosts(node_id: str) -> bool:
    """Whether a test runs on the several-hosts cluster: its hosts bind 127.0.0.2 and 127.0.0.3
    and take over their processes by address, so two such tests at once would clash."""
    test_file, _, name = node_id.partition("::")
    return test_file in _ON_SEVERAL_HOSTS_FILES or "[spark-hosts-" in name or "-spark-hosts-" in name


def group_of(node_id: str) -> str | None:
    """The worker group of a test, from its id, or None for any worker.

    - the several-hosts cluster's tests (:func:`on_several_hosts`): one unit of work, so one
      worker, one test at a time;
    - the YARN cluster's tests: its NodeManagers bind fixed addresses (127.0.0.11, ...), and the
      cluster and the packed venv its applications ship are built once, by one worker;
    - a broker's compose cluster has fixed ports: its tests share one worker;
    - a module-scoped fixture (a packed venv's hosts, a child Spark run) is built once per worker
      that runs a test of the module: its tests share one worker."""
    test_file, _, name = node_id.partition("::")
    params = name[name.find("[") :] if "[" in name else ""
    if on_several_hosts(node_id):
        return SEVERAL_HOSTS
    if test_file.startswith("tests/yarn/"):
        return YARN
    if _ON_DOCKER_IN_ID.search(params):
        return f"docker-kafka-{broker_in_node_id(node_id)}"
    if _has_module_fixture(test_file):
        return f"module {test_file}"
    return None


def make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduling with :func:`group_of` as the scope: a group is one unit of work
    for one worker, every other test a unit of its own; units go out in collection order (the
    conftest's: the several-hosts and YARN groups first), not xdist's default of the biggest unit
    first, as workers free up. A worker is given another unit only when at most two of its tests are
    left, so the several-hosts group's worker takes nothing else until it is nearly done.

    Instead of xdist's own ``loadgroup``, which names the group in the test id and, with pytest
    9.2 (whose ids are no longer an attribute it can set), groups nothing."""
    from xdist.scheduler import LoadScopeScheduling  # only with -n: the suite runs without xdist

    class GroupedLoadScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    # xdist's default reorders units by size, which would break the broker-by-broker order.
    config.option.loadscopereorder = False
    return GroupedLoadScheduling(config, log)  # type: ignore[arg-type]

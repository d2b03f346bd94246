"""How the suite runs on several pytest-xdist workers (``-n auto``): how many, in which order, and
which tests must share a worker.

- Workers: one more than the cores, at most three, fewer where memory is short (each worker
  starts its own brokers, Spark driver and, for some tests, executors). Not yet the README
  command's: on two cores, three heavy end-to-end tests at once outrun their liveness bounds
  (docs/local-cluster.md, Tests).
- Order: longest first (``tests/durations.json``, measured by ``python -m tests.support.durations``),
  so that the kill loops start at once and the run ends on short tests, not on a long one that
  started last. A test the file does not know is placed by its markers.
- Groups (:func:`group_of`, scheduled by :func:`make_scheduler`'s scheduler): tests that use a server
  with fixed ports (a broker's compose cluster), the several-hosts cluster or an expensive fixture
  of their module run on one worker, so that it starts once.
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
# Per-test estimates for tests that durations.json does not know yet (a new test).
_UNKNOWN_SLOW_S = 120.0
_UNKNOWN_E2E_S = 30.0
_UNKNOWN_BROKER_S = 5.0
_UNKNOWN_S = 0.5

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
    """``-n auto``: one worker more than the cores, at most :data:`_MAX_WORKERS` (with more, the
    end-to-end tests' Spark and broker start-ups queue on the cores and their liveness bounds
    run out), fewer where memory is short; ``RELIABLE_KAFKA_TEST_WORKERS`` overrides."""
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


def _same_test_on_another_broker(node_id: str, durations: dict[str, float]) -> float | None:
    """A test new on one broker (or on the docker half) costs about what it costs on another."""
    found = _BROKER_IN_ID.search(node_id)
    if found is None:
        return None
    for broker in ("3.9", "4", "0.9"):
        params = (
            found.group(0)
            .replace(f"kafka-{found.group(1)}", f"kafka-{broker}")
            .replace("[docker-", "[local-")
        )
        other = node_id[: found.start()] + params + node_id[found.end() :]
        if other in durations:
            return durations[other]
    return None


def estimate_s(item: pytest.Item, durations: dict[str, float]) -> float:
    node_id = item.nodeid
    known = durations.get(node_id)
    if known is None:
        known = _same_test_on_another_broker(node_id, durations)
    if known is not None:
        return known
    if item.get_closest_marker("slow") is not None:
        return _UNKNOWN_SLOW_S
    if item.nodeid.startswith("tests/e2e/"):
        return _UNKNOWN_E2E_S
    if item.get_closest_marker("integration") is not None:
        return _UNKNOWN_BROKER_S
    return _UNKNOWN_S


@functools.cache
def _has_module_fixture(test_file: str) -> bool:
    """Whether a test module defines a module-scoped fixture. Read from its text: the xdist
    controller, which groups the work, has test ids only, not collected items."""
    try:
        return 'scope="module"' in (ROOT / test_file).read_text()
    except OSError:
        return False


def group_of(node_id: str) -> str | None:
    """The worker group of a test, from its id, or None for any worker.

    - a broker's compose cluster has fixed ports: its tests share one worker;
    - a module-scoped fixture (a packed venv's hosts, a child Spark run) is built once per worker
      that runs a test of the module: its tests share one worker;
    - the several-hosts Spark cluster: every host binds 127.0.0.2 and 127.0.0.3, and one cluster
      is four JVMs and two executors: its tests share one worker rather than start three."""
    test_file, _, name = node_id.partition("::")
    params = name[name.find("[") :] if "[" in name else ""
    if params.startswith("[docker-"):
        return f"docker-kafka-{broker_in_node_id(node_id)}"
    if _has_module_fixture(test_file):
        return f"module {test_file}"
    if "spark-hosts-" in params:
        return "spark-hosts"
    return None


def make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduling with :func:`group_of` as the scope: a group is one unit of work
    for one worker, every other test a unit of its own; units go out in collection order (the
    conftest's, longest first) as workers free up.

    Instead of xdist's own ``loadgroup``, which names the group in the test id and, with pytest
    9.2 (whose ids are no longer an attribute it can set), groups nothing."""
    from xdist.scheduler import LoadScopeScheduling  # only with -n: the suite runs without xdist

    class GroupedLoadScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    return GroupedLoadScheduling(config, log)  # type: ignore[arg-type]

"""current_executor's three sources, each in real child processes (no Spark needed): the
ancestor executor JVM's command line through /proc, the driver host a local master advertises,
and the Kubernetes executor environment; and the address the executor binds, from each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reliable_kafka.util.located_rdd import DRIVER_HOST_ENV

REPO = Path(__file__).resolve().parents[2]
ASK = (
    "import json; from reliable_kafka.util.located_rdd import current_executor as c, "
    "current_executor_bind_address as b; print(json.dumps([*c(), b()]))"
)
K8S_VARIABLES = ("SPARK_EXECUTOR_ID", "SPARK_EXECUTOR_POD_IP")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (DRIVER_HOST_ENV, *K8S_VARIABLES)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _ask(argv: list[str], env: dict[str, str]) -> list[str]:
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def _backend(*arguments: str) -> list[str]:
    """A stand-in for the executor JVM: a process whose argv carries the backend's arguments; its
    child stands in for pyspark.daemon, and that one's child for the forked worker, which asks."""
    worker = [sys.executable, "-c", ASK]
    daemon = [sys.executable, "-c", f"import subprocess, sys; sys.exit(subprocess.call({worker!r}))"]
    backend = f"import subprocess, sys; sys.exit(subprocess.call({daemon!r}))"
    return [sys.executable, "-c", backend, *arguments]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_worker_finds_the_executor_backend_among_its_ancestors() -> None:
    backend = _backend(
        *("--driver-url", "spark://CoarseGrainedScheduler@10.0.0.1:7078"),
        *("--executor-id", "7", "--hostname", "10.0.0.9", "--cores", "2"),
    )
    # Without --bind-address (standalone workers, YARN) the executor binds the host it advertises.
    assert _ask(backend, _env()) == ["10.0.0.9", "7", "10.0.0.9"]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_an_executor_started_with_a_bind_address_binds_it() -> None:
    backend = _backend(
        *("--driver-url", "spark://CoarseGrainedScheduler@10.0.0.1:7078", "--executor-id", "7"),
        *("--bind-address", "0.0.0.0", "--hostname", "executor-7.spark", "--cores", "2"),
    )
    assert _ask(backend, _env()) == ["executor-7.spark", "7", "0.0.0.0"]


def test_a_worker_of_a_local_master_is_the_driver_on_the_advertised_host() -> None:
    assert _ask([sys.executable, "-c", ASK], _env(**{DRIVER_HOST_ENV: "192.0.2.7"})) == [
        "192.0.2.7",
        "driver",
        "192.0.2.7",
    ]


def test_a_kubernetes_executor_environment_names_the_executor() -> None:
    env = _env(SPARK_EXECUTOR_ID="3", SPARK_EXECUTOR_POD_IP="10.1.2.3")
    assert _ask([sys.executable, "-c", ASK], env) == ["10.1.2.3", "3", "10.1.2.3"]

"""The application image of docker/images/app (``--docker``): built by the docker half's engine, it
imports ``reliable_kafka`` from its own virtualenv and runs the README's word count on ``local[2]``
against the compose cluster, counting every word it produced.

What a Kubernetes pod of the application would run, short of Kubernetes (docs/cluster.md says what
differs and that it was not run here). The build context is the checkout's wheel, its dependencies
and pyspark, copied from the test virtualenv (``image_site_packages``): no package index is reached,
and the image's apt layer comes from the Debian base the broker images use.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster_backends import DockerComposeCluster, unique_name
from tests.e2e.packed_venv import REPO, image_site_packages

pytestmark = [
    pytest.mark.integration,
    pytest.mark.docker_half,
    pytest.mark.brokers("3.9"),
    pytest.mark.parametrize("kafka_cluster", ["docker"], indirect=True, scope="session"),
]

DOCKERFILE = REPO / "docker" / "images" / "app" / "Dockerfile"
IMAGE = "reliable-kafka/app:dev"
# .ci/docker.sh's base (debootstrapped from the machine's Debian mirror), where the engine has it.
DEBOOTSTRAPPED_BASE = "reliable-kafka/debian-base:bookworm"


def docker(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s, check=False)


def base_image() -> str:
    found = docker("image", "inspect", DEBOOTSTRAPPED_BASE, timeout_s=30).returncode == 0
    return DEBOOTSTRAPPED_BASE if found else "debian:bookworm-slim"


def test_the_application_image_runs_a_local_stream(
    kafka_cluster: DockerComposeCluster, tmp_path: Path
) -> None:
    started = time.monotonic()
    context = image_site_packages(tmp_path / "context").parent
    built = docker(
        *("build", "--network", "host", "--build-arg", f"BASE={base_image()}"),
        *("-f", str(DOCKERFILE), "-t", IMAGE, str(context)),
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    built_in = time.monotonic() - started

    # The package, and pyspark, from the image's virtualenv, as the image's user.
    where = docker(
        *("run", "--rm", "--network", "host", IMAGE),
        *("python", "-c", "import pyspark, reliable_kafka as r; print(r.__file__, pyspark.__version__)"),
    )
    assert where.returncode == 0, where.stderr[-3000:]
    assert where.stdout.startswith("/opt/venv/lib/python3.11/site-packages/reliable_kafka/"), where.stdout

    # The README's word count, local[2] (its default master), against the compose cluster.
    topic = unique_name("app-image-words")
    counted = docker(
        # Receivers keep blocks in /dev/shm: Docker's 64 MiB default is tight (docs/sizing.md).
        *("run", "--rm", "--network", "host", "--shm-size", "256m", IMAGE),
        *("python", "-m", "reliable_kafka.examples.wordcount"),
        *("--zookeeper", kafka_cluster.zookeeper_connect),
        *("--bootstrap-servers", kafka_cluster.bootstrap_servers, "--topic", topic),
        *("--duration", "4", "--rate", "20"),
        timeout_s=300,
    )
    output = counted.stdout[-3000:] + counted.stderr[-3000:]
    assert counted.returncode == 0, output
    assert "OK: every word produced was counted" in counted.stdout, output
    assert "batch " in counted.stdout and "(printed at " in counted.stdout, output
    took = time.monotonic() - started
    print(f"application image built in {built_in:.1f} s; with its word count, {took:.1f} s")

"""One YARN cluster per session (tests/yarn/), on the session's HDFS, and what its applications ship.

The cluster (``LocalYarn``: a ResourceManager and two NodeManagers) stages every application on
the session's HDFS; Spark's own jars reach the containers as ``spark.yarn.jars=local:...`` (see
:mod:`tests.yarn.submit`). The packed virtualenv is the "Running on a cluster" recipe's, with the
``hdfs`` extra: the checkpoints and write-ahead logs of these tests are on HDFS.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from reliable_kafka.local.hdfs import LocalHdfs
from reliable_kafka.local.yarn import LocalYarn
from tests.e2e.packed_venv import PackedVenv, build_packed_venv

SIGKILL_DELAY_MS = 60_000


@pytest.fixture(scope="session")
def local_yarn(local_hdfs: LocalHdfs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalYarn]:
    started = time.monotonic()
    # `yarn application -kill` SIGTERMs a container, then SIGKILLs it after this delay: 250 ms by
    # default, no time for a graceful stop; raised as docs/operations.md tells operators to.
    conf = {"yarn.nodemanager.sleep-delay-before-sigkill.ms": str(SIGKILL_DELAY_MS)}
    work = tmp_path_factory.mktemp("local-yarn")
    with LocalYarn(work, default_fs=local_hdfs.url, conf=conf) as yarn:
        print(f"YARN up in {time.monotonic() - started:.1f} s: {yarn}")
        yield yarn


@pytest.fixture(scope="session")
def yarn_packed_venv(tmp_path_factory: pytest.TempPathFactory) -> PackedVenv:
    packed = build_packed_venv(tmp_path_factory.mktemp("yarn-packed-venv"), extras=("hdfs",))
    print(f"packed venv (hdfs extra): {packed.archive.stat().st_size / 1e6:.1f} MB in {packed.seconds:.1f} s")
    return packed

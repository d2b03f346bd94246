"""Every Python block of docs/ marked ``<!-- runnable -->``, run as written in a process of its own
(docs/architecture.md, "Runnable blocks in the docs"). Blocks marked with a test's path
(``<!-- runnable: tests/e2e/test_x.py -->``) are run by that test instead.

As tests/e2e/test_readme_example.py does, only what a page says is the reader's own is replaced,
here by the suite's local cluster: the ZooKeeper quorum ``zk1:2181,zk2:2181`` and the brokers
``kafka1:9092,kafka2:9092``; a block may also start servers of its own (``LocalCluster``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.support.docs_blocks import REPO, DocBlock, runnable_blocks

pytestmark = pytest.mark.integration

QUORUM = "zk1:2181,zk2:2181"
BROKERS = "kafka1:9092,kafka2:9092"
BLOCKS = [block for block in runnable_blocks() if block.runner is None]


def as_run_here(block: DocBlock, cluster: LocalCluster) -> str:
    code = block.code
    if QUORUM in code:
        code = code.replace(QUORUM, cluster.zookeeper_connect)
    return code.replace(BROKERS, cluster.bootstrap_servers)


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_the_runnable_block_runs_as_written(
    block: DocBlock, local_cluster: LocalCluster, tmp_path: Path
) -> None:
    app = tmp_path / "example.py"
    app.write_text(as_run_here(block, local_cluster), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        # What the docs ask of the executors' interpreter (Getting started).
        "PYSPARK_PYTHON": sys.executable,
        # This machine's host name resolves to loopback, which Spark warns about.
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    result = subprocess.run(
        [sys.executable, str(app)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    where = f"docs/{block.page} line {block.line} (run from {REPO})"
    assert result.returncode == 0, f"{where}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"

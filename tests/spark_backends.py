"""The Spark clusters the executor-placement tests run on, and how each loses a host.

- ``local-cluster``: Spark's ``local-cluster[2,2,1024]``, two executor JVMs started by the
  application itself, on one host: losing a "host" is SIGKILLing the executor JVM with its
  Python workers and deleting the receiver's block files, which all executors could see.
- ``hosts``: :class:`~reliable_kafka.local.spark_hosts.LocalSparkHosts`, two workers that are
  hosts of their own (address, private ``/dev/shm`` and local dirs): losing one is
  ``lose_host``, and the host comes back empty at once, as a replaced machine would (so that
  the application keeps two executors).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from reliable_kafka.local.spark_hosts import LocalSparkHosts, spark_home
from tests.e2e.processes import describe, executor_jvm, kill_tree, session_processes

SPARK_KINDS = ("local-cluster", "hosts")
LOCAL_CLUSTER_MASTER = "local-cluster[2,2,1024]"


@dataclass
class SparkBackend:
    kind: str
    master: str
    # SparkConf entries the application adds (KEY=VALUE).
    conf: list[str] = field(default_factory=list)
    hosts: LocalSparkHosts | None = None

    def lose_host_of(self, session: int, executor_id: str, host: str, app_id: str, stream_id: int) -> None:
        """What losing the host of ``executor_id`` (receiver ``stream_id``'s) does: its JVMs and
        Python workers die (SIGKILL) and the receiver's block files there are gone."""
        if self.hosts is not None:
            (index,) = [h.index for h in self.hosts.hosts if h.address == host]
            self.hosts.lose_host(index)
            self.hosts.await_host_gone(index)
            self.hosts.restart_host(index)
            return
        pid = executor_jvm(session, executor_id)
        assert pid is not None, describe(session_processes(session))
        doomed = _block_dirs_of(app_id, stream_id)
        assert doomed, f"no block directory of receiver {stream_id} found"
        kill_tree(pid)
        for directory in doomed:
            shutil.rmtree(directory, ignore_errors=True)

    def executor_logs(self, app_id: str) -> str:
        """What the application's executors (and their Python workers) wrote to stderr, on every
        host: the standalone workers keep it under their work directory."""
        roots = [h.work_dir for h in self.hosts.hosts] if self.hosts is not None else [spark_home() / "work"]
        logs = [path for root in roots for path in sorted(root.glob(f"{app_id}/*/stderr"))]
        return "".join(path.read_text(errors="replace") for path in logs)


def _block_dirs_of(app_id: str, stream_id: int) -> list[Path]:
    """The receiver's block store directories: tmpfs for memory levels, the executor's local dir."""
    pattern = f"reliable-kafka-{app_id}-stream-{stream_id}-*"
    roots = [Path("/dev/shm"), Path(os.environ.get("TMPDIR", "/tmp"))]
    found = [path for root in roots if root.is_dir() for path in root.glob(pattern)]
    found += [path for root in roots[1:] for path in root.glob(f"spark-*/**/{pattern}")]
    return found


def local_cluster_backend() -> SparkBackend:
    return SparkBackend("local-cluster", LOCAL_CLUSTER_MASTER)


HOST_CORES = 3


def hosts_backend(hosts: LocalSparkHosts) -> SparkBackend:
    """One executor per host, of :data:`HOST_CORES` cores. Three, not local-cluster's two: after
    a host is lost, both receivers may run on the surviving executor until the host is back,
    and a batch partition prefers its block's host (local-cluster's executors share one), so
    with two cores there every batch task would wait ``spark.locality.wait`` (3 s) for a slot.

    The application starts once both executors registered (Spark's
    ``minRegisteredResourcesRatio``): receivers are scheduled on the executors registered when
    the context starts and stay there: with one executor late, both receivers ran on one host
    (once in CI), and the replicated-blocks test, which needs them on two, failed."""
    conf = [
        f"spark.executor.cores={HOST_CORES}",
        "spark.executor.memory=1g",
        f"spark.cores.max={2 * HOST_CORES}",
        "spark.driver.host=127.0.0.1",
        "spark.scheduler.minRegisteredResourcesRatio=1.0",
        # Bounded: a host lost just before a driver restart (the fault campaign) comes back at
        # once, but the application must start even if it does not.
        "spark.scheduler.maxRegisteredResourcesWaitingTime=20s",
    ]
    return SparkBackend("hosts", hosts.master_url, conf, hosts)

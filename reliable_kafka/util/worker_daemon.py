"""PySpark's Python worker daemon, with this package's task code imported before it forks.

PySpark starts one daemon per executor (``python -m pyspark.daemon``) and forks a worker from it
for each Python task that finds no idle one. A fresh worker then imports what the task's function
needs: for a receiver task or a batch task that reads blocks, most of this package (pydantic
settings, confluent-kafka, kazoo, the WAL), ~0.7-1 s on a busy 2-core machine. A worker whose
daemon imported it all already inherits the modules through ``fork``: the first batch with
records, which needs a new worker (the receiver's holds its own for good), starts at once.

``spark.python.daemon.module=reliable_kafka.util.worker_daemon`` selects it (a Spark setting since
2.4, read by the executors; see :func:`reliable_kafka.util.worker_python.default_daemon_module`
for local masters). An import that fails here is only reported on stderr: the daemon must start
anyway, and the task that needs the module fails with the usual error. Nothing may go to stdout:
the daemon's first output there is the port the JVM reads.
"""

from __future__ import annotations

import importlib
import sys

#: What the receiver task (``run_receiver_task``) and a batch's block read (``BlockPartition``)
#: import when PySpark unpickles their functions.
PREIMPORTED = ("reliable_kafka.receiver.receiver_task", "reliable_kafka.dstream.batch_rdd")


def preimport(modules: tuple[str, ...] = PREIMPORTED) -> list[str]:
    """Import ``modules``; the names that failed (each reported on stderr)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed.append(name)
            print(f"reliable_kafka worker daemon: could not import {name}: {exc!r}", file=sys.stderr)
    return failed


if __name__ == "__main__":
    preimport()
    from pyspark.daemon import manager

    manager()

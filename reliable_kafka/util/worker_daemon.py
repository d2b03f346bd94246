"""PySpark's Python worker daemon, with this package's task code imported before it forks.

PySpark starts one daemon per executor (``python -m pyspark.daemon``) and forks a worker from it
for each Python task that finds no idle one. A fresh worker then imports what the task's function
needs: for a receiver task or a batch task that reads blocks, most of this package (pydantic
settings, confluent-kafka, kazoo, the WAL), ~0.7-1 s on a busy 2-core machine. A worker whose
daemon imported it all already inherits the modules through ``fork``: the first batch with
records, which needs a new worker (the receiver's holds its own for good), starts at once.

And it imports pyspark itself from the installed package, not from the ``pyspark.zip`` Spark puts
first on every worker's ``PYTHONPATH``. Where pyspark is pip-installed that zip is the same code,
inside the package's own directory, but Python compiles every module it imports from a zip
anew, in every process: the daemon's imports took 1.6-1.8 CPU s from the zip and 0.8-1.0 s
from the installed package's compiled files, and each forked worker's ``pyspark.worker``
another 0.15 s against 0.01 s. The zip is left out only when it lies inside an installed
pyspark that the rest of the path reaches: any other pyspark (a Spark distribution's
``SPARK_HOME``) is left as it is.

It also imports ``pyspark.worker``, which PySpark's own daemon leaves to each forked worker (in
case an import starts a thread before ``fork``: this one starts none, on pyspark 3.5 and 4.x), and
freezes what it imported (``gc.freeze``): PySpark's daemon runs ``gc.collect()`` in a reused
worker after every task, and without the freeze that walks every object of every module imported
here, about 60 ms of CPU per task on the README's word count; the frozen objects also stay shared
with the daemon instead of being copied into each worker by the collector's writes.

``spark.python.daemon.module=reliable_kafka.util.worker_daemon`` selects it (a Spark setting since
2.4, read by the executors; see :func:`reliable_kafka.util.worker_python.default_daemon_module`
for local masters). An import that fails here is only reported on stderr: the daemon must start
anyway, and the task that needs the module fails with the usual error. Nothing may go to stdout:
the daemon's first output there is the port the JVM reads.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

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


def without_installed_pyspark_zip(path: Sequence[str]) -> list[str]:
    """``path`` without the ``pyspark.zip`` of an installed pyspark (``<dir>/pyspark/python/lib/
    pyspark.zip`` beside ``<dir>/pyspark/__init__.py``) when ``<dir>`` is on ``path`` too: the same
    pyspark, from compiled files."""
    return [entry for entry in path if not _installed_pyspark_zip(Path(entry), path)]


def _installed_pyspark_zip(entry: Path, path: Sequence[str]) -> bool:
    if entry.name != "pyspark.zip" or len(entry.parents) <= 3:
        return False
    package = entry.parents[2]
    return (
        package.name == "pyspark"
        and entry.parent == package / "python" / "lib"
        and (package / "__init__.py").is_file()
        and str(package.parent) in path
    )


if __name__ == "__main__":
    # Before anything imports pyspark; the workers forked from here inherit the path.
    sys.path[:] = without_installed_pyspark_zip(sys.path)
    preimport((*PREIMPORTED, "pyspark.worker"))
    # Last before the daemon forks: the collector leaves everything imported so far alone.
    gc.freeze()
    from pyspark.daemon import manager

    manager()

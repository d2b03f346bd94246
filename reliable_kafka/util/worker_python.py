"""Which Python the executors' workers run, on masters where it can only be this one.

With receivers on executors, a worker whose interpreter lacks this package fails every receiver
and batch task (``ModuleNotFoundError``), and PySpark's default is whatever ``python3`` is on
``PATH``. On a local master (``local[N]``, ``local-cluster``) the workers run on this machine, so
when the user chose no interpreter, this one (which imported the package) is the right choice.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import weakref
from typing import Any

from reliable_kafka.util.spark_internals import set_driver_conf

logger = logging.getLogger(__name__)

_LOCAL_MASTERS = ("local", "local[", "local-cluster[")


def default_workers_to_this_python(sc: Any) -> bool:
    """Point ``sc``'s Python workers at ``sys.executable`` when the master is local and neither
    ``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` is set; True if it did. Logged once."""
    master = sc.master or ""
    if not (master == "local" or master.startswith(_LOCAL_MASTERS)):
        return False
    if os.environ.get("PYSPARK_PYTHON") or sc.getConf().get("spark.pyspark.python"):
        return False
    if sc.pythonExec == sys.executable:
        return False
    # PySpark reads pythonExec whenever it wraps a Python function for the JVM, so this applies
    # to every job from now on (a worker pool per interpreter: nothing already running changes).
    sc.pythonExec = sys.executable
    logger.info(
        "Python workers on master %s will run %s (PYSPARK_PYTHON and spark.pyspark.python are unset)",
        master,
        sys.executable,
    )
    return True


DAEMON_MODULE_KEY = "spark.python.daemon.module"
DAEMON_MODULE = "reliable_kafka.util.worker_daemon"
# Masters whose only executor is the driver's JVM: its live SparkConf is what starts the workers.
_IN_DRIVER_JVM = re.compile(r"local(\[[^\]]*\])?$")


def default_daemon_module(sc: Any) -> bool:
    """Make ``sc``'s Python workers fork from :mod:`reliable_kafka.util.worker_daemon` (this
    package imported once, in the daemon) when the master runs tasks in the driver's JVM
    (``local``, ``local[N]``) and ``spark.python.daemon.module`` is unset; True if it did.

    Elsewhere (``local-cluster``, clusters) the executors read their SparkConf when they start, so
    only the application's own SparkConf can choose it (see docs/sizing.md). With
    ``spark.python.use.daemon=false`` there is no daemon to choose.
    """
    if not _IN_DRIVER_JVM.match(sc.master or ""):
        return False
    conf = sc.getConf()
    if conf.get(DAEMON_MODULE_KEY) or (conf.get("spark.python.use.daemon") or "true").lower() == "false":
        return False
    if not set_driver_conf(sc, DAEMON_MODULE_KEY, DAEMON_MODULE):
        return False
    logger.info("Python workers on master %s fork from %s (%s)", sc.master, DAEMON_MODULE, DAEMON_MODULE_KEY)
    return True


# The worker's traceback travels inside the Py4J/Spark error text, so the module is found there.
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '(reliable_kafka|msgpack)(?:\.[\w.]*)?'")


class WorkerPackageMissingError(RuntimeError):
    """A Python worker on an executor could not import this package or one it needs."""


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith(_LOCAL_MASTERS)


def missing_package_message(master: str, error_text: str) -> str | None:
    """The fix for a worker that cannot import ``reliable_kafka``/``msgpack``, or None when
    ``error_text`` is not that failure or the master is local (where the workers run this Python)."""
    if is_local_master(master):
        return None
    match = _MISSING_MODULE.search(error_text)
    if match is None:
        return None
    return (
        f"The Python workers on the executors of {master} cannot import {match.group(1)!r} "
        "(ModuleNotFoundError), so no receiver or batch task can run. Install reliable-kafka on the "
        "executors (e.g. pip install reliable-kafka, or ship it with --py-files / an archive), or set "
        "spark.pyspark.python (PYSPARK_PYTHON) to an interpreter there that has it installed."
    )


_reported_lock = threading.Lock()
_reported: weakref.WeakSet[Any] = weakref.WeakSet()


def report_missing_package(sc: Any, error: BaseException) -> WorkerPackageMissingError | None:
    """For the first failure of ``sc``'s workers to import the package: log one clear error naming
    the fix and return it as an exception (chained to ``error``). None for any other error, and for
    later ones, which the caller handles as usual (every task fails the same way; one is enough)."""
    message = missing_package_message(getattr(sc, "master", None) or "", f"{error!r}\n{error}")
    if message is None:
        return None
    with _reported_lock:
        if sc in _reported:
            return None
        _reported.add(sc)
    logger.error("%s", message)
    clear = WorkerPackageMissingError(message)
    clear.__cause__ = error
    return clear

"""Which Python the executors' workers run, on masters where it can only be this one.

With receivers on executors, a worker whose interpreter lacks this package fails every receiver
and batch task (``ModuleNotFoundError``), and PySpark's default is whatever ``python3`` is on
``PATH``. On a local master (``local[N]``, ``local-cluster``) the workers run on this machine, so
when the user chose no interpreter, this one (which imported the package) is the right choice.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

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

"""Three of Spark's ``private[spark]`` methods, reached through py4j, each with a public fallback.

The risk: ``private[spark]`` is public in the JVM's bytecode but not an API, and may change in
any Spark release. Each call here is checked on both pyspark lines the package supports (tests
in ``tests/util/test_spark_internals.py``) and falls back to the public behaviour when the
method is gone, logged once at DEBUG.

- :func:`unpersist_quietly`: ``RDD.unpersist`` logs "RDD n was locally checkpointed, its lineage
  has been truncated and cannot be recomputed after unpersisting" at WARN for each locally
  checkpointed RDD, and stateful streams checkpoint one per checkpoint interval and forget it
  some batches later: a WARN line every ~10 s of a healthy run. ``SparkContext.unpersistRDD``
  is what ``RDD.unpersist`` calls after that warning.
- :func:`stop_console_progress`: pyspark applications start as Spark "shells", which show the
  console progress bar; in a streaming application it redraws between every batch's output
  (``pprint``). Spark's own streaming examples turn it off; a SparkContext made before the
  StreamingContext already has it, so its timer is stopped instead.
- :func:`set_driver_conf`: ``SparkContext.conf`` is the driver's live SparkConf, which its
  ``SparkEnv`` reads when it starts a Python worker daemon (``getConf`` is a copy): a setting made
  there after the context started reaches the local master's workers that start later. Without
  it, nothing is set and the workers start as before.
"""

from __future__ import annotations

import logging
from typing import Any

from py4j.protocol import Py4JError
from pyspark import RDD, SparkContext

logger = logging.getLogger(__name__)


def unpersist_quietly(rdd: RDD[Any]) -> None:
    """``rdd.unpersist(blocking=False)`` without Spark's warning for a locally checkpointed RDD."""
    try:
        rdd.ctx._jsc.sc().unpersistRDD(rdd.id(), False)
    except Py4JError as exc:
        logger.debug("SparkContext.unpersistRDD unavailable (%r): RDD.unpersist instead", exc)
        rdd.unpersist(blocking=False)
        return
    rdd.is_cached = False


def stop_console_progress(sc: SparkContext) -> bool:
    """Stop ``sc``'s console progress bar, if it shows one; whether one was stopped."""
    try:
        progress = sc._jsc.sc().progressBar()
        if not progress.isDefined():
            return False
        progress.get().stop()
    except Py4JError as exc:
        logger.debug("SparkContext.progressBar unavailable (%r): the progress bar stays", exc)
        return False
    return True


def set_driver_conf(sc: SparkContext, key: str, value: str) -> bool:
    """Set ``key`` in the driver JVM's live SparkConf (not a copy); whether it was set."""
    try:
        sc._jsc.sc().conf().set(key, value)
    except Py4JError as exc:
        logger.debug("SparkContext.conf unavailable (%r): %s stays unset", exc, key)
        return False
    return True

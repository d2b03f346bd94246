"""What a Python worker costs before it runs its task: per worker forked, and per task.

    python benchmarks/worker_overhead_bench.py [--workers 20]

A local master's Python workers fork from the worker daemon (``reliable_kafka.util.worker_daemon``,
which imports the batch read chain first). Spark starts the daemon with ``pyspark.zip``, py4j's
zip and the ``spark-core`` jar first on ``PYTHONPATH``. This forks ``--workers`` children from a
daemon set up that way and times, in each child, the steps pyspark's worker takes around a task
(CPU seconds of the child, which a busy machine stretches in wall time):

  import pyspark.worker     per new worker: ``pyspark.daemon`` imports it after the fork, from the
                            zip, compiled from source (a zip holds no .pyc)
  unpickle a batch task     per new worker: the batch read function with ``KafkaRecordDecoder``,
                            importing what the daemon did not
  invalidate_caches         per new worker: its first task puts the task's files directory on
                            ``sys.path`` and calls ``importlib.invalidate_caches()``, which on
                            Python 3.11 re-reads the directory of every zip on ``sys.path``, once
                            per package imported from it
  gc.collect, first / next  per task: the daemon's worker loop collects after every task (before
                            the worker reads its next one); the first in a child also copies the
                            daemon's pages it touches

against a daemon that imported ``pyspark.worker`` itself, called ``gc.freeze()`` before forking
and has no zip on ``sys.path`` (pyspark from site-packages), in the same run; the ratio is the
daemon as Spark starts it over that one. ``reliable_kafka.util.worker_daemon`` now does the
second's first two steps and leaves out the installed pyspark's zip (py4j's zip and the
``spark-core`` jar stay on its path, so a new worker's ``invalidate_caches`` still re-reads them).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# In the daemon these come from where its PYTHONPATH says, as in Spark's daemon.
import pyspark
from pyspark import cloudpickle

from reliable_kafka.dstream.batch_rdd import _ReadBlocks
from reliable_kafka.kafka.kafka_utils import KafkaRecordDecoder
from reliable_kafka.util.worker_daemon import preimport

REPO = Path(__file__).resolve().parents[1]
STEPS = (
    "import pyspark.worker",
    "unpickle a batch task",
    "invalidate_caches",
    "gc.collect, first",
    "gc.collect, next",
)
PER_WORKER = STEPS[:4]
PER_TASK = ("gc.collect, next",)


def spark_python_path() -> list[str]:
    """What Spark puts before the application's ``PYTHONPATH`` for its Python workers."""
    home = Path(pyspark.__file__).parent
    zips = sorted(str(p) for p in (home / "python" / "lib").glob("*.zip"))
    jars = sorted(str(p) for p in (home / "jars").glob("spark-core_*.jar"))
    return zips + jars


def task_function() -> bytes:
    return cloudpickle.dumps(_ReadBlocks(KafkaRecordDecoder()))


def cpu_ms(step: Callable[[], object]) -> float:
    started = time.process_time()
    step()
    return (time.process_time() - started) * 1000


def run_daemon(workers: int, tuned: bool) -> None:
    """The daemon side: fork ``workers`` children, print each one's step times (ms of CPU)."""
    preimport()
    if tuned:
        importlib.import_module("pyspark.worker")
        gc.freeze()
    payload = sys.stdin.buffer.read()
    for _ in range(workers):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            times = {
                "import pyspark.worker": cpu_ms(lambda: importlib.import_module("pyspark.worker")),
                "unpickle a batch task": cpu_ms(lambda: cloudpickle.loads(payload)),
                "invalidate_caches": cpu_ms(importlib.invalidate_caches),
                "gc.collect, first": cpu_ms(gc.collect),
                "gc.collect, next": cpu_ms(gc.collect),
            }
            os.write(write_end, json.dumps(times).encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as answer:
            print(answer.read().decode(), flush=True)
        os.waitpid(pid, 0)


def measure(workers: int, tuned: bool, payload: bytes) -> dict[str, float]:
    path = ([] if tuned else spark_python_path()) + [str(REPO)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    command = [sys.executable, __file__, "--daemon", "--workers", str(workers)] + (
        ["--tuned"] if tuned else []
    )
    out = subprocess.run(command, input=payload, env=env, check=True, capture_output=True).stdout.decode()
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {step: statistics.median(row[step] for row in rows) for step in STEPS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--daemon", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tuned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.daemon:
        run_daemon(args.workers, args.tuned)
        return
    payload = task_function()
    # Interleaved, so that a change of load touches both alike.
    first, second = measure(args.workers, False, payload), measure(args.workers, True, payload)
    again = measure(args.workers, False, payload)
    as_is = {step: min(first[step], again[step]) for step in STEPS}
    print(
        f"median CPU ms per child over {args.workers} forked children (as Spark starts the daemon: best of 2)"
    )
    print(f"{'step':<24}{'as Spark starts it':>20}{'tuned daemon':>14}{'ratio':>8}")
    for step in STEPS:
        ratio = f"{as_is[step] / second[step]:.1f}" if second[step] >= 0.1 else "-"
        print(f"{step:<24}{as_is[step]:>20.1f}{second[step]:>14.1f}{ratio:>8}")
    for label, steps in (("per new worker", PER_WORKER), ("per task", PER_TASK)):
        before, after = sum(as_is[s] for s in steps), sum(second[s] for s in steps)
        ratio = f"{before / after:.1f}" if after >= 0.1 else "-"
        print(f"{label:<24}{before:>20.1f}{after:>14.1f}{ratio:>8}")


if __name__ == "__main__":
    main()

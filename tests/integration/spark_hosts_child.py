"""An application on the several-hosts cluster, in a process of its own (one SparkContext per
process): prints, as one JSON line, what each of its tasks saw of its host.

    python -m tests.integration.spark_hosts_child MASTER_URL EXECUTORS MARKER
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pyspark import SparkConf, SparkContext


def probe(marker: str) -> object:
    def run(index: int, _rows: Iterator[int]) -> Iterator[dict[str, object]]:
        # What a receiver's block store does: a file in /dev/shm, then what the host can see.
        Path("/dev/shm", f"{marker}-{index}").write_text("x")
        yield {
            "partition": index,
            "host": os.environ.get("SPARK_LOCAL_IP"),
            "shm": sorted(name for name in os.listdir("/dev/shm") if name.startswith(marker)),
        }

    return run


def main(master: str, executors: int, marker: str) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("spark-hosts-child")
        .set("spark.ui.enabled", "false")
        .set("spark.executor.cores", "1")
        .set("spark.executor.memory", "512m")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.locality.wait", "0")
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    try:
        deadline = time.monotonic() + 120
        # getExecutorMemoryStatus lists the driver too.
        while sc._jsc.sc().getExecutorMemoryStatus().size() < executors + 1:
            if time.monotonic() > deadline:
                raise TimeoutError("executors did not register")
            time.sleep(0.2)
        tasks = executors * 4
        seen = sc.parallelize(range(tasks), tasks).mapPartitionsWithIndex(probe(marker)).collect()
        driver_shm = sorted(name for name in os.listdir("/dev/shm") if name.startswith(marker))
        print(json.dumps({"tasks": seen, "driver_shm": driver_shm}))
    finally:
        sc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))

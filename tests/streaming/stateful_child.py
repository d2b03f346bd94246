"""A stateful streaming application run in a process of its own, with Spark's default log level,
for tests of what it prints.

    python -m tests.streaming.stateful_child CHECKPOINT_DIR BATCHES

Counts words with ``updateStateByKey`` over a queue stream of BATCHES batches of 0.2 s, its
state checkpointed every other batch, then stops at once; prints the final counts as ``counts {...}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from pyspark import SparkConf, SparkContext

from reliable_kafka.context import StreamingContext

LIVENESS_S = 240


def main(checkpoint: str, batches: int) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName("stateful-child")
        .set("spark.ui.enabled", "false")
        .set("spark.streaming.ui.enabled", "false")
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("WARN")  # what a pyspark application shows by default
    ssc = StreamingContext(sc, 0.2)
    ssc.checkpoint(checkpoint)
    queue = [sc.parallelize(["a", "b", "a"]) for _ in range(batches)]

    def update(new: list[int], total: int | None) -> int:
        return sum(new) + (total or 0)

    counts: dict[str, int] = {}
    all_counted = threading.Event()

    def keep(rdd: Any) -> None:
        counts.update(rdd.collect())
        if counts.get("b") == batches:
            all_counted.set()

    state = ssc.queueStream(queue).map(lambda w: (w, 1)).updateStateByKey(update)
    state.checkpoint(0.4)
    state.foreachRDD(keep)
    ssc.start()
    # A liveness bound: batches of 0.2 s fall behind on a loaded machine (seen: 13 of 20 in 64 s).
    counted = all_counted.wait(LIVENESS_S)
    # Every batch is counted: nothing left to drain. Empty batches of 0.2 s queue up behind a loaded
    # machine's slower ones, and a graceful stop ran them for its whole bound (22 s), then gave up.
    ssc.stop(stopSparkContext=True, stopGraceFully=False)
    print("counts " + json.dumps(counts, sort_keys=True), flush=True)
    if not counted:
        print(f"not every batch was counted within {LIVENESS_S} s", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))

"""Child process of test_located_rdd: one SparkContext on the master named in argv, every
check run in it, results printed as one JSON line (a process holds only one SparkContext)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading

from pyspark import SparkConf, SparkContext

from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.executor_block_store import ExecutorBlockStore, read_block_file
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util.located_rdd import (
    current_executor,
    current_executor_bind_address,
    executor_locations,
    located_rdd,
    task_attempt_number,
    wait_for_executors,
)

# Generous: the executor JVMs start on a loaded 2-core machine; this is not a timing assertion.
EXECUTOR_WAIT_S = 300
STARVED_WAIT_S = 3.0


def where_it_ran(split: int, elements: object) -> object:
    host, executor_id = current_executor()
    for data in elements:
        yield {
            "split": split,
            "data": data.hex(),
            "host": host,
            "executor": executor_id,
            "bind_address": current_executor_bind_address(),
            "attempt": task_attempt_number(),
            "pid": os.getpid(),
        }


def seq_strings(seq: object) -> list[str]:
    """A Scala Seq through py4j, as sorted strings."""
    return sorted(str(seq.apply(i)) for i in range(seq.size()))


def store_a_block(_split: int, elements: object) -> object:
    """A receiver's part: keep the element as a memory block; the store stays open (the
    receiver task would hold it), so its file outlives this task."""
    store = ExecutorBlockStore("located-test-stream-0")
    for data in elements:
        store.put(StreamBlockId(0, 1), data, StorageLevel.MEMORY_ONLY_SER)
        yield {"path": store.path_of(StreamBlockId(0, 1)), "executor": current_executor()[1]}


def read_a_block(_split: int, paths: object) -> object:
    """A batch task's part: read the block by the path the receiver reported."""
    for raw in paths:
        data = read_block_file(raw.decode())
        yield {"data": None if data is None else data.hex(), "executor": current_executor()[1]}


def scheduler_locations(sc: SparkContext, rdd: object) -> list[list[str]]:
    """The DAG scheduler's preferred locations of each partition (walks narrow dependencies)."""
    jrdd = rdd._jrdd.rdd()
    out = []
    for i in range(jrdd.partitions().__len__()):
        out.append(seq_strings(sc._jsc.sc().getPreferredLocs(jrdd, i)))
    return out


def run(sc: SparkContext, elements: list[tuple[bytes, list[str]]]) -> dict[str, object]:
    rdd = located_rdd(sc, elements)
    # mapPartitionsWithIndex then map: two Python functions pipelined into one worker.
    placed = rdd.mapPartitionsWithIndex(where_it_ran).map(lambda row: row)
    return {
        "num_partitions": rdd.getNumPartitions(),
        "source_locations": [
            seq_strings(rdd._jrdd.rdd().preferredLocations(p)) for p in rdd._jrdd.rdd().partitions()
        ],
        "scheduler_locations": scheduler_locations(sc, placed),
        "rows": placed.collect(),
    }


def loc(host: str, executor_id: str) -> str:
    return f"executor_{host}_{executor_id}"


def main() -> None:
    master = sys.argv[1]
    # Python workers must run this interpreter (the venv with msgpack and the project).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("located-rdd-test")
        .set("spark.ui.enabled", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.driver.memory", "512m")
        .set("spark.executor.memory", "512m")
        # A task waits for its preferred executor instead of falling back after 3 s: the
        # assertions are about where tasks run, not about how long a loaded machine takes.
        .set("spark.locality.wait", "1h")
    )
    starved = sys.argv[2:] == ["starved"]
    if starved:
        # Executors that need more cores than the worker has never start.
        conf.set("spark.executor.cores", "2")
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    result: dict[str, object] = {"pyspark": sc.version}
    if starved:
        try:
            result["executors"] = wait_for_executors(sc, 1, STARVED_WAIT_S)
            result["waiting_threads"] = [t.name for t in threading.enumerate() if "executor-wait" in t.name]
        finally:
            sc.stop()
        print("RESULT " + json.dumps(result), flush=True)
        return
    try:
        executors = wait_for_executors(sc, 2 if master.startswith("local-cluster") else 1, EXECUTOR_WAIT_S)
        result["executors"] = executors
        result["executor_locations"] = executor_locations(sc)
        # More executors than there are: returns what is there once the (short) wait is over.
        result["too_many_wanted"] = wait_for_executors(sc, len(executors) + 1, 1.0)
        result["empty"] = located_rdd(sc, []).collect()
        runs = {}
        for host, executor_id in executors:
            runs[executor_id] = run(sc, [(b"\x00\xffone-" + executor_id.encode(), [loc(host, executor_id)])])
        result["single"] = runs
        if len(executors) >= 2:
            (host_a, a), (host_b, b) = executors[0], executors[1]
            mixed = [
                [loc(host_a, a)],
                [loc(host_b, b)],
                [host_a],
                [loc(host_b, b)],
                [loc(host_a, a)],
                [loc(host_b, b)],
                [loc(host_a, a), loc(host_b, b)],
            ]
            result["mixed_preferences"] = mixed
            result["mixed"] = run(sc, [(f"block-{i}".encode(), p) for i, p in enumerate(mixed)])
            unpreferred = [[loc(host_a, a)], [], [loc(host_b, b)], [loc(host_b, b)]]
            result["unpreferred_preferences"] = unpreferred
            [stored] = (
                located_rdd(sc, [(b"\x00block\xff", [loc(host_a, a)])])
                .mapPartitionsWithIndex(store_a_block)
                .collect()
            )
            [read] = (
                located_rdd(sc, [(stored["path"].encode(), [loc(host_b, b)])])
                .mapPartitionsWithIndex(read_a_block)
                .collect()
            )
            shutil.rmtree(os.path.dirname(stored["path"]), ignore_errors=True)
            result["cross_executor"] = {"stored": stored, "read": read}
            result["unpreferred"] = run(sc, [(f"free-{i}".encode(), p) for i, p in enumerate(unpreferred)])
    finally:
        sc.stop()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

"""A streaming application that a test stops with SIGTERM, in a process of its own.

    python -m tests.streaming.sigterm_child OUTPUT

Receives 0, 1, 2, ... from an in-process receiver with ``spark.streaming.stopGracefullyOnShutdown``
on. Appends to OUTPUT one JSON line per batch, ``{"count": n, "sum": s}``, and, when the
receiver's thread ends, ``{"received": n}``. Prints ``started`` once running, then waits in
``awaitTermination``: only the context's SIGTERM handler can stop it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from pyspark import SparkConf, SparkContext

from reliable_kafka.context import StreamingContext
from reliable_kafka.dstream.receiver_input_dstream import ReceiverInputDStream
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.storage.storage_level import StorageLevel


def append(path: str, entry: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class CountingReceiver(Receiver):
    def __init__(self, output: str) -> None:
        super().__init__(StorageLevel.MEMORY_ONLY)
        self.output = output
        self._stopping = threading.Event()

    def on_start(self) -> None:
        self._stopping.clear()
        self.start_receiving_thread(self._receive, "counting-receiver")

    def on_stop(self) -> None:
        self._stopping.set()

    def _receive(self) -> None:
        stored = 0
        while not self._stopping.is_set():
            self.store(stored)
            stored += 1
            time.sleep(0.001)
        append(self.output, {"received": stored})


class CountingStream(ReceiverInputDStream):
    def __init__(self, ssc: StreamingContext, output: str) -> None:
        super().__init__(ssc)
        self.output = output

    def get_receiver(self) -> Receiver:
        return CountingReceiver(self.output)


def main(output: str) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName("sigterm-child")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.streaming.blockInterval", "100ms")
        .set("spark.streaming.stopGracefullyOnShutdown", "true")
        # A graceful stop processes what was received only within this bound (Spark's default is
        # ten batches, 5 s here): a loaded machine took longer, and the stop then dropped the rest
        # as it should. The test is about the drain, so the bound is far off.
        .set("spark.streaming.gracefulStopTimeout", "120s")
        # The receiver is a class of this script, with no descriptor to rebuild it on an executor.
        .set("spark.streaming.receiver.placement", "driver")
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    ssc = StreamingContext(sc, 0.5)

    def write_batch(rdd: Any) -> None:
        records = rdd.collect()
        append(output, {"count": len(records), "sum": sum(records)})

    CountingStream(ssc, output).foreachRDD(write_batch)
    ssc.start()
    print("started", flush=True)
    ssc.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

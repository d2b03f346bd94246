"""A driver holding its checkpoint's lease, in a process of its own, for the lease's driver tests
(tests/e2e/test_checkpoint_lease.py).

    python -m tests.e2e.lease_child --run N --checkpoint DIR --output FILE [--lease-timeout 5s]

A queue stream of one small RDD a batch, checkpointed every batch, no Kafka (the lease is the
checkpoint's business); its sink appends each batch's time (ms) as a line to ``--output``,
fsync'ed. Prints ``started`` once running, then waits: SIGTERM stops it gracefully (exit 0).
Once ``--pause-file`` exists, the next batch's sink SIGSTOPs the process at a quiet moment (half a
batch in: the driver is writing nothing then): a long pause, until the test's SIGCONT.
When another driver takes its checkpoint over, its context stops and ``awaitTermination``
raises: it logs ``stopped: <the error>`` and exits 3.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from datetime import datetime

from pyspark import RDD, SparkConf, SparkContext

from reliable_kafka import StreamingContext
from reliable_kafka.dstream.functions import time_ms_of

STOPPED_BY_ERROR_EXIT = 3


def build(
    sc: SparkContext, batch_s: float, output: str | None = None, pause_file: str | None = None
) -> StreamingContext:
    """The application's graph; the tests build the same one to recover from its checkpoint."""
    ssc = StreamingContext(sc, batch_s)
    paused: list[int] = []

    def sink(batch_time: datetime, rdd: RDD[int]) -> None:
        if pause_file is not None and not paused and os.path.exists(pause_file):
            paused.append(time_ms_of(batch_time))
            # Half a batch into this one: the job generator has written what it writes for this
            # batch, and the next batch is as far off. A pause there interrupts no write.
            time.sleep(batch_s / 2)
            os.kill(os.getpid(), signal.SIGSTOP)
        rdd.count()
        if output is not None:
            fd = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{time_ms_of(batch_time)}\n".encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    ssc.queueStream([], default=sc.parallelize([1, 2, 3])).foreachRDD(sink)
    return ssc


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--pause-file")
    parser.add_argument("--batch-s", type=float, default=0.5)
    parser.add_argument("--lease-timeout", default="5s")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("reliable_kafka.checkpoint_lease").setLevel(logging.INFO)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName(f"lease-child-{args.run}")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.streaming.ui.enabled", "false")
        .set("spark.streaming.checkpoint.leaseTimeout", args.lease_timeout)
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    ssc = StreamingContext.getOrCreate(
        args.checkpoint, lambda: build(sc, args.batch_s, args.output, args.pause_file)
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ssc.start()
    print("started", flush=True)
    try:
        while not stop.is_set():
            ssc.awaitTerminationOrTimeout(0.2)  # raises why the context stopped by itself
    except Exception as exc:
        logging.getLogger(__name__).error("stopped: %s", exc)
        return STOPPED_BY_ERROR_EXIT
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A task function that imports nothing of reliable_kafka: what a fresh Python worker holds
before a task's own imports (tests/util/test_worker_daemon.py)."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterable, Iterator


def worker_state(_items: Iterable[object]) -> Iterator[tuple[str, list[str], str, int]]:
    """The command line of the process the worker was forked from, which of this package's task
    modules the worker had imported when the task started, where its pyspark came from, and how
    many objects its garbage collector leaves alone (frozen by the daemon before the fork)."""
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().replace(b"\0", b" ").decode()
    wanted = ("reliable_kafka.receiver.receiver_task", "reliable_kafka.dstream.batch_rdd")
    pyspark_file = sys.modules["pyspark"].__file__ or ""
    yield parent, [name for name in wanted if name in sys.modules], pyspark_file, gc.get_freeze_count()

"""Worker threads that run a connection's incoming requests, off its reader thread."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

Task = Callable[[], None]


class Dispatcher:
    """Runs submitted tasks on up to ``max_threads`` threads, started only when needed.

    A thread is started whenever a task arrives and no thread is free, so a task that waits on
    a later one (a handler calling back over its own connection, whose peer calls us again) is
    not stuck behind it until ``max_threads`` are busy. ``max_threads=1`` keeps tasks in order.
    """

    def __init__(self, name: str, max_threads: int) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be >= 1")
        self._name = name
        self._max_threads = max_threads
        self._queue: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # Threads waiting for a task, less the tasks already queued for them.
        self._free = 0
        self._closed = False

    def submit(self, task: Task) -> bool:
        """Queue ``task``; False once closed."""
        with self._lock:
            if self._closed:
                return False
            self._queue.put(task)
            if self._free > 0:
                self._free -= 1
            elif len(self._threads) < self._max_threads:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return True

    def close(self) -> None:
        """Stop taking tasks; threads finish the task they run and drop the queued ones."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = len(self._threads)
        for _ in range(threads):
            self._queue.put(None)

    def join(self, timeout_s: float | None) -> None:
        """Wait for the workers, ``timeout_s`` in all (one deadline, not one per worker)."""
        with self._lock:
            threads = list(self._threads)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def _work(self) -> None:
        # A new thread was started for a task already queued: its first get is that task's.
        while True:
            task = self._queue.get()
            if task is None:
                return
            with self._lock:
                closed = self._closed
            if not closed:
                try:
                    task()
                except Exception:
                    logger.exception("Task of %s failed", self._name)
            with self._lock:
                if self._closed:
                    return
                self._free += 1

"""A fixed pool of daemon worker threads returning ``concurrent.futures.Future``s.

``ThreadPoolExecutor``'s workers are not daemons and are joined at interpreter exit, so one
write hung on a dead filesystem would hang the process on exit; these workers are daemons, and
``shutdown`` joins them with a bound.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

_Task = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]


class DaemonThreadPool:
    def __init__(self, num_threads: int, name: str) -> None:
        if num_threads <= 0:
            raise ValueError(f"a pool needs at least one thread, got {num_threads}")
        self._num_threads = num_threads
        self.name = name
        self._tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shutdown = False

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError(f"thread pool {self.name} is shut down")
            if not self._threads:
                # Started on first use: handlers that never store a block cost no threads.
                for index in range(self._num_threads):
                    thread = threading.Thread(target=self._work, name=f"{self.name}-{index}", daemon=True)
                    thread.start()
                    self._threads.append(thread)
            self._tasks.put((future, fn, args))
        return future

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            future, fn, args = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)

    def shutdown(self, timeout_s: float | None = None, *, quiet: bool = False) -> bool:
        """Run what is queued, then stop the workers; waits at most ``timeout_s`` in all (one
        deadline for every worker: per-worker bounds would add up to workers x timeout). True if
        every worker ended; each that did not is logged at WARNING, or at DEBUG if ``quiet`` (a
        caller that says what its workers were doing)."""
        with self._lock:
            if self._shutdown:
                return not any(thread.is_alive() for thread in self._threads)
            self._shutdown = True
            threads = list(self._threads)
        for _ in threads:
            self._tasks.put(None)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        finished = True
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                finished = False
                logger.log(
                    logging.DEBUG if quiet else logging.WARNING,
                    "Worker %s of %s did not finish within %s s",
                    thread.name,
                    self.name,
                    timeout_s,
                )
        return finished
